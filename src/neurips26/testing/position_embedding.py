"""A position-embedding test kit for attention on the sphere (shipped with SpRePE, usable for any PE).

A spherical position embedding is seen through the three hooks attention uses (duck-typed, see
:class:`SphericalPEHooks`): ``embed_tokens(x, xyz)`` (additive absolute), ``encode(x, xyz)`` (q/k transform)
and ``attention_bias(xyz_q, xyz_k)`` (``(H, Nq, Nk)`` bias or ``None``), plus ``dim`` (feature size) and
``transforms_qk``. From them the kit builds the single-head attention logit

    s(q, k; p, r) = < E(A(q, p), p), E(A(k, r), r) > + mean_h b_h(p, r)

(A = embed_tokens, E = encode, b = attention_bias) and the embedding's *relative kernel*

    K(p, r) = A0(p) . A0(r) + tr(M(p)^T M(r)) / dim + mean_h b_h(p, r)

(A0 = the additive embedding alone, M(p) = the matrix of ``encode`` at p), and certifies:

* seam continuity   -- logits just west and just east of lon = +-180 agree;
* pole regularity   -- logits at (and within 1e-7 degrees of) each pole do not depend on longitude;
* antipode distinguishability -- logits at p and -p differ;
* rotation invariance of the relative term -- K(Rp, Rr) = K(p, r) for random rotations R;
* norm preservation -- ||encode(x, p)|| = ||x|| (only for q/k transforms).

Everything runs in float64 on a copy of the module. Differences are relative to the spread of the logits
(or of K) over random positions, so one tolerance fits every embedding.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "PositionEmbeddingCertificate",
    "SphericalPEHooks",
    "assert_certificate",
    "certify_position_embedding",
    "relative_kernel",
    "score",
]

_SEAM_OFFSET_DEG = 1e-7
_POLE_OFFSET_DEG = 1e-7


class SphericalPEHooks(Protocol):
    """What the kit needs from a position embedding (positions are unit vectors ``(N, 3)``)."""

    dim: int
    transforms_qk: bool

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor: ...

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor: ...

    def attention_bias(self, xyz_q: Tensor, xyz_k: Tensor) -> Tensor | None: ...


@dataclasses.dataclass(frozen=True)
class PositionEmbeddingCertificate:
    """Measured defects (relative to the logit spread) and the verdicts at tolerance ``tol``."""

    seam_jump: float
    pole_spread: float
    antipode_gap: float
    rotation_defect: float
    norm_defect: float | None
    tol: float

    @property
    def seam_continuous(self) -> bool:
        return self.seam_jump <= self.tol

    @property
    def pole_regular(self) -> bool:
        return self.pole_spread <= self.tol

    @property
    def antipode_distinguishing(self) -> bool:
        return self.antipode_gap > 100 * self.tol

    @property
    def relative_rotation_invariant(self) -> bool:
        return self.rotation_defect <= self.tol

    @property
    def norm_preserving(self) -> bool | None:
        return None if self.norm_defect is None else self.norm_defect <= self.tol

    def verdicts(self) -> dict[str, bool | None]:
        return {
            "seam_continuous": self.seam_continuous,
            "pole_regular": self.pole_regular,
            "antipode_distinguishing": self.antipode_distinguishing,
            "relative_rotation_invariant": self.relative_rotation_invariant,
            "norm_preserving": self.norm_preserving,
        }


def latlon_points(lat_deg: np.ndarray, lon_deg: np.ndarray) -> Tensor:
    """Unit vectors (float64) from degree arrays of equal shape."""
    phi, lam = np.deg2rad(lat_deg), np.deg2rad(lon_deg)
    xyz = np.stack((np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)), axis=-1)
    return torch.from_numpy(xyz)


def random_points(generator: np.random.Generator, n: int) -> Tensor:
    v = generator.standard_normal((n, 3))
    return torch.from_numpy(v / np.linalg.norm(v, axis=-1, keepdims=True))


def score(pe: SphericalPEHooks, q: Tensor, k: Tensor, xyz_q: Tensor, xyz_k: Tensor) -> Tensor:
    """Single-head logits ``(Nq, Nk)`` of queries ``q`` ``(Nq, dim)`` at ``xyz_q`` and keys at ``xyz_k``."""
    q_enc = pe.encode(pe.embed_tokens(q, xyz_q), xyz_q)
    k_enc = pe.encode(pe.embed_tokens(k, xyz_k), xyz_k)
    logits = q_enc @ k_enc.T
    bias = pe.attention_bias(xyz_q, xyz_k)
    return logits if bias is None else logits + bias.reshape(-1, *logits.shape).mean(0)


def relative_kernel(pe: SphericalPEHooks, xyz_a: Tensor, xyz_b: Tensor) -> Tensor:
    """The relative kernel K(p, r) ``(Na, Nb)`` defined in the module docstring."""
    dim = pe.dim
    additive_a = pe.embed_tokens(torch.zeros(xyz_a.shape[0], dim, dtype=xyz_a.dtype), xyz_a)
    additive_b = pe.embed_tokens(torch.zeros(xyz_b.shape[0], dim, dtype=xyz_b.dtype), xyz_b)
    kernel = additive_a @ additive_b.T
    eye = torch.eye(dim, dtype=xyz_a.dtype)
    columns_a = pe.encode(eye[:, None, :].expand(dim, xyz_a.shape[0], dim), xyz_a)  # [d, i] = M(p_i) e_d
    columns_b = pe.encode(eye[:, None, :].expand(dim, xyz_b.shape[0], dim), xyz_b)
    kernel = kernel + torch.einsum("dic,djc->ij", columns_a, columns_b) / dim
    bias = pe.attention_bias(xyz_a, xyz_b)
    return kernel if bias is None else kernel + bias.reshape(-1, *kernel.shape).mean(0)


def spread(values: Tensor) -> float:
    """A scale for relative comparisons: the standard deviation, floored so constants do not divide by 0."""
    return max(float(values.std()), 1e-12)


def measure_seam_jump(pe: SphericalPEHooks, q: Tensor, k: Tensor, refs: Tensor, scale: float) -> float:
    lats = np.linspace(-80.0, 80.0, q.shape[0])
    west = latlon_points(lats, np.full_like(lats, 180.0 - _SEAM_OFFSET_DEG))
    east = latlon_points(lats, np.full_like(lats, -180.0 + _SEAM_OFFSET_DEG))
    return float((score(pe, q, k, west, refs) - score(pe, q, k, east, refs)).abs().max()) / scale


def measure_pole_spread(pe: SphericalPEHooks, q: Tensor, k: Tensor, refs: Tensor, scale: float) -> float:
    worst = 0.0
    lons = np.linspace(-180.0, 180.0, 13)[:-1]
    for sign in (1.0, -1.0):
        for lat in (90.0, 90.0 - _POLE_OFFSET_DEG):
            points = latlon_points(np.full_like(lons, sign * lat), lons)
            same_q = q[:1].expand(len(lons), -1)
            logits = score(pe, same_q, k, points, refs)  # (n_lon, n_ref)
            worst = max(worst, float((logits - logits[:1]).abs().max()) / scale)
    return worst


def measure_antipode_gap(
    pe: SphericalPEHooks, q: Tensor, k: Tensor, points: Tensor, refs: Tensor, scale: float
) -> float:
    return float((score(pe, q, k, points, refs) - score(pe, q, k, -points, refs)).abs().max()) / scale


def measure_rotation_defect(pe: SphericalPEHooks, points: Tensor, generator: np.random.Generator) -> float:
    from scipy.spatial.transform import Rotation

    base = relative_kernel(pe, points, points)
    scale = max(spread(base), float(base.abs().max()) * 1e-9, 1e-12)
    worst = 0.0
    for matrix in Rotation.random(3, random_state=generator).as_matrix():
        rotated = points @ torch.from_numpy(matrix).T
        worst = max(worst, float((relative_kernel(pe, rotated, rotated) - base).abs().max()) / scale)
    return worst


def measure_norm_defect(pe: SphericalPEHooks, x: Tensor, points: Tensor) -> float:
    norms = x.norm(dim=-1)
    return float(((pe.encode(x, points).norm(dim=-1) - norms).abs() / norms).max())


def certify_position_embedding(
    pe: SphericalPEHooks, *, num_points: int = 16, seed: int = 0, tol: float = 1e-5
) -> PositionEmbeddingCertificate:
    """Measure the five properties of a spherical position embedding (float64, on a copy of ``pe``).

    Parameters
    ----------
    pe : a module with the :class:`SphericalPEHooks` hooks.
    num_points : random positions per check.
    seed : seeds the random queries, keys, positions and rotations.
    tol : relative tolerance of the verdicts (antipodes must differ by more than ``100 * tol``).
    """
    probe = copy.deepcopy(pe).double() if isinstance(pe, torch.nn.Module) else pe
    generator = np.random.default_rng(seed)
    with torch.no_grad():
        q = torch.from_numpy(generator.standard_normal((num_points, probe.dim)))
        k = torch.from_numpy(generator.standard_normal((num_points, probe.dim)))
        points = random_points(generator, num_points)
        refs = random_points(generator, num_points)
        scale = spread(score(probe, q, k, points, refs))
        norm_defect = (
            measure_norm_defect(probe, q, points) if getattr(probe, "transforms_qk", False) else None
        )
        return PositionEmbeddingCertificate(
            seam_jump=measure_seam_jump(probe, q, k, refs, scale),
            pole_spread=measure_pole_spread(probe, q, k, refs, scale),
            antipode_gap=measure_antipode_gap(probe, q, k, points, refs, scale),
            rotation_defect=measure_rotation_defect(probe, points, generator),
            norm_defect=norm_defect,
            tol=tol,
        )


def assert_certificate(pe: SphericalPEHooks, expected: dict[str, bool | None], **kwargs: object) -> None:
    """Certify ``pe`` and raise ``AssertionError`` listing every verdict that differs from ``expected``."""
    certificate = certify_position_embedding(pe, **kwargs)  # type: ignore[arg-type]
    verdicts = certificate.verdicts()
    unknown = sorted(set(expected) - set(verdicts))
    if unknown:
        raise ValueError(f"unknown properties {unknown}; known: {sorted(verdicts)}")
    wrong = {name: (verdicts[name], want) for name, want in expected.items() if verdicts[name] != want}
    if wrong:
        details = ", ".join(f"{name}: got {got}, expected {want}" for name, (got, want) in wrong.items())
        raise AssertionError(f"{type(pe).__name__} certificate mismatch ({details}); measured {certificate}")
