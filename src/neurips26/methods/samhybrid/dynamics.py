"""Trajectories of small ODE systems for scientific-ML experiments, integrated with torchdiffeq.

Each system is a vector field ``f(t, x)`` with named true parameters. ``simulate`` integrates a batch of
initial conditions on a time grid (adaptive dopri5 at tight tolerance, so the data are exact to ~1e-7) and
``make_splits`` draws deterministic train / validation / test / out-of-distribution sets.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from neurips26.core.validation import check_finite, check_positive

VectorField = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, eq=False)  # identity hashing: systems are module constants, and cache keys
class ODESystem:
    """A named vector field with its true parameters and the initial-condition ranges of each split.

    ``in_range`` and ``ood_range`` give (low, high) of the initial state's amplitude per state dimension;
    the OOD range lies outside the training range (larger oscillations), for extrapolation tests.
    """

    name: str
    params: dict[str, float]
    state_dim: int
    vector_field: Callable[[dict[str, float]], VectorField]
    in_range: tuple[float, float]
    ood_range: tuple[float, float]
    horizon: float
    dt: float
    state_names: tuple[str, ...] = field(default=())

    @property
    def n_steps(self) -> int:
        return round(self.horizon / self.dt)

    def times(self) -> torch.Tensor:
        return torch.linspace(0.0, self.horizon, self.n_steps + 1, dtype=torch.float64)


def damped_pendulum_field(params: dict[str, float]) -> VectorField:
    """theta'' = -omega0^2 sin(theta) - alpha theta' (APHYNITY's damped pendulum)."""
    omega0_sq, alpha = params["omega0_sq"], params["alpha"]

    def field_fn(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        theta, velocity = x[..., 0], x[..., 1]
        return torch.stack([velocity, -omega0_sq * torch.sin(theta) - alpha * velocity], dim=-1)

    return field_fn


def duffing_field(params: dict[str, float]) -> VectorField:
    """x'' = -k x - c x' - beta x^3 (unforced Duffing oscillator)."""
    stiffness, damping, beta = params["stiffness"], params["damping"], params["beta"]

    def field_fn(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        position, velocity = x[..., 0], x[..., 1]
        return torch.stack(
            [velocity, -stiffness * position - damping * velocity - beta * position**3], dim=-1
        )

    return field_fn


# APHYNITY's pendulum: period T0 = 6 s (omega0 = 2 pi / 6), damping alpha = 0.2, sampled every 0.5 s.
DAMPED_PENDULUM = ODESystem(
    name="pendulum",
    params={"omega0_sq": (2 * math.pi / 6) ** 2, "alpha": 0.2},
    state_dim=2,
    vector_field=damped_pendulum_field,
    in_range=(0.2, 1.2),
    ood_range=(1.6, 2.2),
    horizon=10.0,
    dt=0.5,
    state_names=("angle", "angular_velocity"),
)

# Unforced Duffing with a hardening spring; the linear part (stiffness, damping) is the physics.
DUFFING = ODESystem(
    name="duffing",
    params={"stiffness": 1.0, "damping": 0.15, "beta": 0.5},
    state_dim=2,
    vector_field=duffing_field,
    in_range=(0.3, 1.2),
    ood_range=(1.5, 2.0),
    horizon=10.0,
    dt=0.5,
    state_names=("position", "velocity"),
)

SYSTEMS: dict[str, ODESystem] = {s.name: s for s in (DAMPED_PENDULUM, DUFFING)}


def get_system(name: str) -> ODESystem:
    if name not in SYSTEMS:
        raise ValueError(f"unknown ODE system {name!r}; choose one of {sorted(SYSTEMS)}")
    return SYSTEMS[name]


def sample_initial_states(
    system: ODESystem, n: int, amplitude: tuple[float, float], seed: int
) -> torch.Tensor:
    """Initial states with energy-like amplitude in ``amplitude`` and a uniformly random phase."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    generator = torch.Generator().manual_seed(seed)
    radius = amplitude[0] + (amplitude[1] - amplitude[0]) * torch.rand(
        n, generator=generator, dtype=torch.float64
    )
    phase = 2 * math.pi * torch.rand(n, generator=generator, dtype=torch.float64)
    return torch.stack([radius * torch.cos(phase), radius * torch.sin(phase)], dim=-1)


def simulate(
    system: ODESystem, initial_states: torch.Tensor, noise_std: float = 0.0, seed: int = 0
) -> torch.Tensor:
    """Integrate ``initial_states`` (batch, state_dim) on ``system.times()``; returns (batch, steps+1, dim).

    Observation noise, if any, is added after integration (Gaussian, ``noise_std``).
    """
    from torchdiffeq import odeint

    if initial_states.ndim != 2 or initial_states.shape[-1] != system.state_dim:
        raise ValueError(
            f"initial_states must have shape (batch, {system.state_dim}), got {tuple(initial_states.shape)}"
        )
    check_finite("initial_states", initial_states)
    check_positive("noise_std", noise_std, allow_zero=True)
    field_fn = system.vector_field(system.params)
    with torch.no_grad():
        trajectory = odeint(
            field_fn, initial_states.double(), system.times(), method="dopri5", rtol=1e-8, atol=1e-8
        )
    trajectory = trajectory.transpose(0, 1)
    if noise_std > 0:
        generator = torch.Generator().manual_seed(seed + 7919)
        trajectory = trajectory + noise_std * torch.randn(
            trajectory.shape, generator=generator, dtype=trajectory.dtype
        )
    return trajectory


@dataclass(frozen=True)
class TrajectorySplits:
    """Float32 trajectories (batch, steps+1, dim) per split, on a shared time grid."""

    times: torch.Tensor
    train: torch.Tensor
    validation: torch.Tensor
    test: torch.Tensor
    ood: torch.Tensor


@functools.lru_cache(maxsize=32)
def make_splits(
    system: ODESystem, n_train: int, n_test: int, noise_std: float = 0.0, seed: int = 0
) -> TrajectorySplits:
    """Deterministic splits: in-range train/validation/test and out-of-range (OOD) test trajectories.

    Cached: every system of an experiment trains on the same data, generated once per process.
    Treat the returned tensors as read-only.
    """
    n_validation = max(n_train // 4, 1)
    ranges = [
        (system.in_range, n_train),
        (system.in_range, n_validation),
        (system.in_range, n_test),
        (system.ood_range, n_test),
    ]
    sets = []
    for offset, (amplitude, n) in enumerate(ranges):
        initial = sample_initial_states(system, n, amplitude, seed * 1000 + offset)
        noisy = noise_std if offset < 2 else 0.0  # evaluate against clean trajectories
        sets.append(simulate(system, initial, noisy, seed * 1000 + offset).float())
    return TrajectorySplits(system.times().float(), *sets)
