"""Shallow-water trajectories on the rotating sphere, generated offline with torch-harmonics' spectral solver.

The solver is ``torch_harmonics.examples.ShallowWaterSolver`` (torch-harmonics 0.8.0, pure Python on CPU:
vorticity-divergence form, spherical-harmonic transforms, third-order Adams-Bashforth steps, implicit
hyperdiffusion). What is ours:

- the initial conditions: a random, smooth relative vorticity (degrees 1..``max_ic_degree``), zero
  divergence, and the geopotential from the nonlinear balance equation
  ``lap(Phi + |u|^2 / 2) = curl((zeta + f) u)`` (the balance step of the solver's Galewsky case, applied
  to random vorticity), so trajectories are dominated by slow Rossby dynamics instead of the gravity-wave
  noise of the solver's own unbalanced ``random_initial_condition``;
- a spin-up, a fixed snapshot interval, the Gauss-Legendre grid rolled so that its columns start at
  longitude -180 (the array edge is the +-180 seam, as in ``neurips26.methods.sprepe.spherical``);
- a disk cache keyed by every setting (``NEURIPS26_CACHE`` or ``~/.cache/neurips26``), so a data set is
  generated once and is a pure function of its settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "CHANNELS",
    "ShallowWaterTrajectories",
    "balanced_initial_condition",
    "generate_shallow_water",
    "load_shallow_water",
    "make_solver",
    "random_vorticity_spectrum",
]

CHANNELS = ("height", "vorticity", "divergence")
INSTALL_HINT = "pip install 'torch-harmonics==0.8.0' (0.9.x needs a newer torch)"


@dataclasses.dataclass(frozen=True)
class ShallowWaterTrajectories:
    """Snapshots of shallow-water trajectories on a ``(H, W)`` Gauss-Legendre grid.

    ``fields``: ``(n_trajectories, n_snapshots, 3, H, W)`` float32, channels :data:`CHANNELS` in metres
    and 1/s; ``lat``: ``(H,)`` degrees, north to south; ``lon``: ``(W,)`` degrees from -180;
    ``latitude_weights``: ``(H,)`` Gauss quadrature weights scaled to mean 1 (area weights).
    """

    fields: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    latitude_weights: np.ndarray
    interval_hours: float
    settings: dict[str, Any]


def _torch_harmonics() -> Any:
    try:
        import torch_harmonics
        from torch_harmonics.examples import ShallowWaterSolver  # noqa: F401
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"the shallow-water data needs torch-harmonics: {INSTALL_HINT}") from error
    return torch_harmonics


def make_solver(height: int, width: int, solver_dt_s: float) -> Any:
    """torch-harmonics' ``ShallowWaterSolver`` on a Gauss-Legendre grid, truncated at ``ceil(H / 3)``.

    The triangular truncation at a third of the latitudes de-aliases the quadratic products (as
    torch-harmonics' own ``PdeDataset`` does); physical constants are Earth's (solver defaults).
    """
    if height < 4 or width < 2 * height - 1:
        raise ValueError(f"grid (height={height}, width={width}) needs height >= 4 and width >= 2*height-1")
    if not solver_dt_s > 0:
        raise ValueError(f"solver_dt_s={solver_dt_s} must be > 0")
    from torch_harmonics.examples import ShallowWaterSolver

    _torch_harmonics()
    degree = math.ceil(height / 3)
    return ShallowWaterSolver(height, width, solver_dt_s, lmax=degree, mmax=degree, grid="legendre-gauss")


def random_vorticity_spectrum(
    solver: Any, rng: np.random.Generator, max_degree: int, min_degree: int = 2, slope: float = -1.0
) -> torch.Tensor:
    """Random real-field spectral coefficients ``(lmax, mmax)`` on degrees ``min_degree..max_degree``.

    Complex normal coefficients with standard deviation ``l ** slope`` (ours: a red spectrum), m <= l, and
    real m = 0 coefficients (a real field). The overall scale is set later from the wind speed. Degree 1
    is left out by default: it is a solid-body rotation about a tilted axis, which only precesses once a
    day and would dominate every snapshot-to-snapshot change.
    """
    lmax, mmax = solver.lmax, solver.mmax
    if not 1 <= min_degree <= max_degree < lmax:
        raise ValueError(
            f"degrees min_degree={min_degree}..max_degree={max_degree} must satisfy "
            f"1 <= min_degree <= max_degree <= {lmax - 1} for this grid"
        )
    real = rng.standard_normal((lmax, mmax))
    imag = rng.standard_normal((lmax, mmax))
    imag[:, 0] = 0.0
    degree = np.arange(lmax, dtype=np.float64)[:, None]
    amplitude = np.where(
        (degree >= min_degree) & (degree <= max_degree), np.maximum(degree, 1.0) ** slope, 0.0
    )
    coefficients = torch.from_numpy((real + 1j * imag) * amplitude)
    return torch.tril(coefficients)


def balanced_initial_condition(solver: Any, vorticity_spec: torch.Tensor, wind_rms: float) -> torch.Tensor:
    """Spectral state ``(3, lmax, mmax)`` = (geopotential, vorticity, divergence) in nonlinear balance.

    The vorticity is scaled so the rms wind speed is ``wind_rms`` m/s; divergence is zero; the geopotential
    solves ``lap(Phi + K) = curl((zeta + f) u)`` with ``K = |u|^2 / 2`` and mean ``g * havg``, which makes
    the divergence tendency vanish at t = 0 (the solver's ``dudtspec[2]``).
    """
    if not wind_rms > 0:
        raise ValueError(f"wind_rms={wind_rms} must be > 0")
    zero = torch.zeros_like(vorticity_spec)
    wind = solver.getuv(torch.stack((vorticity_spec, zero)))
    scale = wind_rms / float(wind.pow(2).sum(0).mean().sqrt())
    vorticity_spec = vorticity_spec * scale
    vrtdiv = torch.stack((vorticity_spec, zero))
    wind = solver.getuv(vrtdiv)  # (2, H, W): eastward and northward wind
    vorticity = solver.spec2grid(vorticity_spec)
    flux = solver.vrtdivspec(wind * (vorticity + solver.coriolis))  # (curl, div) of (zeta + f) u
    kinetic = solver.grid2spec(0.5 * wind.pow(2).sum(0))
    mean = solver.grid2spec(torch.full_like(vorticity, float(solver.gravity * solver.havg)))
    geopotential = solver.invlap * flux[0] - kinetic + mean
    return torch.tril(torch.stack((geopotential, vorticity_spec, torch.zeros_like(vorticity_spec))))


def simulate_trajectory(
    solver: Any, state: torch.Tensor, n_snapshots: int, steps_per_snapshot: int, spinup_steps: int
) -> torch.Tensor:
    """Grid snapshots ``(n_snapshots, 3, H, W)``: height (m), vorticity and divergence (1/s)."""
    if spinup_steps:
        state = solver.timestep(state, spinup_steps)
    snapshots = []
    for index in range(n_snapshots):
        if index:
            state = solver.timestep(state, steps_per_snapshot)
        grid = solver.spec2grid(state)
        snapshots.append(torch.cat((grid[:1] / solver.gravity, grid[1:])))
    return torch.stack(snapshots)


def grid_coordinates(solver: Any, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Latitudes (north to south) and longitudes (from -180) in degrees, and latitude weights (mean 1)."""
    lat = np.rad2deg(solver.lats.numpy())
    lon = np.rad2deg(solver.lons.numpy()) - 180.0  # after rolling the columns by W / 2
    weights = solver.quad_weights.reshape(-1).numpy()
    return lat, lon, weights / weights.mean()


def generate_shallow_water(
    n_trajectories: int,
    n_snapshots: int,
    *,
    height: int = 32,
    width: int = 64,
    interval_hours: float = 6.0,
    spinup_hours: float = 24.0,
    solver_dt_s: float = 900.0,
    wind_rms: float = 20.0,
    max_ic_degree: int = 6,
    seed: int = 0,
) -> ShallowWaterTrajectories:
    """Simulate ``n_trajectories`` balanced random trajectories and keep ``n_snapshots`` snapshots each.

    Trajectory ``i`` draws its initial vorticity from ``numpy.random.default_rng([seed, i])``, so a
    larger data set extends a smaller one with the same seed.
    """
    for name, value in (("n_trajectories", n_trajectories), ("n_snapshots", n_snapshots)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer")
    steps_per_snapshot = round(interval_hours * 3600.0 / solver_dt_s)
    if steps_per_snapshot < 1 or not math.isclose(steps_per_snapshot * solver_dt_s, interval_hours * 3600.0):
        raise ValueError(
            f"interval_hours={interval_hours} must be a positive multiple of solver_dt_s={solver_dt_s} s"
        )
    if spinup_hours < 0:
        raise ValueError(f"spinup_hours={spinup_hours} must be >= 0")
    solver = make_solver(height, width, solver_dt_s)
    spinup_steps = round(spinup_hours * 3600.0 / solver_dt_s)
    trajectories = []
    with torch.no_grad():
        for index in range(n_trajectories):
            rng = np.random.default_rng([seed, index])
            state = balanced_initial_condition(
                solver, random_vorticity_spectrum(solver, rng, max_ic_degree), wind_rms
            )
            snapshots = simulate_trajectory(solver, state, n_snapshots, steps_per_snapshot, spinup_steps)
            trajectories.append(torch.roll(snapshots, shifts=width // 2, dims=-1).float().numpy())
    lat, lon, weights = grid_coordinates(solver, width)
    settings = {
        "n_trajectories": n_trajectories,
        "n_snapshots": n_snapshots,
        "height": height,
        "width": width,
        "interval_hours": interval_hours,
        "spinup_hours": spinup_hours,
        "solver_dt_s": solver_dt_s,
        "wind_rms": wind_rms,
        "max_ic_degree": max_ic_degree,
        "seed": seed,
    }
    return ShallowWaterTrajectories(np.stack(trajectories), lat, lon, weights, interval_hours, settings)


def _cache_path(settings: dict[str, Any]) -> Path:
    import torch_harmonics

    from neurips26.core.files import user_cache_dir

    root = user_cache_dir()

    key = json.dumps({**settings, "torch_harmonics": torch_harmonics.__version__}, sort_keys=True)
    return root / "data" / f"shallow_water-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"


def load_shallow_water(n_trajectories: int, n_snapshots: int, **settings: Any) -> ShallowWaterTrajectories:
    """:func:`generate_shallow_water`, cached on disk by every setting (regenerated when absent)."""
    _torch_harmonics()
    signature = {"n_trajectories": n_trajectories, "n_snapshots": n_snapshots, **settings}
    path = _cache_path(signature)
    if path.exists():
        with np.load(path) as stored:
            return ShallowWaterTrajectories(
                stored["fields"],
                stored["lat"],
                stored["lon"],
                stored["latitude_weights"],
                float(stored["interval_hours"]),
                json.loads(str(stored["settings"])),
            )
    data = generate_shallow_water(n_trajectories, n_snapshots, **settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(
        temporary,
        fields=data.fields,
        lat=data.lat,
        lon=data.lon,
        latitude_weights=data.latitude_weights,
        interval_hours=data.interval_hours,
        settings=json.dumps(data.settings),
    )
    temporary.replace(path)  # atomic: a reader never sees half a file
    return data
