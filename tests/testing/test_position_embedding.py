"""Tests of the shared spherical position-embedding test kit on small hand-made embeddings."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from neurips26.testing.position_embedding import (
    assert_certificate,
    certify_position_embedding,
    relative_kernel,
)


class Additive(nn.Module):
    """An additive embedding given by a function of the unit vector."""

    transforms_qk = False

    def __init__(self, dim: int, feature) -> None:
        super().__init__()
        self.dim = dim
        self.feature = feature

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor:
        return x + self.feature(xyz)[..., : self.dim]

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor:
        return x

    def attention_bias(self, xyz_q: Tensor, xyz_k: Tensor) -> None:
        return None


class Scaling(Additive):
    """A q/k transform that scales by a position-dependent factor (not norm preserving)."""

    transforms_qk = True

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor:
        return x

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor:
        return x * (2.0 + xyz[..., :1])


def test_xyz_features_pass_every_check_but_norm_is_not_applicable() -> None:
    cert = certify_position_embedding(Additive(3, lambda p: p))
    assert cert.verdicts() == dict(
        seam_continuous=True,
        pole_regular=True,
        antipode_distinguishing=True,
        relative_rotation_invariant=True,
        norm_preserving=None,
    )


def test_raw_longitude_feature_breaks_the_seam_and_the_pole() -> None:
    def longitude(p: Tensor) -> Tensor:
        return torch.atan2(p[..., 1], p[..., 0]).unsqueeze(-1).expand(*p.shape[:-1], 4)

    cert = certify_position_embedding(Additive(4, longitude))
    assert not cert.seam_continuous
    assert not cert.pole_regular
    assert cert.seam_jump > 1.0


def test_even_features_cannot_tell_antipodes_apart() -> None:
    cert = certify_position_embedding(Additive(3, lambda p: p * p))
    assert not cert.antipode_distinguishing
    assert cert.seam_continuous and cert.pole_regular


def test_anisotropic_features_are_not_rotation_invariant() -> None:
    cert = certify_position_embedding(Additive(3, lambda p: p * torch.tensor([1.0, 2.0, 3.0], dtype=p.dtype)))
    assert not cert.relative_rotation_invariant


def test_norm_check_catches_a_scaling_transform() -> None:
    cert = certify_position_embedding(Scaling(4, None))
    assert cert.norm_preserving is False


def test_relative_kernel_of_xyz_features_is_the_dot_product_plus_the_identity_trace() -> None:
    p = torch.nn.functional.normalize(torch.randn(5, 3, dtype=torch.float64), dim=-1)
    # the identity q/k transform contributes tr(I) / dim = 1
    torch.testing.assert_close(relative_kernel(Additive(3, lambda v: v), p, p), p @ p.T + 1.0)


def test_assert_certificate_reports_mismatches_and_unknown_names() -> None:
    pe = Additive(3, lambda p: p * p)
    with pytest.raises(AssertionError, match="antipode_distinguishing: got False, expected True"):
        assert_certificate(pe, {"antipode_distinguishing": True})
    with pytest.raises(ValueError, match="unknown properties"):
        assert_certificate(pe, {"smoothness": True})
