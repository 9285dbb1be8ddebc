"""SpRePE: Spherical Reflection Position Embedding -- the position-embedding baselines it is compared with.

Every baseline is a :class:`~neurips26.methods.sprepe.integration.SphericalPositionEmbedding`, so it plugs
into the same attention block and the same test kit. Provenance:

- ``NoPositionEmbedding``: re-implemented (trivial).
- ``LearnedAbsolutePE``: re-implemented; a learned vector per token of a fixed grid (ViT/ClimaX style).
- ``LatLonSinusoidalPE``: re-implemented; sinusoids of latitude and longitude (Cartesian-grid style).
- ``SphericalHarmonicPE``: library adapter over torch-harmonics 0.8.0's orthonormal associated Legendre
  functions (``torch_harmonics.legendre.legpoly``) when it is installed, else re-implemented with
  ``scipy.special.sph_harm_y`` (the two agree to 1e-12, tested). It mirrors the ``SpectralPositionEmbedding``
  of torch-harmonics 0.9.x, which needs torch >= 2.6 binaries (0.9.0) or torch 2.11/>=2.14 (0.9.2/0.9.3).
- ``AxialRoPE``: library adapter over ``rotary_embedding_torch`` (lucidrains) frequencies and
  ``apply_rotary_emb``, with *integer* longitude frequencies so it is 2 pi periodic.
- ``EulerSphericalRoPE``: re-implemented; 3-D rotation blocks R_z(f lon) R_y(-f lat) (Unlu 2023, "geotokens").
- ``GeodesicBiasPE``: re-implemented; a learned per-head bias sum_k c_hk cos(k gamma_ij) of the geodesic
  angle, materialised as an (H, N, N) ``attn_mask`` (quadratic memory, measured in the benchmark).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

from neurips26.methods.sprepe.core import xyz_to_latlon
from neurips26.methods.sprepe.integration import SphericalPositionEmbedding, align_to

__all__ = [
    "AxialRoPE",
    "EulerSphericalRoPE",
    "GeodesicBiasPE",
    "LatLonSinusoidalPE",
    "LearnedAbsolutePE",
    "NoPositionEmbedding",
    "SphericalHarmonicPE",
    "real_spherical_harmonics",
    "real_spherical_harmonics_torch_harmonics",
]


class NoPositionEmbedding(SphericalPositionEmbedding):
    """No position embedding: attention sees only content (all three hooks are identities)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim


class LearnedAbsolutePE(SphericalPositionEmbedding):
    """Learned absolute position embedding: one trained vector per token of a fixed grid, added to tokens.

    A query position is looked up at its nearest grid token (largest dot product), so any position works,
    but the embedding is piecewise constant and knows nothing of the seam or the poles.
    ``token_xyz`` ``(T, 3)``: the grid's token centres.
    """

    def __init__(self, dim: int, token_xyz: Tensor, init_std: float = 0.02) -> None:
        super().__init__()
        self.dim = dim
        self.register_buffer("token_xyz", token_xyz.clone().float())
        self.table = nn.Parameter(torch.randn(token_xyz.shape[0], dim) * init_std)

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor:
        nearest = (xyz.to(self.token_xyz.dtype) @ self.token_xyz.T).argmax(dim=-1)  # (..., N)
        return x + self.table[nearest].to(x.dtype)


class LatLonSinusoidalPE(SphericalPositionEmbedding):
    """Sinusoids of latitude and longitude (radians) at geometric frequencies, half the channels each.

    The usual 2-D sin-cos embedding of Cartesian ViTs with the grid indices replaced by angles; the
    frequencies are not integers, so the longitude seam is a discontinuity and the pole is not one point.
    """

    def __init__(self, dim: int, max_frequency: float = 32.0, initial_gain: float = 0.1) -> None:
        super().__init__()
        if dim % 4 != 0:
            raise ValueError(f"dim={dim} must be a multiple of 4 (sin and cos of latitude and longitude)")
        self.dim = dim
        self.register_buffer("frequencies", torch.logspace(0.0, math.log10(max_frequency), dim // 4))
        # ours: a learned gain, so a fixed unit-amplitude embedding cannot swamp small patch tokens at init
        self.gain = nn.Parameter(torch.tensor(float(initial_gain)))

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor:
        lat, lon = xyz_to_latlon(xyz)
        phases = [torch.deg2rad(a).unsqueeze(-1) * self.frequencies.to(xyz.dtype) for a in (lat, lon)]
        pe = torch.cat([torch.cat((p.sin(), p.cos()), dim=-1) for p in phases], dim=-1)
        return x + self.gain.to(x.dtype) * pe.to(x.dtype)


def real_spherical_harmonics(xyz: np.ndarray, degree: int) -> np.ndarray:
    """Orthonormal real spherical harmonics of degrees 0..L at unit vectors ``(N, 3)`` -> ``(N, (L+1)^2)``.

    Built from scipy's complex ``sph_harm_y``: Y_lm^real = sqrt(2) (-1)^m Re/Im Y_l^|m| for m > 0 / m < 0.
    """
    from scipy.special import sph_harm_y

    polar = np.arccos(np.clip(xyz[:, 2], -1.0, 1.0))
    azimuth = np.arctan2(xyz[:, 1], xyz[:, 0])
    columns = []
    for ell in range(degree + 1):
        for m in range(-ell, ell + 1):
            y = sph_harm_y(ell, abs(m), polar, azimuth)
            if m > 0:
                columns.append(math.sqrt(2.0) * (-1) ** m * y.real)
            elif m < 0:
                columns.append(math.sqrt(2.0) * (-1) ** m * y.imag)
            else:
                columns.append(y.real)
    return np.stack(columns, axis=-1)


def real_spherical_harmonics_torch_harmonics(xyz: np.ndarray, degree: int) -> np.ndarray:
    """The same basis and column order as :func:`real_spherical_harmonics`, from torch-harmonics.

    ``legpoly(mmax, lmax, cos(theta), norm="ortho", csphase=False)`` gives c_lm P_l^m(cos theta) with
    c_lm = sqrt((2l+1)/4pi (l-m)!/(l+m)!); the real harmonics are P-bar_l^|m| times 1, sqrt(2) cos(m lon)
    (m > 0) or sqrt(2) sin(|m| lon) (m < 0).
    """
    from torch_harmonics.legendre import legpoly

    cos_polar = torch.from_numpy(np.clip(xyz[:, 2], -1.0, 1.0)).double()
    azimuth = np.arctan2(xyz[:, 1], xyz[:, 0])
    legendre = legpoly(degree + 1, degree + 1, cos_polar, norm="ortho", csphase=False).numpy()  # (m, l, N)
    columns = []
    for ell in range(degree + 1):
        for m in range(-ell, ell + 1):
            p = legendre[abs(m), ell]
            if m > 0:
                columns.append(math.sqrt(2.0) * p * np.cos(m * azimuth))
            elif m < 0:
                columns.append(math.sqrt(2.0) * p * np.sin(-m * azimuth))
            else:
                columns.append(p)
    return np.stack(columns, axis=-1)


def _torch_harmonics_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_harmonics") is not None


class SphericalHarmonicPE(SphericalPositionEmbedding):
    """Spherical-harmonic absolute embedding: fixed real SH basis functions, one per channel, added to tokens.

    Mirrors torch-harmonics' ``SpectralPositionEmbedding``; we use all complete degrees with
    (L+1)^2 <= dim (scaled by sqrt(4 pi) to unit mean square, times a learned gain) and leave the other
    channels at zero, so the embedding's Gram kernel is the rotation-invariant sum_l (2l+1) P_l(cos gamma).
    ``backend``: "torch_harmonics" (library Legendre functions), "scipy", or "auto" (the first if installed).
    The features are cached while the same positions come back (a model's fixed token grid).
    """

    def __init__(self, dim: int, initial_gain: float = 0.1, backend: str = "auto") -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim={dim} must be >= 1")
        if backend not in ("auto", "torch_harmonics", "scipy"):
            raise ValueError(
                f"backend={backend!r} is not allowed; choose 'auto', 'torch_harmonics' or 'scipy'"
            )
        if backend == "auto":
            backend = "torch_harmonics" if _torch_harmonics_available() else "scipy"
        self.backend = backend
        self.dim = dim
        self.degree = math.isqrt(dim) - 1
        # ours: a learned gain, so a fixed unit-RMS embedding cannot swamp small patch tokens at init
        self.gain = nn.Parameter(torch.tensor(float(initial_gain)))
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    def harmonics(self, flat: np.ndarray) -> np.ndarray:
        """Unit-RMS real harmonics ``(N, (L+1)^2)`` at unit vectors ``(N, 3)``."""
        if self._cache is not None and np.array_equal(self._cache[0], flat):
            return self._cache[1]
        basis = (
            real_spherical_harmonics_torch_harmonics
            if self.backend == "torch_harmonics"
            else (real_spherical_harmonics)
        )
        features = basis(flat, self.degree) * math.sqrt(4.0 * math.pi)
        self._cache = (flat.copy(), features)
        return features

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor:
        flat = xyz.detach().reshape(-1, 3).cpu().double().numpy()
        features = self.harmonics(flat)
        pe = torch.zeros(flat.shape[0], self.dim, dtype=x.dtype, device=x.device)
        pe[:, : features.shape[1]] = torch.from_numpy(features).to(x.dtype)
        return x + self.gain.to(x.dtype) * pe.reshape(*xyz.shape[:-1], self.dim)


class AxialRoPE(SphericalPositionEmbedding):
    """Axial RoPE on (lat, lon) with integer longitude frequencies (periodic across the seam).

    Library adapter over ``rotary_embedding_torch``: half of the rotary pairs turn with latitude (radians,
    geometric frequencies 1..``max_lat_frequency``), half with longitude at integer frequencies
    round(geomspace(1, ``max_lon_frequency``)), so the encoding is 2 pi periodic in longitude.
    """

    transforms_qk = True

    def __init__(self, head_dim: int, max_lat_frequency: float = 8.0, max_lon_frequency: int = 8) -> None:
        super().__init__()
        from rotary_embedding_torch import RotaryEmbedding

        if head_dim % 4 != 0:
            raise ValueError(f"head_dim={head_dim} must be a multiple of 4 for axial RoPE (pairs x 2 axes)")
        self.dim = head_dim
        pairs = head_dim // 4
        lat_freqs = torch.logspace(0.0, math.log10(max_lat_frequency), pairs)
        lon_freqs = torch.from_numpy(np.round(np.geomspace(1.0, max_lon_frequency, pairs))).float()
        self.lat_rotary = RotaryEmbedding(dim=head_dim // 2, custom_freqs=lat_freqs, cache_if_possible=False)
        self.lon_rotary = RotaryEmbedding(dim=head_dim // 2, custom_freqs=lon_freqs, cache_if_possible=False)

    def angles(self, xyz: Tensor) -> Tensor:
        """Rotation angle per channel ``(..., N, head_dim)`` (each pair's angle repeated twice)."""
        lat, lon = xyz_to_latlon(xyz)
        return torch.cat((self.lat_rotary(torch.deg2rad(lat)), self.lon_rotary(torch.deg2rad(lon))), dim=-1)

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor:
        from rotary_embedding_torch import apply_rotary_emb

        angles = align_to(self.angles(xyz.to(x.dtype)), x, trailing=1).to(x.dtype)
        return apply_rotary_emb(angles, x, freqs_seq_dim=-2 if angles.ndim > 2 else None)


def rotation_z(angle: Tensor) -> Tensor:
    c, s = angle.cos(), angle.sin()
    zero, one = torch.zeros_like(c), torch.ones_like(c)
    return torch.stack((c, -s, zero, s, c, zero, zero, zero, one), dim=-1).unflatten(-1, (3, 3))


def rotation_y(angle: Tensor) -> Tensor:
    c, s = angle.cos(), angle.sin()
    zero, one = torch.zeros_like(c), torch.ones_like(c)
    return torch.stack((c, zero, s, zero, one, zero, -s, zero, c), dim=-1).unflatten(-1, (3, 3))


class EulerSphericalRoPE(SphericalPositionEmbedding):
    """Euler-angle spherical RoPE: each 3-channel block is turned by R_z(f_b lon) R_y(-f_b lat).

    With f_b = 1 the rotation maps (1, 0, 0) to the token's unit vector; integer f_b keep longitude
    periodic. The composition order is a convention (the Euler-order ambiguity CARE points out), and at a
    pole the rotation still depends on longitude. Channels beyond ``3 * (head_dim // 3)`` pass through.
    """

    transforms_qk = True

    def __init__(self, head_dim: int, max_frequency: int = 4) -> None:
        super().__init__()
        if head_dim < 3:
            raise ValueError(f"head_dim={head_dim} must be >= 3 for 3-D rotation blocks")
        self.dim = head_dim
        self.num_blocks = head_dim // 3
        freqs = (
            np.round(np.geomspace(1.0, max_frequency, self.num_blocks)) if self.num_blocks > 1 else np.ones(1)
        )
        self.register_buffer("frequencies", torch.from_numpy(freqs).float())

    def rotations(self, xyz: Tensor) -> Tensor:
        """Per-token, per-block rotation matrices ``(..., N, num_blocks, 3, 3)``."""
        lat, lon = xyz_to_latlon(xyz)
        f = self.frequencies.to(xyz.dtype)
        lat_b = torch.deg2rad(lat).unsqueeze(-1) * f
        lon_b = torch.deg2rad(lon).unsqueeze(-1) * f
        return rotation_z(lon_b) @ rotation_y(-lat_b)

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor:
        used = 3 * self.num_blocks
        rot = align_to(self.rotations(xyz.to(x.dtype)), x, trailing=3)
        blocks = x[..., :used].unflatten(-1, (self.num_blocks, 3))
        turned = (rot @ blocks.unsqueeze(-1)).squeeze(-1).flatten(-2)
        return torch.cat((turned, x[..., used:]), dim=-1) if used < x.shape[-1] else turned


class GeodesicBiasPE(SphericalPositionEmbedding):
    """Geodesic relative-position bias: b_h(i, j) = sum_{k=0..K} c_hk cos(k gamma_ij), gamma geodesic angle.

    Exactly rotation invariant and seam/pole regular, but it materialises an ``(H, N, N)`` bias per
    forward pass, i.e. quadratic memory, and forces SDPA off its flash kernels.
    """

    def __init__(self, dim: int, num_heads: int, num_terms: int = 8, init_std: float = 0.5) -> None:
        super().__init__()
        self.dim = dim
        self.num_heads = num_heads
        self.coefficients = nn.Parameter(torch.randn(num_heads, num_terms + 1) * init_std)
        self.register_buffer("orders", torch.arange(num_terms + 1, dtype=torch.float32))

    def attention_bias(self, xyz_q: Tensor, xyz_k: Tensor) -> Tensor:
        cosine = (xyz_q @ xyz_k.transpose(-1, -2)).clamp(-1.0, 1.0)  # (..., Nq, Nk)
        gamma = torch.acos(cosine)
        basis = torch.cos(gamma.unsqueeze(-1) * self.orders.to(gamma.dtype))  # (..., Nq, Nk, K+1)
        bias = torch.einsum("...ijk,hk->...hij", basis, self.coefficients.to(gamma.dtype))
        return bias
