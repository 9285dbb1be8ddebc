"""StyleRoute's routing evidence after the #29 speed fix: batched probes, the coarse inversion grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers.utils.torch_utils import randn_tensor

from neurips26.methods.styleroute import RegionRouter
from neurips26.methods.styleroute.data import load_content, load_style
from neurips26.methods.styleroute.guidance import adain
from neurips26.methods.styleroute.pipeline import evidence_grid, to_grid, to_tensor, upsample
from neurips26.methods.styleroute.sampler import ddim_denoise, ddim_invert
from neurips26.methods.styleroute.training import load_prior, make_scheduler
from tests.methods.styleroute_helpers import images, tiny_pipeline

torch.set_num_threads(1)


def _two_separate_probe_runs(pipe, content: torch.Tensor, style: torch.Tensor, seed: int) -> torch.Tensor:
    """The probes as two sequential runs (protect: no guidance, full ILVR; inject: AdaIN, guidance)."""
    cfg, den = pipe.route_config, pipe.denoiser
    noise = randn_tensor(content.shape, generator=torch.Generator().manual_seed(seed), dtype=content.dtype)
    ts = den.start_timesteps(cfg.num_inference_steps, cfg.probe_t)[: cfg.probe_steps]
    ones = torch.ones_like(content[:, :1])
    x0s = []
    for route, init in ((0.0 * ones, content), (ones, adain(content, style))):
        x = den.scheduler.add_noise(init, noise, ts[:1])
        for t in ts:
            x, x0 = pipe._step(x, t, content, style, route, noise, None, None, guidance=bool(route.max() > 0))
        x0s.append(x0)
    return (x0s[0] - x0s[1]).abs().mean(1)


def test_probes_equal_two_separate_reference_runs() -> None:
    pipe = tiny_pipeline(probe_scale=1)
    content, style = to_tensor(images(0, batch=2)), to_tensor(images(1))
    batched = pipe.probes(content, style, torch.Generator().manual_seed(5))
    reference = _two_separate_probe_runs(pipe, content, style, 5)
    assert batched.shape == (2, 32, 32)
    assert float(reference.abs().mean()) > 1e-3  # the two routes do differ
    assert torch.allclose(batched, reference, atol=1e-5)


def test_probes_on_a_coarse_grid_are_the_upsampled_coarse_runs() -> None:
    pipe = tiny_pipeline(probe_scale=2)
    content, style = to_tensor(images(2)), to_tensor(images(3))
    coarse = pipe.probes(content, style, torch.Generator().manual_seed(1))
    small = to_grid(content, (16, 16))
    reference = upsample(_two_separate_probe_runs(pipe, small, style, 1)[:, None], (32, 32))[:, 0]
    assert coarse.shape == (1, 32, 32)
    assert torch.allclose(coarse, reference, atol=1e-5)


def test_inversion_error_on_the_coarse_grid_and_at_full_resolution() -> None:
    content = to_tensor(images(4, batch=2))
    for scale, grid in ((1, (32, 32)), (2, (16, 16))):
        pipe = tiny_pipeline(inversion_scale=scale)
        cfg, den = pipe.route_config, pipe.denoiser
        small = to_grid(content, grid)
        latent, ts = ddim_invert(den, small, cfg.inversion_t, cfg.num_inference_steps)
        reference = upsample((ddim_denoise(den, latent, ts) - small).abs().mean(1, keepdim=True), (32, 32))
        error = pipe.inversion_error(content)
        assert error.shape == (2, 32, 32)
        assert torch.allclose(error, reference[:, 0], atol=1e-6)


@pytest.mark.parametrize(
    ("size", "scale", "grid"),
    [((64, 64), 2, (32, 32)), ((96, 64), 2, (48, 32)), ((72, 40), 2, (32, 16)), ((24, 24), 2, (24, 24))],
)
def test_evidence_grid_halves_to_multiples_of_8_or_falls_back(size, scale, grid) -> None:
    assert evidence_grid(size, scale) == grid
    assert evidence_grid(size, 1) == size


def _pixel_r_correlation(pipe_a, pipe_b, content: np.ndarray, style: np.ndarray) -> float:
    maps = []
    for pipe in (pipe_a, pipe_b):
        inputs = pipe.route_inputs(content, style, torch.Generator().manual_seed(77))
        routing = RegionRouter(pipe.route_config).route(
            content,
            style,
            0.3,
            labels=inputs.labels[0],
            inversion_error=inputs.inversion_error[0],
            disagreement=inputs.disagreement[0],
        )
        maps.append(routing.map.reshape(-1))
    return float(np.corrcoef(maps[0], maps[1])[0, 1])


def test_coarse_inversion_keeps_the_full_resolution_routing() -> None:
    """On a real prior and content, the default (coarse inversion) routes like full-resolution evidence."""
    pipe = _real_pipeline().with_config(num_inference_steps=10)
    content, style = load_content("coffee", 64), load_style("brick")
    full = pipe.with_config(inversion_scale=1, probe_scale=1)
    assert _pixel_r_correlation(pipe, full, content, style) > 0.9
    # yardstick: the random-routing control (same r values, wrong regions) is far from it
    assert _pixel_r_correlation(pipe.with_config(route_mode="random"), full, content, style) < 0.5


def _real_pipeline():
    from neurips26.methods.styleroute import StyleRoutePipeline

    return StyleRoutePipeline(load_prior("brick"), make_scheduler())


def test_bad_evidence_scales() -> None:
    for name in ("inversion_scale", "probe_scale"):
        with pytest.raises(ValueError, match=name):
            tiny_pipeline(**{name: 0})
