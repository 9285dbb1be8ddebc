"""SpRePE: Spherical Reflection Position Embedding -- a drop-in q/k position embedding for attention on S^2.

Public API: :class:`SpRePE` (the q/k transform), :class:`SpRePEAttention` (an SDPA attention block),
the baselines, the core functions and the experiment config. ``EXPERIMENT`` lives in
``neurips26.methods.sprepe.experiment`` (imported lazily by the registry).
"""

from __future__ import annotations

from neurips26.methods.sprepe.baselines import (
    AxialRoPE,
    EulerSphericalRoPE,
    GeodesicBiasPE,
    LatLonSinusoidalPE,
    LearnedAbsolutePE,
    NoPositionEmbedding,
    SphericalHarmonicPE,
)
from neurips26.methods.sprepe.config import SpRePEConfig, SpRePEExperimentConfig
from neurips26.methods.sprepe.core import (
    apply_householder,
    householder_matrix,
    latlon_to_xyz,
    sh_reflectors,
    xyz_reflectors,
    xyz_to_latlon,
    zonal_kernel,
)
from neurips26.methods.sprepe.integration import (
    PositionalSelfAttention,
    SphericalPositionEmbedding,
    SpRePE,
    SpRePEAttention,
)

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("module", "neurips26.methods.sprepe.conformance:tiny_sprepe"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_sprepe_xyz"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_attention"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_learned_absolute"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_latlon_sinusoidal"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_spherical_harmonic"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_axial_rope"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_euler_rope"),
    ("module", "neurips26.methods.sprepe.conformance:tiny_geodesic_bias"),
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); each runs through ``SpRePEAttention``; the README's "Central ideas" table says how
#: each is switched off.
IDEAS: dict[str, str] = {
    "q and k reflected blockwise by H(u(p)) of each token's own position (eq. 1)": (
        "tests/methods/sprepe/test_sprepe_ideas.py::test_idea_attention_reflects_q_and_k_by_each_tokens_own_position"
    ),
    "'sh' reflectors: a rotation-invariant zonal relative kernel (eq. 2)": (
        "tests/methods/sprepe/test_sprepe_ideas.py::test_idea_sh_reflectors_give_the_block_a_rotation_invariant_relative_kernel"
    ),
    "no N x N tensor, SDPA unmasked (RoPE's cost)": (
        "tests/methods/sprepe/test_sprepe_ideas.py::test_idea_no_pairwise_tensor_through_the_attention_block"
    ),
}

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "AxialRoPE",
    "EulerSphericalRoPE",
    "GeodesicBiasPE",
    "LatLonSinusoidalPE",
    "LearnedAbsolutePE",
    "NoPositionEmbedding",
    "PositionalSelfAttention",
    "SpRePE",
    "SpRePEAttention",
    "SpRePEConfig",
    "SpRePEExperimentConfig",
    "SphericalHarmonicPE",
    "SphericalPositionEmbedding",
    "apply_householder",
    "householder_matrix",
    "latlon_to_xyz",
    "sh_reflectors",
    "xyz_reflectors",
    "xyz_to_latlon",
    "zonal_kernel",
]
