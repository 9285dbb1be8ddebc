"""Tests of the shallow-water data: torch-harmonics' solver with our balanced initial conditions and cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurips26.testing import requires_package

pytestmark = requires_package("torch_harmonics")


@pytest.fixture(scope="module")
def solver():
    from neurips26.methods.sprepe.shallow_water import make_solver

    return make_solver(16, 32, 900.0)


def invariants(solver, state: torch.Tensor) -> tuple[float, float]:
    """Mass integral of h and available energy integral of (h |u|^2 + g (h - mean h)^2) / 2."""
    grid = solver.spec2grid(state)
    height = grid[0] / solver.gravity
    wind = solver.getuv(state[1:])
    mass = float(solver.integrate_grid(height))
    mean = mass / float(solver.integrate_grid(torch.ones_like(height)))
    energy = solver.integrate_grid(
        0.5 * height * wind.pow(2).sum(0) + 0.5 * solver.gravity * (height - mean) ** 2
    )
    return mass, float(energy)


def test_balanced_state_has_no_divergence_tendency(solver) -> None:
    from neurips26.methods.sprepe.shallow_water import balanced_initial_condition, random_vorticity_spectrum

    state = balanced_initial_condition(
        solver, random_vorticity_spectrum(solver, np.random.default_rng(0), 4), 20.0
    )
    tendency = solver.dudtspec(state)
    assert float(solver.spec2grid(tendency[2]).abs().max()) < 1e-9 * float(
        solver.spec2grid(tendency[1]).abs().max()
    )
    wind = solver.getuv(state[1:])
    assert float(wind.pow(2).sum(0).mean().sqrt()) == pytest.approx(20.0, rel=1e-9)


def test_solid_body_rotation_stays_steady(solver) -> None:
    """Williamson et al. (1992) case 2: zonal flow u = u0 cos(lat) in balance is a steady state."""
    from neurips26.methods.sprepe.shallow_water import balanced_initial_condition

    lat = solver.lats.reshape(-1, 1).expand(solver.nlat, solver.nlon)
    vorticity = solver.grid2spec(2 * 20.0 * torch.sin(lat) / solver.radius)
    state = balanced_initial_condition(solver, vorticity, 20.0)
    start = solver.spec2grid(state)[0] / solver.gravity
    after = solver.spec2grid(solver.timestep(state, 48))[0] / solver.gravity  # 12 hours
    assert float((after - start).abs().max()) < 1e-3 * float(start.std())  # an unbalanced state: ~1e-1


def test_mass_and_energy_are_conserved_over_a_day() -> None:
    """Without the hyperdiffusion the discrete dynamics keep mass and energy (the true invariants)."""
    from neurips26.methods.sprepe.shallow_water import (
        balanced_initial_condition,
        make_solver,
        random_vorticity_spectrum,
    )

    solver = make_solver(16, 32, 900.0)
    solver.hyperdiff.fill_(1.0)

    state = balanced_initial_condition(
        solver, random_vorticity_spectrum(solver, np.random.default_rng(1), 4), 20.0
    )
    mass0, energy0 = invariants(solver, state)
    mass1, energy1 = invariants(solver, solver.timestep(state, 96))
    assert mass1 == pytest.approx(mass0, rel=1e-12)
    assert energy1 == pytest.approx(energy0, rel=1e-3)


def test_generation_is_deterministic_cached_and_extends_with_more_trajectories(tmp_path, monkeypatch) -> None:
    from neurips26.methods.sprepe.shallow_water import generate_shallow_water, load_shallow_water

    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    settings = {"height": 16, "width": 32, "interval_hours": 1.0, "spinup_hours": 1.0, "max_ic_degree": 4}
    small = load_shallow_water(1, 3, **settings)
    assert len(list((tmp_path / "data").glob("shallow_water-*.npz"))) == 1
    again = load_shallow_water(1, 3, **settings)  # from the cache
    np.testing.assert_array_equal(small.fields, again.fields)
    assert again.settings == small.settings
    large = generate_shallow_water(2, 3, **settings)
    np.testing.assert_array_equal(large.fields[:1], small.fields)
    assert small.fields.shape == (1, 3, 3, 16, 32) and small.fields.dtype == np.float32
    assert np.all(np.diff(small.lat) < 0) and small.lon[0] == pytest.approx(-180.0)
    assert small.latitude_weights.mean() == pytest.approx(1.0)
    assert np.all(np.isfinite(large.fields)) and not np.array_equal(large.fields[0], large.fields[1])


def test_columns_start_at_the_seam(solver) -> None:
    """Rolling by W / 2 moves longitude 0 (the solver's first column) to the middle of the array."""
    from neurips26.methods.sprepe.shallow_water import grid_coordinates

    lat, lon, weights = grid_coordinates(solver, 32)
    assert lon[16] == pytest.approx(0.0) and lon[0] == pytest.approx(-180.0)
    assert lat[0] > 0 > lat[-1] and weights.shape == lat.shape


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_trajectories": 0, "n_snapshots": 2}, "n_trajectories=0"),
        ({"n_trajectories": 1, "n_snapshots": 2, "interval_hours": 0.1}, "multiple of solver_dt_s"),
        ({"n_trajectories": 1, "n_snapshots": 2, "max_ic_degree": 40}, "max_degree=40"),
        ({"n_trajectories": 1, "n_snapshots": 2, "height": 16, "width": 16}, "width"),
        ({"n_trajectories": 1, "n_snapshots": 2, "wind_rms": -1.0, "max_ic_degree": 4}, "wind_rms"),
    ],
)
def test_bad_settings_raise_a_clear_error(kwargs: dict, message: str) -> None:
    from neurips26.methods.sprepe.shallow_water import generate_shallow_water

    with pytest.raises(ValueError, match=message):
        generate_shallow_water(**{"height": 16, "width": 32, "spinup_hours": 0.0, **kwargs})
