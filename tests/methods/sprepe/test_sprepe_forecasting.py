"""SpRePE Task B: the shallow-water forecaster and its scores (split from test_sprepe.py)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.sprepe import SpRePEExperimentConfig, latlon_to_xyz
from neurips26.methods.sprepe.vit import patch_centres

torch.set_num_threads(1)


# --- Task B: the forecaster and its scores -----------------------------------------------------------------


def tiny_forecaster(pe_name: str = "sprepe_sh"):
    from neurips26.methods.sprepe.experiment import SYSTEMS
    from neurips26.methods.sprepe.forecasting import SphericalForecaster
    from neurips26.methods.sprepe.vit import grid_patch_centres

    config = SpRePEExperimentConfig(
        embed_dim=32, depth=1, grid_height=8, grid_width=16, patch_height=4, patch_width=8
    )
    lat = np.linspace(80.0, -80.0, 8)
    lon = np.linspace(-180.0, 180.0, 16, endpoint=False)
    xyz = grid_patch_centres(lat, lon, 4, 4)
    pe = SYSTEMS[pe_name](config).build(xyz)
    model = SphericalForecaster(
        pe, xyz, channels=3, height=8, width=16, patch_height=4, patch_width=4, dim=32, depth=1, num_heads=2
    )
    return model, lat


@pytest.mark.parametrize("pe_name", ["sprepe_sh", "axial_rope", "geodesic_bias", "learned_ape"])
def test_untrained_forecaster_is_persistence_and_rollout_has_the_right_shape(pe_name: str) -> None:
    """Degenerate equivalence: with the zero-initialised decoder the forecast is the input state."""
    from neurips26.methods.sprepe.forecasting import rollout

    model, _ = tiny_forecaster(pe_name)
    fields = torch.randn(2, 3, 8, 16)
    torch.testing.assert_close(model(fields), fields)
    assert rollout(model, fields, 3).shape == (2, 3, 3, 8, 16)
    torch.nn.init.normal_(model.decode.weight, std=0.1)
    assert not torch.allclose(model(fields), fields)


def test_forecaster_decoder_puts_each_token_back_on_its_patch() -> None:
    """Oracle: a decoder emitting 100 * token + output index lands on pixel (c, r, x) as a naive loop says."""

    class TokenIndex(torch.nn.Module):
        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            index = torch.arange(tokens.shape[1], dtype=tokens.dtype)[None, :, None] * 100
            return (index + torch.arange(3 * 16, dtype=tokens.dtype)).expand(tokens.shape[0], -1, -1)

    model, _ = tiny_forecaster("none")
    model.decode = TokenIndex()
    out = model(torch.zeros(1, 3, 8, 16))
    expected = torch.empty(3, 8, 16)
    for c in range(3):
        for r in range(8):
            for x in range(16):
                expected[c, r, x] = 100 * ((r // 4) * 4 + x // 4) + c * 16 + (r % 4) * 4 + x % 4
    torch.testing.assert_close(out[0], expected)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 10.0))
def test_weighted_rmse_matches_a_loop_and_acc_is_scale_invariant(seed: int, scale: float) -> None:
    from neurips26.methods.sprepe.forecasting import anomaly_correlation, latitude_weighted_rmse

    g = torch.Generator().manual_seed(seed)
    f, o = torch.randn(2, 5, 6, generator=g, dtype=torch.float64), torch.randn(2, 5, 6, generator=g).double()
    w = torch.rand(5, generator=g, dtype=torch.float64) + 0.1
    naive = [
        math.sqrt(
            sum(w[i] * (f[b, i, j] - o[b, i, j]) ** 2 for i in range(5) for j in range(6)) / (6 * w.sum())
        )
        for b in range(2)
    ]
    torch.testing.assert_close(latitude_weighted_rmse(f, o, w), torch.tensor(naive, dtype=torch.float64))
    climate = torch.randn(5, 1, generator=g, dtype=torch.float64)
    acc = anomaly_correlation(f, o, climate, w)
    assert torch.all(acc.abs() <= 1 + 1e-12)
    scaled = anomaly_correlation(climate + scale * (f - climate), o, climate, w)
    torch.testing.assert_close(acc, scaled)
    torch.testing.assert_close(anomaly_correlation(o, o, climate, w), torch.ones(2, dtype=torch.float64))


def test_grid_patch_centres_are_normalised_mean_unit_vectors() -> None:
    from neurips26.methods.sprepe.core import xyz_to_latlon
    from neurips26.methods.sprepe.spherical import equiangular_grid
    from neurips26.methods.sprepe.vit import grid_patch_centres

    lat, lon = equiangular_grid(32, 64)
    centres = grid_patch_centres(lat, lon, 4, 8)
    points = latlon_to_xyz(
        torch.tensor(np.repeat(lat, 64)).double(), torch.tensor(np.tile(lon, 32)).double()
    ).reshape(32, 64, 3)
    naive = torch.stack(
        [
            points[4 * r : 4 * r + 4, 8 * c : 8 * c + 8].reshape(-1, 3).mean(0)
            for r in range(8)
            for c in range(8)
        ]
    )
    torch.testing.assert_close(centres.double(), naive / naive.norm(dim=-1, keepdim=True), atol=1e-6, rtol=0)
    # same longitudes as the cell-centred patch centres, latitudes within a degree (pulled towards the poles)
    got, ref = xyz_to_latlon(centres), xyz_to_latlon(patch_centres(32, 64, 4, 8))
    torch.testing.assert_close(got[1], ref[1], atol=1e-3, rtol=0)
    assert float((got[0] - ref[0]).abs().max()) < 1.0
    with pytest.raises(ValueError, match="must divide"):
        grid_patch_centres(lat, lon, 5, 8)


def test_forecast_scores_of_persistence_and_of_the_truth() -> None:
    from neurips26.methods.sprepe.forecasting import forecast_scores, prepare_forecast_data

    rng = np.random.default_rng(0)
    lat = np.linspace(80.0, -80.0, 8)
    fields = rng.standard_normal((4, 7, 3, 8, 16)).cumsum(axis=1).astype(np.float32)
    data = prepare_forecast_data(fields, lat, np.ones(8), n_train=3, polar_min_lat=60.0)
    assert data.train_inputs.shape == (3 * 6, 3, 8, 16) and data.test.shape == (1, 7, 3, 8, 16)
    persistence = forecast_scores(torch.nn.Identity(), data, rollout_steps=5)
    assert persistence["rmse_rollout"] > persistence["rmse_1step"] > 0
    with pytest.raises(ValueError, match="rollout_steps=7"):
        forecast_scores(torch.nn.Identity(), data, rollout_steps=7)
    with pytest.raises(ValueError, match="n_train=4"):
        prepare_forecast_data(fields, lat, np.ones(8), n_train=4, polar_min_lat=60.0)
