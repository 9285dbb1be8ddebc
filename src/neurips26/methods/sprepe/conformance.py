"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import torch

from neurips26.methods.sprepe.baselines import (
    AxialRoPE,
    EulerSphericalRoPE,
    GeodesicBiasPE,
    LatLonSinusoidalPE,
    LearnedAbsolutePE,
    SphericalHarmonicPE,
)
from neurips26.methods.sprepe.integration import PositionalSelfAttention, SpRePE, SpRePEAttention
from neurips26.testing.conformance import ModuleExample

_TOKENS = 6


def _positions() -> tuple[torch.Tensor, torch.Tensor]:
    """Latitudes and longitudes (degrees) of a few tokens spread over the sphere."""
    lat = torch.linspace(-60.0, 75.0, _TOKENS)
    lon = torch.linspace(-170.0, 150.0, _TOKENS)
    return lat, lon


def tiny_sprepe() -> ModuleExample:
    """SpRePE's q/k transform (``encode_qk``), degree 1 blocks, learnable degree weights."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    q, k = (torch.randn(2, 2, _TOKENS, 8, generator=generator) for _ in range(2))
    return ModuleExample(SpRePE(8, mode="sh", degree=1), (q, k, *_positions()), method="encode_qk")


def tiny_sprepe_xyz() -> ModuleExample:
    """SpRePE's ``"xyz"`` reflector layout (learnable angles), on the same q/k transform."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    q, k = (torch.randn(2, 2, _TOKENS, 8, generator=generator) for _ in range(2))
    return ModuleExample(SpRePE(8, mode="xyz"), (q, k, *_positions()), method="encode_qk")


def tiny_attention() -> ModuleExample:
    """A SpRePE multi-head attention block on a batch of two token sets."""
    torch.manual_seed(0)
    x = torch.randn(2, _TOKENS, 16, generator=torch.Generator().manual_seed(1))
    lat, lon = _positions()
    return ModuleExample(SpRePEAttention(16, num_heads=2, degree=1), (x, lat, lon))


def _xyz() -> torch.Tensor:
    from neurips26.methods.sprepe.core import latlon_to_xyz

    return latlon_to_xyz(*_positions())


def _attention_with(make_embedding) -> ModuleExample:
    """A multi-head attention block whose position embedding is one of the baselines SpRePE is compared to."""
    torch.manual_seed(0)
    x = torch.randn(2, _TOKENS, 16, generator=torch.Generator().manual_seed(1))
    return ModuleExample(PositionalSelfAttention(16, 2, make_embedding()), (x, _xyz()))


def tiny_learned_absolute() -> ModuleExample:
    """Attention with the learned absolute baseline embedding."""
    return _attention_with(lambda: LearnedAbsolutePE(16, _xyz()))


def tiny_latlon_sinusoidal() -> ModuleExample:
    """Attention with the latlon sinusoidal baseline embedding."""
    return _attention_with(lambda: LatLonSinusoidalPE(16))


def tiny_spherical_harmonic() -> ModuleExample:
    """Attention with the spherical harmonic baseline embedding."""
    return _attention_with(lambda: SphericalHarmonicPE(16))


def tiny_axial_rope() -> ModuleExample:
    """Attention with the axial rope baseline embedding."""
    return _attention_with(lambda: AxialRoPE(8))


def tiny_euler_rope() -> ModuleExample:
    """Attention with the euler rope baseline embedding."""
    return _attention_with(lambda: EulerSphericalRoPE(8))


def tiny_geodesic_bias() -> ModuleExample:
    """Attention with the geodesic bias baseline embedding."""
    return _attention_with(lambda: GeodesicBiasPE(16, 2))
