"""Tests of SpRePE (Spherical Reflection Position Embedding), its baselines and its experiment."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from scipy.special import eval_legendre

from neurips26.methods.sprepe import (
    AxialRoPE,
    EulerSphericalRoPE,
    GeodesicBiasPE,
    LatLonSinusoidalPE,
    LearnedAbsolutePE,
    NoPositionEmbedding,
    PositionalSelfAttention,
    SphericalHarmonicPE,
    SpRePE,
    SpRePEAttention,
    SpRePEConfig,
    SpRePEExperimentConfig,
    apply_householder,
    householder_matrix,
    latlon_to_xyz,
    zonal_kernel,
)
from neurips26.methods.sprepe.vit import patch_centres
from neurips26.testing import requires_package
from neurips26.testing.position_embedding import assert_certificate

torch.set_num_threads(1)
README = Path(__file__).parents[3] / "src" / "neurips26" / "methods" / "sprepe" / "README.md"


def unit(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    v = torch.from_numpy(rng.standard_normal((*shape, 3)))
    return v / v.norm(dim=-1, keepdim=True)


# --- Householder reflections -------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 20), st.integers(0, 10_000))
def test_householder_matrix_is_symmetric_orthogonal_involution(n: int, seed: int) -> None:
    u = torch.from_numpy(np.random.default_rng(seed).standard_normal(n))
    u = u / u.norm()
    h = householder_matrix(u)
    torch.testing.assert_close(h, h.T)
    torch.testing.assert_close(h @ h.T, torch.eye(n, dtype=h.dtype))
    assert float(torch.linalg.det(h)) == pytest.approx(-1.0)


def test_apply_householder_matches_matrix_oracle_and_passes_extra_channels() -> None:
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((2, 3, 5, 11)))  # 2 blocks of 4 + 3 pass-through channels
    u = torch.from_numpy(rng.standard_normal((5, 2, 4)))
    u = u / u.norm(dim=-1, keepdim=True)
    out = apply_householder(x, u)
    for i in range(5):
        for b in range(2):
            block = x[..., i, 4 * b : 4 * b + 4]
            torch.testing.assert_close(out[..., i, 4 * b : 4 * b + 4], block @ householder_matrix(u[i, b]).T)
    torch.testing.assert_close(out[..., 8:], x[..., 8:])


@pytest.mark.parametrize("mode", ["sh", "xyz"])
def test_reflectors_are_unit_vectors(mode: str) -> None:
    pe = SpRePE(32, mode=mode).double()
    u = pe.reflectors(unit(np.random.default_rng(1), 50))
    torch.testing.assert_close(u.norm(dim=-1), torch.ones(u.shape[:-1], dtype=u.dtype))


# --- The relative-position identities ----------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 4))
def test_sh_relative_kernel_is_legendre_addition_theorem(seed: int, degree: int) -> None:
    rng = np.random.default_rng(seed)
    pe = SpRePE(2 * (degree + 1) ** 2, mode="sh", degree=degree).double()
    with torch.no_grad():
        pe.degree_logits.copy_(torch.from_numpy(rng.standard_normal((2, degree + 1))))
    p, r = unit(rng, 6), unit(rng, 7)
    u_p, u_r = pe.reflectors(p), pe.reflectors(r)  # (N, nb, n)
    cos_gamma = (p @ r.T).numpy()
    for b in range(2):
        w = pe.degree_weights()[b].detach().numpy()
        legendre = sum(w[ell] * eval_legendre(ell, cos_gamma) for ell in range(degree + 1))
        gram = (u_p[:, b] @ u_r[:, b].T).detach().numpy()
        np.testing.assert_allclose(gram, legendre, atol=1e-10)
        closed_form = zonal_kernel(torch.from_numpy(cos_gamma), torch.from_numpy(w)).numpy()
        np.testing.assert_allclose(closed_form, legendre, atol=1e-12)


def test_logit_expansion_eq1_holds() -> None:
    """q~_i . k~_j = q.k - 2(q.u_i)(u_i.k) - 2(q.u_j)(u_j.k) + 4(q.u_i)(u_i.u_j)(u_j.k) per block."""
    rng = np.random.default_rng(2)
    pe = SpRePE(16, mode="sh", degree=3).double()
    p, r = unit(rng, 1), unit(rng, 1)
    q, k = torch.from_numpy(rng.standard_normal((1, 16))), torch.from_numpy(rng.standard_normal((1, 16)))
    ui, uj = pe.reflectors(p)[0, 0], pe.reflectors(r)[0, 0]
    expected = (
        q @ k.T
        - 2 * (q @ ui) * (ui @ k.T)
        - 2 * (q @ uj) * (uj @ k.T)
        + 4 * (q @ ui) * (ui @ uj) * (uj @ k.T)
    )
    torch.testing.assert_close(pe.encode(q, p) @ pe.encode(k, r).T, expected.reshape(1, 1))


def test_xyz_blocks_without_constant_rotate_by_twice_the_geodesic_angle() -> None:
    rng = np.random.default_rng(3)
    p, r = unit(rng, 20), unit(rng, 20)
    product = householder_matrix(p) @ householder_matrix(r)
    gamma = torch.arccos((p * r).sum(-1))
    torch.testing.assert_close(torch.linalg.det(product), torch.ones(20, dtype=p.dtype))
    trace = product.diagonal(dim1=-2, dim2=-1).sum(-1)
    torch.testing.assert_close(trace, 1 + 2 * torch.cos(2 * gamma))  # rotation by angle 2 gamma
    axis = torch.linalg.cross(p, r)
    torch.testing.assert_close((product @ axis.unsqueeze(-1)).squeeze(-1), axis)


def test_sh_reflectors_are_rotation_equivariant_with_wigner_d() -> None:
    from e3nn import o3

    rng = np.random.default_rng(4)
    pe = SpRePE(16, mode="sh", degree=3).double()
    p = unit(rng, 12)
    rot = torch.from_numpy(Rotation.random(random_state=5).as_matrix())
    wigner = o3.Irreps("1x0e+1x1o+1x2e+1x3o").D_from_matrix(rot).to(p.dtype)  # e3nn 0.6: l=1 basis is xyz
    u_rotated = pe.reflectors(p @ rot.T)
    torch.testing.assert_close(u_rotated, pe.reflectors(p) @ wigner.T, atol=1e-5, rtol=1e-5)
    # hence logits at rotated positions equal logits of rotated queries/keys at the original ones
    q, k = torch.from_numpy(rng.standard_normal((12, 16))), torch.from_numpy(rng.standard_normal((12, 16)))
    rotated_logits = pe.encode(q, p @ rot.T) @ pe.encode(k, p @ rot.T).T
    logits = pe.encode(q @ wigner, p) @ pe.encode(k @ wigner, p).T
    torch.testing.assert_close(rotated_logits, logits, atol=1e-4, rtol=1e-5)


# --- Degenerate equivalence, SDPA, batching, state ---------------------------------------------------------


def copy_weights(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    dst.qkv.load_state_dict(src.qkv.state_dict())
    dst.proj.load_state_dict(src.proj.state_dict())


@pytest.mark.parametrize("mode", ["sh", "xyz"])
def test_fixed_reflector_reduces_to_plain_attention(mode: str) -> None:
    """With every token at one point, u is fixed, H(u)^T H(u) = I and SpRePE attention is plain attention."""
    torch.manual_seed(0)
    attention = SpRePEAttention(32, 2, mode=mode)
    plain = PositionalSelfAttention(32, 2, NoPositionEmbedding(16))
    copy_weights(plain, attention)
    x = torch.randn(3, 10, 32)
    lat, lon = torch.full((10,), 37.0), torch.full((10,), -120.0)
    torch.testing.assert_close(
        attention(x, lat, lon), plain(x, latlon_to_xyz(lat, lon)), atol=1e-5, rtol=1e-5
    )


def naive_attention(module: PositionalSelfAttention, x: torch.Tensor, xyz: torch.Tensor) -> torch.Tensor:
    batch, tokens, dim = x.shape
    heads, hd = module.num_heads, module.head_dim
    q, k, v = module.qkv(x).view(batch, tokens, 3, heads, hd).permute(2, 0, 3, 1, 4)
    pe = module.position_embedding
    logits = pe.encode(q, xyz) @ pe.encode(k, xyz).transpose(-1, -2) / math.sqrt(hd)
    bias = pe.attention_bias(xyz, xyz)
    if bias is not None:
        logits = logits + bias
    out = torch.softmax(logits, dim=-1) @ v
    return module.proj(out.transpose(1, 2).reshape(batch, tokens, dim))


@pytest.mark.parametrize("pe_name", ["sprepe_sh", "sprepe_xyz", "axial", "bias"])
def test_sdpa_output_equals_naive_attention(pe_name: str) -> None:
    torch.manual_seed(1)
    pe = {
        "sprepe_sh": lambda: SpRePE(16, "sh"),
        "sprepe_xyz": lambda: SpRePE(16, "xyz"),
        "axial": lambda: AxialRoPE(16),
        "bias": lambda: GeodesicBiasPE(32, 2),
    }[pe_name]()
    module = PositionalSelfAttention(32, 2, pe).double()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    xyz = unit(np.random.default_rng(6), 9)
    torch.testing.assert_close(module(x, xyz), naive_attention(module, x, xyz))


def test_batched_positions_equal_per_sample_positions() -> None:
    pe = SpRePE(16, "sh").double()
    rng = np.random.default_rng(7)
    xyz = unit(rng, 3, 8)
    q = torch.from_numpy(rng.standard_normal((3, 2, 8, 16)))
    batched = pe.encode(q, xyz)
    for b in range(3):
        torch.testing.assert_close(batched[b], pe.encode(q[b], xyz[b]))


def test_latlon_and_xyz_inputs_agree_and_norms_are_preserved() -> None:
    pe = SpRePE(32, "xyz")
    lat, lon = torch.tensor([-90.0, -10.0, 45.0, 90.0]), torch.tensor([0.0, 179.0, -180.0, 33.0])
    q, k = torch.randn(2, 4, 4, 32), torch.randn(2, 4, 4, 32)
    q1, k1 = pe.encode_qk(q, k, lat, lon)
    q2, k2 = pe.encode_qk(q, k, xyz=latlon_to_xyz(lat, lon))
    torch.testing.assert_close(q1, q2)
    torch.testing.assert_close(k1, k2)
    torch.testing.assert_close(q1.norm(dim=-1), q.norm(dim=-1))


def test_harmonics_cache_follows_in_place_changes() -> None:
    pe = SpRePE(16, "sh").double()
    rng = np.random.default_rng(8)
    xyz = unit(rng, 5)
    x = torch.from_numpy(rng.standard_normal((5, 16)))
    first = pe.encode(x, xyz)
    xyz.copy_(unit(rng, 5))
    torch.testing.assert_close(pe.encode(x, xyz), SpRePE(16, "sh").double().encode(x, xyz))
    assert not torch.allclose(first, pe.encode(x, xyz))


@pytest.mark.parametrize("learnable", [True, False])
def test_state_dict_round_trip(learnable: bool) -> None:
    torch.manual_seed(2)
    source = SpRePEAttention(32, 2, mode="sh", learnable=learnable)
    with torch.no_grad():
        logits = source.position_embedding.degree_logits
        logits.add_(torch.randn_like(logits))
    target = SpRePEAttention(32, 2, mode="sh", learnable=learnable)
    target.load_state_dict(source.state_dict())
    x, lat, lon = torch.randn(2, 6, 32), torch.rand(6) * 180 - 90, torch.rand(6) * 360 - 180
    torch.testing.assert_close(target(x, lat, lon), source(x, lat, lon))
    assert "position_embedding.degree_logits" in source.state_dict()
    assert source.position_embedding.degree_logits.requires_grad == learnable


def test_gradients_reach_the_reflector_parameters() -> None:
    attention = SpRePEAttention(32, 2, mode="xyz")
    attention(torch.randn(2, 6, 32), torch.rand(6) * 180 - 90, torch.rand(6) * 360 - 180).sum().backward()
    assert attention.position_embedding.alpha.grad is not None
    assert float(attention.position_embedding.alpha.grad.abs().sum()) > 0


# --- Bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 3, 16), torch.randn(1, 3, 16), torch.tensor([0.0, 91, 0]), torch.zeros(3)
            ),
            r"lat must lie in \[-90, 90\]",
        ),
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 3, 16),
                torch.randn(1, 3, 16),
                torch.zeros(3),
                torch.tensor([0.0, float("nan"), 0]),
            ),
            "lon contains non-finite",
        ),
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 3, 16),
                torch.randn(1, 3, 16),
                torch.tensor([0.0, float("inf"), 0]),
                torch.zeros(3),
            ),
            "lat contains non-finite",
        ),
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 4, 16), torch.randn(1, 4, 16), torch.zeros(3), torch.zeros(3)
            ),
            "q has 4 tokens",
        ),
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 3, 16), torch.randn(1, 3, 8), torch.zeros(3), torch.zeros(3)
            ),
            "k has last dimension 8",
        ),
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 3, 16), torch.randn(1, 3, 16), torch.zeros(3), torch.zeros(2)
            ),
            "lat and lon must have the same shape",
        ),
        (
            lambda pe: pe.encode_qk(torch.randn(1, 3, 16), torch.randn(1, 3, 16), xyz=torch.ones(3, 3)),
            "xyz must hold unit vectors",
        ),
        (
            lambda pe: pe.encode_qk(
                torch.randn(1, 3, 16), torch.randn(1, 3, 16), torch.zeros(3), torch.zeros(3), xyz=torch.eye(3)
            ),
            "not both",
        ),
        (lambda pe: pe.encode_qk(torch.randn(1, 3, 16), torch.randn(1, 3, 16)), "positions missing"),
        (lambda pe: pe.encode(torch.randn(2, 2, 3, 16), torch.eye(3).expand(5, 3, 3)), "batch size 5"),
    ],
)
def test_bad_input_raises_a_clear_error(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(SpRePE(16, "sh"))


def test_incompatible_head_dim_and_options_raise() -> None:
    with pytest.raises(ValueError, match=r"head_dim=24 is incompatible .* multiple of 16"):
        SpRePE(24, "sh", degree=3)
    with pytest.raises(ValueError, match="num_blocks=3 blocks of 9 channels"):
        SpRePE(24, "sh", degree=2, num_blocks=3)
    with pytest.raises(ValueError, match="mode='polar' is not allowed"):
        SpRePE(16, "polar")
    with pytest.raises(ValueError, match="degree must be an integer"):
        SpRePE(16, "sh", degree=-1)
    with pytest.raises(ValueError, match="multiple of num_heads"):
        SpRePEAttention(30, 4)
    assert SpRePE(24, "sh", degree=2, num_blocks=2).num_blocks == 2  # 6 channels pass through


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("split", "X/Y", "split='X/Y' is not allowed"),
        ("patch_width", 5, "must divide the grid"),
        ("n_train", 1700, "exceeds"),
        ("max_spin_deg", 200.0, "max_spin_deg"),
        ("depth", 0, "depth=0"),
        ("task", "weather", "task='weather' is not allowed"),
        ("swe_snapshots", 5, "must exceed swe_rollout_steps"),
        ("swe_patch_width", 5, "swe patch"),
        ("swe_interval_hours", 0.0, "swe_interval_hours"),
        ("swe_epochs", 0, "swe_epochs=0"),
    ],
)
def test_config_rejects_bad_values(key: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SpRePEExperimentConfig(**{key: value})


def test_method_config_rejects_bad_values_and_from_config_checks_its_type() -> None:
    with pytest.raises(ValueError, match="mode='abc' is not allowed"):
        SpRePEConfig(mode="abc")
    with pytest.raises(ValueError, match="degree must be an integer >= 0"):
        SpRePEConfig(degree=-1)
    with pytest.raises(TypeError, match="config must be a SpRePEConfig"):
        SpRePE.from_config(32, {"mode": "sh"})


def test_set_reaches_the_method_config_and_every_system_uses_the_config() -> None:
    from neurips26.methods.sprepe.experiment import EXPERIMENT

    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(profile, {"task": "digits"}, {"method.degree": 1, "embed_dim": 16})
    ours = EXPERIMENT.build_system("sprepe_sh", config)
    assert ours.settings["degree"] == 1 and ours.settings["head_dim"] == 8
    module = ours.build(patch_centres(8, 16, 4, 8))
    assert isinstance(module, SpRePE) and module.degree == 1 and module.block_size == 4
    assert EXPERIMENT.build_system("sprepe_xyz", config).settings["mode"] == "xyz"
    base = EXPERIMENT.config_for(profile, {"task": "digits"}, {})
    for name, factory in EXPERIMENT.systems.items():
        assert factory(base).settings != factory(config).settings, f"{name} ignores the config"
    with pytest.raises(ValueError, match=r"method\.degree"):
        EXPERIMENT.config_for(profile, {}, {"sprepe_degree": 1})


# --- The position-embedding test kit on SpRePE and on every baseline ---------------------------------------

GRID = patch_centres(32, 64, 4, 8)
KIT_EXPECTATIONS = {
    "sprepe_sh": (
        lambda: SpRePE(16, "sh"),
        dict(
            seam_continuous=True,
            pole_regular=True,
            antipode_distinguishing=True,
            relative_rotation_invariant=True,
            norm_preserving=True,
        ),
    ),
    "sprepe_xyz": (
        lambda: SpRePE(16, "xyz"),
        dict(
            seam_continuous=True,
            pole_regular=True,
            antipode_distinguishing=True,
            relative_rotation_invariant=True,
            norm_preserving=True,
        ),
    ),
    "sprepe_xyz_no_constant": (
        lambda: SpRePE(15, "xyz", include_constant=False),
        dict(
            seam_continuous=True,
            pole_regular=True,
            antipode_distinguishing=False,
            relative_rotation_invariant=True,
            norm_preserving=True,
        ),
    ),
    "none": (
        lambda: NoPositionEmbedding(16),
        dict(
            seam_continuous=True,
            pole_regular=True,
            antipode_distinguishing=False,
            relative_rotation_invariant=True,
            norm_preserving=None,
        ),
    ),
    "learned_ape": (
        lambda: LearnedAbsolutePE(16, GRID),
        dict(
            seam_continuous=False,
            pole_regular=False,
            antipode_distinguishing=True,
            relative_rotation_invariant=False,
            norm_preserving=None,
        ),
    ),
    "latlon_sincos": (
        lambda: LatLonSinusoidalPE(16),
        dict(
            seam_continuous=False,
            pole_regular=False,
            antipode_distinguishing=True,
            relative_rotation_invariant=False,
            norm_preserving=None,
        ),
    ),
    "sh_ape": (
        lambda: SphericalHarmonicPE(16),
        dict(
            seam_continuous=True,
            pole_regular=True,
            antipode_distinguishing=True,
            relative_rotation_invariant=True,
            norm_preserving=None,
        ),
    ),
    "axial_rope": (
        lambda: AxialRoPE(16),
        dict(
            seam_continuous=True,
            pole_regular=False,
            antipode_distinguishing=True,
            relative_rotation_invariant=False,
            norm_preserving=True,
        ),
    ),
    "euler_rope": (
        lambda: EulerSphericalRoPE(16),
        dict(
            seam_continuous=True,
            pole_regular=False,
            antipode_distinguishing=True,
            relative_rotation_invariant=False,
            norm_preserving=True,
        ),
    ),
    "geodesic_bias": (
        lambda: GeodesicBiasPE(16, 2),
        dict(
            seam_continuous=True,
            pole_regular=True,
            antipode_distinguishing=True,
            relative_rotation_invariant=True,
            norm_preserving=None,
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(KIT_EXPECTATIONS))
def test_position_embedding_kit_certificate(name: str) -> None:
    torch.manual_seed(0)
    build, expected = KIT_EXPECTATIONS[name]
    assert_certificate(build(), expected)


def test_every_experiment_system_is_certified_by_the_kit() -> None:
    from neurips26.methods.sprepe.experiment import SYSTEMS

    assert set(SYSTEMS) <= set(KIT_EXPECTATIONS)


# --- Baseline specifics ------------------------------------------------------------------------------------


def test_axial_rope_is_periodic_in_longitude_and_relative_along_a_parallel() -> None:
    pe = AxialRoPE(16).double()
    x = torch.randn(4, 16, dtype=torch.float64)
    lat = torch.full((4,), 20.0, dtype=torch.float64)
    lon = torch.tensor([-170.0, -20.0, 60.0, 175.0], dtype=torch.float64)
    torch.testing.assert_close(
        pe.encode(x, latlon_to_xyz(lat, lon)), pe.encode(x, latlon_to_xyz(lat, lon + 360))
    )
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)

    def logit(a: float, b: float) -> torch.Tensor:
        pa = latlon_to_xyz(torch.tensor([20.0], dtype=torch.float64), torch.tensor([a], dtype=torch.float64))
        pb = latlon_to_xyz(torch.tensor([20.0], dtype=torch.float64), torch.tensor([b], dtype=torch.float64))
        return pe.encode(q, pa) @ pe.encode(k, pb).T

    torch.testing.assert_close(logit(10.0, 40.0), logit(-100.0, -70.0))


def test_geodesic_bias_materialises_quadratic_tensor() -> None:
    bias = GeodesicBiasPE(32, 4).attention_bias(GRID, GRID)
    assert bias.shape == (4, GRID.shape[0], GRID.shape[0])


def test_real_spherical_harmonics_are_orthonormal_on_a_quadrature_grid() -> None:
    from neurips26.methods.sprepe.baselines import real_spherical_harmonics

    nodes, weights = np.polynomial.legendre.leggauss(12)
    lon = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    z, phi = np.meshgrid(nodes, lon, indexing="ij")
    s = np.sqrt(1 - z**2)
    xyz = np.stack((s * np.cos(phi), s * np.sin(phi), z), -1).reshape(-1, 3)
    w = np.repeat(weights, 24) * (2 * np.pi / 24)
    y = real_spherical_harmonics(xyz, 4)
    np.testing.assert_allclose((y * w[:, None]).T @ y, np.eye(25), atol=1e-10)


@requires_package("torch_harmonics")
def test_torch_harmonics_and_scipy_spherical_harmonics_agree() -> None:
    from neurips26.methods.sprepe.baselines import (
        real_spherical_harmonics,
        real_spherical_harmonics_torch_harmonics,
    )

    xyz = unit(np.random.default_rng(0), 40).numpy()
    xyz[:2] = [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]  # the poles
    np.testing.assert_allclose(
        real_spherical_harmonics_torch_harmonics(xyz, 7), real_spherical_harmonics(xyz, 7), atol=1e-12
    )
    assert SphericalHarmonicPE(64).backend == "torch_harmonics"
    with pytest.raises(ValueError, match="backend='x'"):
        SphericalHarmonicPE(64, backend="x")


def test_sprepe_attention_meets_the_module_basics() -> None:
    from neurips26.testing.modules import assert_module_basics

    torch.manual_seed(3)
    lat, lon = torch.rand(3, 7) * 180 - 90, torch.rand(3, 7) * 360 - 180  # per-sample positions (B, N)
    assert_module_basics(
        SpRePEAttention(32, 2, mode="sh"),
        [torch.randn(3, 7, 32), lat, lon],
        factory=lambda: SpRePEAttention(32, 2, mode="sh"),
    )


@settings(max_examples=25, deadline=None)
@given(
    st.floats(-90.0, 90.0),
    st.floats(-720.0, 720.0),
    st.sampled_from(["sh", "xyz"]),
    st.integers(0, 1000),
)
def test_any_latlon_preserves_norms_and_is_periodic_in_longitude(
    lat: float, lon: float, mode: str, seed: int
) -> None:
    pe = SpRePE(16, mode).double()
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 16, generator=generator, dtype=torch.float64)
    lat_t, lon_t = torch.tensor([lat], dtype=torch.float64), torch.tensor([lon], dtype=torch.float64)
    q1, _ = pe.encode_qk(q, q, lat_t, lon_t)
    q2, _ = pe.encode_qk(q, q, lat_t, lon_t + 360.0)
    torch.testing.assert_close(q1.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(q1, q2, atol=1e-9, rtol=1e-9)


def test_module_apply_reaches_the_embedding_inside_a_model() -> None:
    """``model.apply(init_fn)`` (nn.Module's visitor) works on a model holding a SpRePE: not shadowed."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), SpRePEAttention(32, 2, mode="sh"))
    visited: list[str] = []
    model.apply(lambda module: visited.append(type(module).__name__))
    assert "SpRePE" in visited and "SpRePEAttention" in visited
    q = torch.randn(2, 5, 32)
    lat, lon = torch.rand(5) - 0.5, torch.rand(5) * 6
    encoded_q, encoded_k = SpRePE(32, mode="xyz").encode_qk(q, q, lat, lon)
    torch.testing.assert_close(encoded_q, encoded_k)
