"""Spherical image data generated offline: sklearn's handwritten digits projected onto the sphere.

The recipe follows the spirit of S2CNN's spherical MNIST: each 8x8 digit lies on the plane tangent to
the north pole, is mapped onto a cap of the sphere by the gnomonic projection, and the cap is moved
anywhere by a rotation; the sphere is sampled on an equiangular (lat, lon) grid of cell centres.

Test strata place the *same* test digits (i) by uniformly random rotations, (ii) with their centre near a
pole (``|lat| >= polar_min_lat``) and (iii) straddling the longitude seam at +-180 degrees.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "SphericalDigits",
    "equiangular_grid",
    "load_spherical_digits",
    "placement_rotations",
    "project_to_sphere",
]

SPLITS = ("R/R", "NR/R")


def equiangular_grid(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell-centre latitudes (north to south) and longitudes (from -180), in degrees."""
    if height < 1 or width < 1:
        raise ValueError(f"grid size must be positive, got height={height}, width={width}")
    lat = 90.0 - (np.arange(height) + 0.5) * 180.0 / height
    lon = -180.0 + (np.arange(width) + 0.5) * 360.0 / width
    return lat, lon


def grid_xyz(height: int, width: int) -> np.ndarray:
    """Unit vectors of the equiangular grid's cell centres, ``(height, width, 3)``."""
    lat, lon = equiangular_grid(height, width)
    phi, lam = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    return np.stack((np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)), axis=-1)


def placement_rotations(lat_deg: np.ndarray, lon_deg: np.ndarray, spin_deg: np.ndarray) -> np.ndarray:
    """Rotations ``(n, 3, 3)`` taking the north pole to (lat, lon) after a spin about the pole.

    R = R_z(lon) R_y(90 - lat) R_z(spin): R_z(spin) turns the digit in its tangent plane, R_y tilts the
    pole down to latitude ``lat`` on the prime meridian, R_z(lon) carries it to longitude ``lon``.
    """
    from scipy.spatial.transform import Rotation

    angles = np.stack((np.asarray(spin_deg), 90.0 - np.asarray(lat_deg), np.asarray(lon_deg)), axis=-1)
    # extrinsic z, y, z: first spin, then tilt, then carry (scipy applies the first letter first)
    return Rotation.from_euler("zyz", angles, degrees=True).as_matrix()


def project_to_sphere(
    images: np.ndarray, rotations: np.ndarray, height: int, width: int, extent_deg: float
) -> np.ndarray:
    """Gnomonic projection of planar images ``(n, h, w)`` onto caps of half-angle ``extent_deg``.

    A grid point p is pulled back to the canonical frame (q = R^T p); if q is on the northern hemisphere,
    its tangent-plane coordinates (q_x / q_z, q_y / q_z) / tan(extent) in [-1, 1] address the image
    (bilinear, zero outside). Returns ``(n, height, width)`` float32.
    """
    if not 0.0 < extent_deg < 90.0:
        raise ValueError(f"extent_deg must lie in (0, 90), got {extent_deg}")
    if images.ndim != 3 or rotations.shape != (images.shape[0], 3, 3):
        raise ValueError(
            f"images must be (n, h, w) and rotations (n, 3, 3); got {images.shape}, {rotations.shape}"
        )
    points = grid_xyz(height, width)  # (H, W, 3)
    local = np.einsum("nji,hwj->nhwi", rotations, points)  # R^T p
    z = local[..., 2]
    inside = z > 1e-6
    safe_z = np.where(inside, z, 1.0)
    scale = np.tan(np.deg2rad(extent_deg))
    plane = np.stack((local[..., 0] / safe_z, local[..., 1] / safe_z), axis=-1) / scale
    plane = np.where(inside[..., None], plane, 2.0)  # far outside [-1, 1]: sampled as zero
    sampled = F.grid_sample(
        torch.from_numpy(images[:, None].astype(np.float32)),
        torch.from_numpy(plane.astype(np.float32)),
        mode="bilinear",
        padding_mode="zeros",
        align_corners=False,
    )
    return sampled[:, 0].numpy()


@dataclasses.dataclass(frozen=True)
class SphericalDigits:
    """Spherical digits: ``train_images`` ``(n, H, W)``, labels, and test strata name -> (images, labels)."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test: dict[str, tuple[np.ndarray, np.ndarray]]
    height: int
    width: int


def random_spin(rng: np.random.Generator, n: int, max_spin_deg: float) -> np.ndarray:
    return rng.uniform(-max_spin_deg, max_spin_deg, n)


def uniform_placements(rng: np.random.Generator, n: int, max_spin_deg: float = 180.0) -> np.ndarray:
    """Centres uniform on the sphere, spins uniform in [-max_spin, max_spin] about the local vertical.

    With ``max_spin_deg=180`` this is the Haar measure on SO(3) (z-y-z Euler angles with uniform first and
    last angle and uniform cosine of the tilt).
    """
    lat = np.rad2deg(np.arcsin(rng.uniform(-1.0, 1.0, n)))
    return placement_rotations(lat, rng.uniform(-180.0, 180.0, n), random_spin(rng, n, max_spin_deg))


def polar_placements(
    rng: np.random.Generator, n: int, polar_min_lat: float, max_spin_deg: float
) -> np.ndarray:
    """Centres uniform on the two polar caps |lat| >= polar_min_lat (area-uniform), any spin."""
    sin_lat = rng.uniform(np.sin(np.deg2rad(polar_min_lat)), 1.0, n)
    lat = np.rad2deg(np.arcsin(sin_lat)) * rng.choice([-1.0, 1.0], n)
    return placement_rotations(lat, rng.uniform(-180.0, 180.0, n), random_spin(rng, n, max_spin_deg))


def seam_placements(
    rng: np.random.Generator, n: int, seam_halfwidth: float, max_spin_deg: float
) -> np.ndarray:
    """Centres within ``seam_halfwidth`` degrees of longitude 180 and |lat| <= 30, any spin."""
    lon = 180.0 + rng.uniform(-seam_halfwidth, seam_halfwidth, n)
    lat = rng.uniform(-30.0, 30.0, n)
    return placement_rotations(lat, lon, random_spin(rng, n, max_spin_deg))


def load_spherical_digits(
    *,
    split: str = "R/R",
    height: int = 32,
    width: int = 64,
    n_train: int = 1200,
    n_test: int = 500,
    extent_deg: float = 35.0,
    polar_min_lat: float = 60.0,
    seam_halfwidth: float = 15.0,
    max_spin_deg: float = 180.0,
    seed: int = 0,
) -> SphericalDigits:
    """sklearn digits on the sphere with NR/R or R/R training placements and three test strata.

    ``split="NR/R"`` trains on unrotated digits (centred at lat 0, lon 0, upright); ``"R/R"`` on uniformly
    rotated ones. ``max_spin_deg`` bounds the spin of the digit about its own centre (180: any rotation,
    i.e. Haar-random SO(3); smaller: digits stay roughly upright w.r.t. the local meridian).
    Test strata: ``"rotated"`` (uniform), ``"polar"`` and ``"seam"`` (see module docstring).
    """
    from sklearn.datasets import load_digits

    if not 0.0 <= max_spin_deg <= 180.0:
        raise ValueError(f"max_spin_deg={max_spin_deg} must lie in [0, 180]")
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not allowed; choose one of {list(SPLITS)}")
    digits = load_digits()
    total = len(digits.target)
    if n_train < 1 or n_test < 1 or n_train + n_test > total:
        raise ValueError(f"n_train={n_train} and n_test={n_test} must be >= 1 and sum to at most {total}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(total)
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    train_idx, test_idx = order[:n_train], order[n_train : n_train + n_test]
    if split == "NR/R":
        train_rot = placement_rotations(np.zeros(n_train), np.zeros(n_train), np.zeros(n_train))
    else:
        train_rot = uniform_placements(rng, n_train, max_spin_deg)
    test_rotations = {
        "rotated": uniform_placements(rng, n_test, max_spin_deg),
        "polar": polar_placements(rng, n_test, polar_min_lat, max_spin_deg),
        "seam": seam_placements(rng, n_test, seam_halfwidth, max_spin_deg),
    }

    def project(idx: np.ndarray, rot: np.ndarray) -> np.ndarray:
        return project_to_sphere(images[idx], rot, height, width, extent_deg)

    return SphericalDigits(
        train_images=project(train_idx, train_rot),
        train_labels=labels[train_idx],
        test={name: (project(test_idx, rot), labels[test_idx]) for name, rot in test_rotations.items()},
        height=height,
        width=width,
    )
