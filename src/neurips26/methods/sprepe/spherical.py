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
    "load_angular_pairs",
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


PAIR_STRATA = ("rotated", "polar", "seam")


def token_centres(rows: int, columns: int) -> np.ndarray:
    """Unit vectors ``(rows * columns, 3)`` of an equiangular grid's cell centres, row-major."""
    return grid_xyz(rows, columns).reshape(-1, 3)


def pair_distance_classes(centres: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair of distinct tokens ``(P, 2)`` and its class: the geodesic distance's bin.

    The bin edges are quantiles of the distance over all pairs, so classes hold about equally many pairs;
    tied distances share a class, so the label is a function of the distance alone.
    """
    first, second = np.triu_indices(len(centres), k=1)
    distance = np.arccos(np.clip(np.einsum("pc,pc->p", centres[first], centres[second]), -1.0, 1.0))
    distance = np.round(distance, 9)  # equal angles computed in different ways must tie
    edges = np.quantile(distance, np.arange(1, num_classes) / num_classes)
    classes = np.searchsorted(edges, distance, side="right")
    if len(np.unique(classes)) < num_classes:
        raise ValueError(
            f"num_classes={num_classes}: the grid's token pairs have only {len(np.unique(distance))} "
            "distinct distances; use more tokens or fewer classes"
        )
    return np.stack((first, second), axis=1), classes.astype(np.int64)


def _pair_strata(pairs: np.ndarray, centres: np.ndarray, polar_min_lat: float) -> dict[str, np.ndarray]:
    """Which pairs each test stratum draws from: all; one token at |lat| >= polar_min_lat; across lon 180."""
    lat = np.rad2deg(np.arcsin(np.clip(centres[:, 2], -1.0, 1.0)))
    lon = np.rad2deg(np.arctan2(centres[:, 1], centres[:, 0]))
    polar = np.abs(lat) >= polar_min_lat
    # the shorter longitude arc between the two tokens crosses the seam at +-180
    seam = np.abs(lon[pairs[:, 0]] - lon[pairs[:, 1]]) > 180.0
    return {
        "rotated": np.ones(len(pairs), dtype=bool),
        "polar": polar[pairs[:, 0]] | polar[pairs[:, 1]],
        "seam": seam,
    }


def _balanced_pairs(rng: np.random.Generator, classes: np.ndarray, allowed: np.ndarray, n: int) -> np.ndarray:
    """``n`` pair indices among ``allowed``: a class uniformly among those present, then one of its pairs,
    so a model blind to position (constant output) scores at most one over the number of classes present."""
    present = np.unique(classes[allowed])
    drawn = rng.choice(present, size=n)
    picks = np.empty(n, dtype=np.int64)
    for label in present:
        members = np.flatnonzero(allowed & (classes == label))
        where = drawn == label
        picks[where] = rng.choice(members, size=int(where.sum()))
    return picks


def _marker_images(
    pairs: np.ndarray, rows: int, columns: int, patch_height: int, patch_width: int
) -> np.ndarray:
    """Images ``(n, H, W)`` that light the interior of the two tokens' patches (not their border pixels),
    so a 3x3 stem sees the same pattern in every marked patch and nothing in its neighbours."""
    images = np.zeros((len(pairs), rows * patch_height, columns * patch_width), dtype=np.float32)
    for column in range(2):
        row, col = np.divmod(pairs[:, column], columns)
        for dy in range(1, patch_height - 1):
            for dx in range(1, patch_width - 1):
                images[np.arange(len(pairs)), row * patch_height + dy, col * patch_width + dx] = 1.0
    return images


def load_angular_pairs(
    *,
    height: int = 12,
    width: int = 24,
    patch_height: int = 3,
    patch_width: int = 3,
    n_train: int = 1200,
    n_test: int = 600,
    num_classes: int = 10,
    polar_min_lat: float = 60.0,
    seed: int = 0,
) -> SphericalDigits:
    """A task that needs position on the sphere: two identical markers, label = their geodesic distance.

    The grid's patches are the tokens; two distinct tokens are marked and the label is the bin of the
    great-circle distance between their centres (``num_classes`` bins of about equally many pairs, drawn
    class-balanced). Every marked token looks alike, so a model without a position embedding sees the same
    input for every sample and scores chance; a relative embedding sees the label in its attention logits.
    Test strata as for the digits: ``"rotated"`` (any pair), ``"polar"`` (a token at |lat| >=
    ``polar_min_lat``) and ``"seam"`` (the pair straddles lon 180). Train and test draw from the same
    finite set of pairs: the task measures whether the map from positions to distance is learnt.
    """
    if height % patch_height or width % patch_width:
        raise ValueError(f"patch ({patch_height}, {patch_width}) must divide the grid ({height}, {width})")
    if patch_height < 3 or patch_width < 3:
        raise ValueError(
            f"patch_height={patch_height} and patch_width={patch_width} must be >= 3 (a marker's interior)"
        )
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train={n_train} and n_test={n_test} must be >= 1")
    rows, columns = height // patch_height, width // patch_width
    centres = token_centres(rows, columns)
    pairs, classes = pair_distance_classes(centres, num_classes)
    rng = np.random.default_rng(seed)

    def draw(allowed: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        picks = _balanced_pairs(rng, classes, allowed, n)
        return _marker_images(pairs[picks], rows, columns, patch_height, patch_width), classes[picks]

    strata = _pair_strata(pairs, centres, polar_min_lat)
    train_images, train_labels = draw(strata["rotated"], n_train)
    return SphericalDigits(
        train_images=train_images,
        train_labels=train_labels,
        test={name: draw(strata[name], n_test) for name in PAIR_STRATA},
        height=height,
        width=width,
    )
