"""Physics parts of the benchmark hybrids: vector fields with named scientific parameters."""

from __future__ import annotations

import torch
from torch import nn


class FrictionlessPendulum(nn.Module):
    """theta'' = -omega0_sq * sin(theta): APHYNITY's physics for its damped pendulum (friction unknown)."""

    def __init__(self, omega0_sq: float = 0.5) -> None:
        super().__init__()
        self.omega0_sq = nn.Parameter(torch.tensor(float(omega0_sq)))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        angle, velocity = state[..., 0], state[..., 1]
        return torch.stack([velocity, -self.omega0_sq * torch.sin(angle)], dim=-1)


class LinearOscillator(nn.Module):
    """x'' = -stiffness * x - damping * x': the linear part of a Duffing oscillator."""

    def __init__(self, stiffness: float = 0.5, damping: float = 0.5) -> None:
        super().__init__()
        self.stiffness = nn.Parameter(torch.tensor(float(stiffness)))
        self.damping = nn.Parameter(torch.tensor(float(damping)))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        position, velocity = state[..., 0], state[..., 1]
        return torch.stack([velocity, -self.stiffness * position - self.damping * velocity], dim=-1)


# The ODE system each physics part models, and which true parameters it estimates.
PHYSICS_FOR_SYSTEM: dict[str, type[nn.Module]] = {
    "pendulum": FrictionlessPendulum,
    "duffing": LinearOscillator,
}
ESTIMATED_PARAMETERS: dict[str, tuple[str, ...]] = {
    "pendulum": ("omega0_sq",),
    "duffing": ("stiffness", "damping"),
}


def build_physics(system: str) -> nn.Module:
    if system not in PHYSICS_FOR_SYSTEM:
        raise ValueError(f"no physics part for system {system!r}; choose one of {sorted(PHYSICS_FOR_SYSTEM)}")
    return PHYSICS_FOR_SYSTEM[system]()
