"""Tests of the spherical-digits generator."""

from __future__ import annotations

import numpy as np
import pytest

from neurips26.methods.sprepe.spherical import (
    equiangular_grid,
    load_spherical_digits,
    placement_rotations,
    project_to_sphere,
    uniform_placements,
)


def test_placement_rotation_carries_the_pole_to_the_centre() -> None:
    lat, lon = np.array([30.0, -70.0, 89.0]), np.array([100.0, -170.0, 5.0])
    rot = placement_rotations(lat, lon, np.array([10.0, -45.0, 170.0]))
    phi, lam = np.deg2rad(lat), np.deg2rad(lon)
    centres = np.stack((np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)), -1)
    np.testing.assert_allclose(rot @ np.array([0.0, 0.0, 1.0]), centres, atol=1e-12)
    np.testing.assert_allclose(
        rot @ rot.transpose(0, 2, 1), np.broadcast_to(np.eye(3), (3, 3, 3)), atol=1e-12
    )


def test_uniform_placements_have_uniform_centres() -> None:
    rot = uniform_placements(np.random.default_rng(0), 4000)
    z = rot[:, 2, 2]  # z of the image of the pole, uniform in [-1, 1] for Haar rotations
    assert abs(z.mean()) < 0.05
    assert abs(np.mean(np.abs(z)) - 0.5) < 0.03


def test_projection_keeps_the_digit_at_its_centre_and_inside_its_cap() -> None:
    image = np.ones((1, 8, 8), dtype=np.float32)
    lat_grid, lon_grid = equiangular_grid(32, 64)
    out = project_to_sphere(
        image, placement_rotations(np.array([0.0]), np.array([0.0]), np.array([0.0])), 32, 64, 30.0
    )
    lat, lon = np.meshgrid(lat_grid, lon_grid, indexing="ij")
    mass = out[0] > 0.5
    assert mass.any()
    assert np.abs(lat[mass]).max() < 45 and np.abs(lon[mass]).max() < 45


def test_strata_sit_where_they_claim() -> None:
    data = load_spherical_digits(n_train=20, n_test=40, seed=1)
    lat_grid, _ = equiangular_grid(32, 64)
    polar, _ = data.test["polar"]
    polar_rows = (polar.sum(axis=2) * np.abs(lat_grid)).sum(1) / polar.sum(axis=(1, 2))
    assert np.all(polar_rows > 45)
    seam, _ = data.test["seam"]
    edges = seam[:, :, :4].sum(axis=(1, 2)) + seam[:, :, -4:].sum(axis=(1, 2))
    assert np.all(edges > 0.3 * seam.sum(axis=(1, 2)))
    assert data.train_images.shape == (20, 32, 64)


def test_nr_split_trains_on_one_placement_and_bad_arguments_raise() -> None:
    data = load_spherical_digits(split="NR/R", n_train=10, n_test=5)
    lat_grid, lon_grid = equiangular_grid(32, 64)
    mass = data.train_images.sum(axis=0)
    assert abs((mass.sum(1) * lat_grid).sum() / mass.sum()) < 10  # all training digits sit at (0, 0)
    assert abs((mass.sum(0) * lon_grid).sum() / mass.sum()) < 10
    assert mass[:, np.abs(lon_grid) > 60].sum() == 0
    with pytest.raises(ValueError, match="split='XY' is not allowed"):
        load_spherical_digits(split="XY")
    with pytest.raises(ValueError, match="n_train=1800"):
        load_spherical_digits(n_train=1800, n_test=10)
    with pytest.raises(ValueError, match="max_spin_deg"):
        load_spherical_digits(max_spin_deg=270.0)


def test_angular_pairs_look_alike_without_positions_and_label_the_distance() -> None:
    """Every sample's patches are the same multiset (so position is the only signal), the label is a
    function of the geodesic distance alone, and the strata hold what they say."""
    from neurips26.methods.sprepe.spherical import load_angular_pairs, token_centres

    data = load_angular_pairs(height=12, width=24, patch_height=3, patch_width=3, n_train=400, n_test=200)
    patches = data.train_images.reshape(-1, 4, 3, 8, 3).transpose(0, 1, 3, 2, 4).reshape(-1, 32, 9)
    as_sets = np.sort(patches.sum(axis=-1), axis=1)
    assert (as_sets == as_sets[0]).all() and as_sets[0].sum() == 2  # two identical markers, anywhere
    assert np.bincount(data.train_labels, minlength=10).min() > 20  # ten classes, balanced

    centres = token_centres(4, 8)
    for images, labels in (
        (data.train_images, data.train_labels),
        *data.test.values(),
    ):
        flat = images.reshape(len(images), 4, 3, 8, 3).transpose(0, 1, 3, 2, 4).reshape(len(images), 32, 9)
        marked = np.argwhere(flat.sum(axis=-1) > 0)[:, 1].reshape(-1, 2)
        distance = np.round(np.einsum("nc,nc->n", centres[marked[:, 0]], centres[marked[:, 1]]), 6)
        for value in np.unique(distance):  # one label per distance
            assert len(np.unique(labels[distance == value])) == 1
    polar_images, _ = data.test["polar"]
    rows = np.argwhere(polar_images.reshape(len(polar_images), 12, 24) > 0)
    has_polar_token = np.zeros(len(polar_images), dtype=bool)
    has_polar_token[rows[(rows[:, 1] < 3) | (rows[:, 1] >= 9), 0]] = True
    assert has_polar_token.all()


def test_angular_pairs_reject_patches_without_an_interior() -> None:
    from neurips26.methods.sprepe.spherical import load_angular_pairs

    with pytest.raises(ValueError, match="patch_height=2"):
        load_angular_pairs(height=8, width=16, patch_height=2, patch_width=2)
