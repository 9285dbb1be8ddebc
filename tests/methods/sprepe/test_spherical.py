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
