"""SpRePE: Spherical Reflection Position Embedding -- the algorithm on plain tensors.

A token at p on the unit sphere S^2 is encoded by Householder reflections of its query and key:
the head dimension is split into ``num_blocks`` blocks of size ``n``; block b owns a reflector map
u_b : S^2 -> S^{n-1} and the reflection H(u) = I - 2 u u^T, applied as ``x - 2 u (u^T x)`` in O(n).

With q~_i = H(u_i) q_i and k~_j = H(u_j) k_j (per block),

    q~_i^T k~_j = q^T k - 2 (q^T u_i)(u_i^T k) - 2 (q^T u_j)(u_j^T k) + 4 (q^T u_i)(u_i . u_j)(u_j^T k),   (1)

and the last term carries the explicit relative-position kernel u_i . u_j:

* ``'sh'`` blocks, u = [sqrt(w_0) Y_0(p), ..., sqrt(w_L) Y_L(p)] with real spherical harmonics in e3nn's
  ``'norm'`` normalisation (||Y_l(p)|| = 1), give u_i . u_j = sum_l w_l P_l(cos gamma_ij)       (2)
  by the Legendre addition theorem: a zonal kernel of the geodesic angle gamma_ij only.
* ``'xyz'`` blocks, u = (cos a_b, sin a_b p), give u_i . u_j = cos^2 a_b + sin^2 a_b cos gamma_ij and
  H(u_i) H(u_j) is a rotation by twice the angle between u_i and u_j.                           (3)
  Without the constant (``include_constant=False``) u = p, H(p_i) H(p_j) is a rotation by 2 gamma_ij,
  but H(u) = H(-u) then makes antipodal points indistinguishable.

The formulation follows the project's research notes (the paper publishes no equations); every
identity above is checked in ``tests/methods/sprepe/test_sprepe.py``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "apply_householder",
    "default_alpha",
    "householder_matrix",
    "latlon_to_xyz",
    "real_harmonics",
    "sh_block_size",
    "sh_reflectors",
    "validate_xyz",
    "xyz_reflectors",
    "xyz_to_latlon",
    "zonal_kernel",
]


def latlon_to_xyz(lat: Tensor, lon: Tensor) -> Tensor:
    """Unit vectors from latitude and longitude in degrees (lat in [-90, 90], any finite lon).

    Returns a tensor of shape ``lat.shape + (3,)`` with x toward (0, 0), y toward (0, 90), z the north pole.
    """
    lat = torch.as_tensor(lat)
    lon = torch.as_tensor(lon)
    if lat.shape != lon.shape:
        raise ValueError(
            f"lat and lon must have the same shape, got lat {tuple(lat.shape)} and lon {tuple(lon.shape)}"
        )
    if not torch.is_floating_point(lat):
        lat = lat.to(torch.get_default_dtype())
    if not torch.is_floating_point(lon):
        lon = lon.to(torch.get_default_dtype())
    if not bool(torch.isfinite(lat).all()):
        raise ValueError(
            "lat contains non-finite values (nan or inf); latitudes must be finite degrees in [-90, 90]"
        )
    if not bool(torch.isfinite(lon).all()):
        raise ValueError("lon contains non-finite values (nan or inf); longitudes must be finite degrees")
    if lat.numel() and (float(lat.min()) < -90.0 or float(lat.max()) > 90.0):
        raise ValueError(
            "lat must lie in [-90, 90] degrees, got values in "
            f"[{float(lat.min()):.4g}, {float(lat.max()):.4g}]"
        )
    phi = torch.deg2rad(lat)
    lam = torch.deg2rad(lon)
    return torch.stack((phi.cos() * lam.cos(), phi.cos() * lam.sin(), phi.sin()), dim=-1)


def xyz_to_latlon(xyz: Tensor) -> tuple[Tensor, Tensor]:
    """Latitude and longitude in degrees (lon in (-180, 180]) of unit vectors ``(..., 3)``."""
    lat = torch.rad2deg(torch.asin(xyz[..., 2].clamp(-1.0, 1.0)))
    lon = torch.rad2deg(torch.atan2(xyz[..., 1], xyz[..., 0]))
    return lat, lon


def validate_xyz(xyz: Tensor, name: str = "xyz", atol: float = 1e-4) -> Tensor:
    """Check that ``xyz`` holds finite unit vectors in its last dimension of size 3 and return it."""
    if not isinstance(xyz, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of unit vectors (..., 3), got {type(xyz).__name__}")
    if xyz.ndim < 1 or xyz.shape[-1] != 3:
        raise ValueError(f"{name} must have shape (..., 3), got {tuple(xyz.shape)}")
    if not torch.is_floating_point(xyz):
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {xyz.dtype}")
    if not bool(torch.isfinite(xyz).all()):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    norms = xyz.norm(dim=-1)
    if xyz.numel() and float((norms - 1.0).abs().max()) > atol:
        raise ValueError(
            f"{name} must hold unit vectors (norm 1 within {atol}); got norms in "
            f"[{float(norms.min()):.4g}, {float(norms.max()):.4g}]"
        )
    return xyz


def householder_matrix(u: Tensor) -> Tensor:
    """The reflection H(u) = I - 2 u u^T for unit vectors ``u`` of shape ``(..., n)`` -> ``(..., n, n)``.

    Only for tests and illustration; the embedding never builds these matrices.
    """
    eye = torch.eye(u.shape[-1], dtype=u.dtype, device=u.device)
    return eye - 2.0 * u.unsqueeze(-1) * u.unsqueeze(-2)


def apply_householder(x: Tensor, u: Tensor) -> Tensor:
    """Reflect each block of ``x`` by its reflector: ``x - 2 u (u^T x)`` (O(d) per token, no matrices).

    Parameters
    ----------
    x : Tensor, shape ``(..., N, head_dim)``
        Queries or keys; the first ``num_blocks * n`` channels are reflected, the rest pass through.
    u : Tensor, shape ``(..., N, num_blocks, n)``
        Unit reflectors, broadcastable against ``x``'s leading dimensions (e.g. ``(N, nb, n)`` or
        ``(B, 1, N, nb, n)`` for ``x`` of shape ``(B, H, N, head_dim)``).
    """
    num_blocks, n = u.shape[-2], u.shape[-1]
    used = num_blocks * n
    head = x[..., :used].unflatten(-1, (num_blocks, n))
    # u^T x per block; einsum wins for wide blocks, a plain product-sum for narrow ones (measured on CPU)
    if n >= 8:
        projection = torch.einsum("...n,...n->...", head, u).unsqueeze(-1)
    else:
        projection = (head * u).sum(dim=-1, keepdim=True)
    reflected = torch.addcmul(head, u, projection, value=-2.0).flatten(-2)  # H(u) x = x - 2 u (u^T x)
    if used == x.shape[-1]:
        return reflected
    return torch.cat((reflected, x[..., used:]), dim=-1)


def xyz_reflectors(xyz: Tensor, alpha: Tensor | None) -> Tensor:
    """'xyz' reflector map, eq. (3): u_b(p) = (cos a_b, sin a_b p), or u_b(p) = p when ``alpha`` is None.

    ``xyz`` has shape ``(..., N, 3)`` and ``alpha`` shape ``(num_blocks,)``; returns ``(..., N, nb, 4)``
    (or ``(..., N, 1, 3)`` without the constant, to be broadcast over blocks by the caller).
    """
    if alpha is None:
        return xyz.unsqueeze(-2)
    cos_a = alpha.cos().to(xyz.dtype)
    sin_a = alpha.sin().to(xyz.dtype)
    constant = cos_a.expand(*xyz.shape[:-1], -1).unsqueeze(-1)  # (..., N, nb, 1)
    direction = sin_a[:, None] * xyz.unsqueeze(-2)  # (..., N, nb, 3)
    return torch.cat((constant, direction), dim=-1)


def sh_block_size(degree: int) -> int:
    """Channels per 'sh' block: all real spherical harmonics of degrees 0..L, i.e. (L + 1)^2."""
    return (degree + 1) ** 2


def real_harmonics(xyz: Tensor, degree: int) -> Tensor:
    """Real spherical harmonics Y_0..Y_L of unit vectors ``(..., 3)`` -> ``(..., (L+1)^2)`` (e3nn, 'norm').

    In e3nn's ``'norm'`` normalisation each degree's vector has unit length: ||Y_l(p)|| = 1.
    """
    from e3nn import o3

    return o3.spherical_harmonics(list(range(degree + 1)), xyz, normalize=False, normalization="norm")


def sh_reflectors(xyz: Tensor, degree: int, weight_logits: Tensor, harmonics: Tensor | None = None) -> Tensor:
    """'sh' reflector map, eq. (2): u_b = [sqrt(w_b0) Y_0, ..., sqrt(w_bL) Y_L], w_b = softmax(logits_b).

    Since ||Y_l(p)|| = 1 for every l, ||u_b|| = sum_l w_bl = 1. ``xyz`` ``(..., N, 3)``, ``weight_logits``
    ``(nb, L + 1)`` -> ``(..., N, nb, (L+1)^2)``. ``harmonics`` may pass ``real_harmonics(xyz, degree)``
    precomputed (positions rarely change between calls).
    """
    if harmonics is None:
        harmonics = real_harmonics(xyz, degree)
    weights = torch.softmax(weight_logits, dim=-1)  # (nb, L + 1)
    repeats = torch.tensor([2 * ell + 1 for ell in range(degree + 1)], device=xyz.device)
    scale = weights.sqrt().repeat_interleave(repeats, dim=-1).to(xyz.dtype)  # (nb, (L+1)^2)
    return harmonics.unsqueeze(-2) * scale


def zonal_kernel(cos_gamma: Tensor, weights: Tensor) -> Tensor:
    """Closed form of eq. (2): sum_l w_l P_l(cos gamma) via the Legendre three-term recurrence.

    ``cos_gamma`` any shape, ``weights`` ``(L + 1,)``; returns ``cos_gamma.shape``.
    """
    p_prev = torch.ones_like(cos_gamma)
    total = weights[0] * p_prev
    if weights.shape[0] == 1:
        return total
    p_curr = cos_gamma
    total = total + weights[1] * p_curr
    for ell in range(1, weights.shape[0] - 1):
        # (l + 1) P_{l+1}(t) = (2l + 1) t P_l(t) - l P_{l-1}(t)
        p_next = ((2 * ell + 1) * cos_gamma * p_curr - ell * p_prev) / (ell + 1)
        total = total + weights[ell + 1] * p_next
        p_prev, p_curr = p_curr, p_next
    return total


def default_alpha(num_blocks: int) -> Tensor:
    """Initial a_b spread over [pi/6, 5 pi/12]: every block keeps a constant part (antipodes differ)."""
    return torch.linspace(math.pi / 6, 5 * math.pi / 12, num_blocks)
