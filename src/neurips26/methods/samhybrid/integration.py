"""Hybrid models in PyTorch: a container that knows which parameters are scientific, a training loop
over ODE trajectories (torchdiffeq), and an identifiability report that sweeps the SAM radius.

The container is architecture-agnostic: ``compose(state, physics_output, ml)`` may be additive,
output-correcting, or any non-additive function of the physics output.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from neurips26.core.validation import check_finite, check_positive

Compose = Callable[[torch.Tensor, torch.Tensor, nn.Module], torch.Tensor]


def additive(state: torch.Tensor, physics_output: torch.Tensor, ml: nn.Module) -> torch.Tensor:
    """F = f_phys(x; theta) + g(x)  (APHYNITY's shape)."""
    return physics_output + ml(state)


def output_correcting(state: torch.Tensor, physics_output: torch.Tensor, ml: nn.Module) -> torch.Tensor:
    """F = (1 + a(x)) * f_phys(x; theta) + b(x): an ML gain and offset on the physics output.

    ``ml`` must return ``2 * state_dim`` features (gain then offset). A gain can rescale theta away, so the
    ML part can absorb the physics here even more easily than in the additive shape.
    """
    gain, offset = _split_features(ml(state), physics_output.shape[-1], "output_correcting")
    return (1.0 + gain) * physics_output + offset


def non_additive(state: torch.Tensor, physics_output: torch.Tensor, ml: nn.Module) -> torch.Tensor:
    """F = g(x, f_phys(x; theta)): the ML part consumes the physics output; no separable correction exists."""
    return ml(torch.cat([state, physics_output], dim=-1))


def _split_features(features: torch.Tensor, dim: int, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    if features.shape[-1] != 2 * dim:
        raise ValueError(f"compose={name} needs an ML part with {2 * dim} outputs, got {features.shape[-1]}")
    return features[..., :dim], features[..., dim:]


COMPOSE_SHAPES: dict[str, Compose] = {
    "additive": additive,
    "output_correcting": output_correcting,
    "non_additive": non_additive,
}


def ml_io_sizes(shape: str, state_dim: int) -> tuple[int, int]:
    """(inputs, outputs) the ML part needs for a named compose shape."""
    sizes = {
        "additive": (state_dim, state_dim),
        "output_correcting": (state_dim, 2 * state_dim),
        "non_additive": (2 * state_dim, state_dim),
    }
    if shape not in sizes:
        raise ValueError(f"shape={shape!r} is not allowed; choose one of {sorted(sizes)}")
    return sizes[shape]


class HybridModel(nn.Module):
    """An ODE vector field ``dx/dt = compose(x, physics(x), ml)`` with scientific and ML parameters apart.

    Parameters
    ----------
    physics:
        Module mapping states ``(..., d)`` to the physics vector field ``(..., d)``; its trainable parameters
        are the scientific unknowns theta (named by ``physics.named_parameters()``).
    ml:
        Any module; how it enters is up to ``compose``. ``None`` gives a physics-only model.
    compose:
        ``compose(state, physics_output, ml) -> dx/dt`` or the name of a built-in shape
        (``"additive"``, ``"output_correcting"``, ``"non_additive"``).
    """

    def __init__(self, physics: nn.Module, ml: nn.Module | None = None, compose: Compose | str = "additive"):
        super().__init__()
        if not isinstance(physics, nn.Module):
            raise TypeError(f"physics must be an nn.Module, got {type(physics).__name__}")
        if not any(p.requires_grad for p in physics.parameters()):
            raise ValueError("physics has no trainable parameters: there is no theta to estimate")
        if ml is not None and not isinstance(ml, nn.Module):
            raise TypeError(f"ml must be an nn.Module or None, got {type(ml).__name__}")
        if isinstance(compose, str):
            if compose not in COMPOSE_SHAPES:
                raise ValueError(
                    f"compose={compose!r} is not allowed; choose one of {sorted(COMPOSE_SHAPES)}"
                )
            compose = COMPOSE_SHAPES[compose]
        if not callable(compose):
            raise TypeError(f"compose must be callable or a shape name, got {compose!r}")
        self.physics = physics
        self.ml = ml
        self.compose = compose

    def forward(self, t: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        physics_output = self.physics(state)
        if self.ml is None:
            return physics_output
        field_value = self.compose(state, physics_output, self.ml)
        if field_value.shape != state.shape:
            raise ValueError(
                f"compose returned shape {tuple(field_value.shape)} for a state of shape "
                f"{tuple(state.shape)}; it must return dx/dt with the state's shape"
            )
        return field_value

    def theta(self) -> dict[str, float]:
        """Current scientific parameter estimates by name."""
        return {name: float(p.detach()) for name, p in self.physics.named_parameters() if p.numel() == 1}

    def param_groups(self, **ml_options: Any) -> list[dict[str, Any]]:
        """Optimizer groups tagged ``role="physics"`` / ``role="ml"`` (extra options go to the ML group)."""
        groups: list[dict[str, Any]] = [{"params": list(self.physics.parameters()), "role": "physics"}]
        if self.ml is not None and any(True for _ in self.ml.parameters()):
            groups.append({"params": list(self.ml.parameters()), "role": "ml", **ml_options})
        return groups

    @torch.no_grad()
    def ml_contribution(self, states: torch.Tensor) -> float:
        """||F - f_phys|| / ||F|| over ``states``: how much of the vector field the ML part supplies."""
        total = self(torch.zeros(()), states)
        return float(torch.linalg.vector_norm(total - self.physics(states)) / torch.linalg.vector_norm(total))


def rollout(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    initial_states: torch.Tensor,
    times: torch.Tensor,
    substeps: int = 2,
) -> torch.Tensor:
    """Integrate ``model`` from ``initial_states`` (batch, d) with fixed-step RK4; returns (batch, T, d)."""
    from torchdiffeq import odeint

    step = float(times[1] - times[0]) / substeps
    trajectory = odeint(model, initial_states, times, method="rk4", options={"step_size": step})
    return trajectory.transpose(0, 1)


def _validated_trajectories(name: str, trajectories: torch.Tensor, times: torch.Tensor) -> None:
    if trajectories.ndim != 3:
        raise ValueError(f"{name} must have shape (batch, time, state), got {tuple(trajectories.shape)}")
    if trajectories.shape[1] != times.shape[0]:
        raise ValueError(f"{name} has {trajectories.shape[1]} time points but times has {times.shape[0]}")
    check_finite(name, trajectories)
    check_finite("times", times)


def trajectory_loss(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    trajectories: torch.Tensor,
    times: torch.Tensor,
    substeps: int = 2,
) -> torch.Tensor:
    """Mean squared error of the rollout from each trajectory's first state."""
    prediction = rollout(model, trajectories[:, 0], times, substeps)
    return torch.mean((prediction - trajectories) ** 2)


# penalty(model, trajectories, trajectory_loss) -> extra loss term; it sees the loss so that adaptive
# schemes (APHYNITY's lambda) can update themselves.
Penalty = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class FitHistory:
    """Losses and theta after every iteration of ``fit_hybrid``."""

    losses: list[float] = field(default_factory=list)
    theta: list[dict[str, float]] = field(default_factory=list)


def split_windows(trajectories: torch.Tensor, window: int) -> torch.Tensor:
    """Cut (batch, T, d) trajectories into overlapping-by-one windows (batch * k, window + 1, d).

    Training on short windows (multiple shooting) keeps each rollout short: faster, and free of the
    exploding gradients of long rollouts. Trailing points that do not fill a window are dropped.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    steps = trajectories.shape[1] - 1
    if window >= steps:
        return trajectories
    starts = torch.arange(0, steps - window + 1, window)
    index = starts[:, None] + torch.arange(window + 1)[None, :]  # (k, window + 1)
    windows = trajectories[:, index]  # (batch, k, window + 1, d)
    return windows.reshape(-1, window + 1, trajectories.shape[-1])


def fit_hybrid(
    model: HybridModel | nn.Module,
    trajectories: torch.Tensor,
    times: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    iterations: int,
    *,
    penalty: Penalty | None = None,
    substeps: int = 2,
    window: int | None = None,
    progress: Callable[..., Any] | None = None,
) -> FitHistory:
    """Train on trajectories (full batch), with SAM-style optimizers driven by two passes per step.

    ``window`` trains on windows of that many steps (multiple shooting) instead of whole trajectories.
    ``penalty(model, trajectories, loss)`` is added to the loss (APHYNITY's norm, ...). An optimizer with
    ``first_step``/``second_step`` (``SAMHybrid``, pytorch-optimizer's SAM) gets its two passes.
    """
    _validated_trajectories("trajectories", trajectories, times)
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if window is not None:
        trajectories = split_windows(trajectories, window)
        times = times[: trajectories.shape[1]]
    history = FitHistory()
    sharpness_aware = hasattr(optimizer, "first_step") and hasattr(optimizer, "second_step")
    steps = (
        range(iterations) if progress is None else progress(range(iterations), total=iterations, desc="fit")
    )

    def forward_backward() -> float:
        optimizer.zero_grad()
        loss = trajectory_loss(model, trajectories, times, substeps)
        total = loss + penalty(model, trajectories, loss) if penalty is not None else loss
        total.backward()
        return float(loss.detach())

    for _ in steps:
        loss = forward_backward()
        if sharpness_aware:
            optimizer.first_step(zero_grad=True)
            forward_backward()
            optimizer.second_step()
        else:
            optimizer.step()
        if not math.isfinite(loss):
            raise FloatingPointError(f"training diverged: loss became {loss}; lower the learning rate")
        history.losses.append(loss)
        if isinstance(model, HybridModel):
            history.theta.append(model.theta())
    return history


def training_sharpness(
    model: nn.Module,
    trajectories: torch.Tensor,
    times: torch.Tensor,
    substeps: int = 2,
    iterations: int = 20,
    only: str | None = "ml",
    window: int | None = None,
) -> float:
    """Top Hessian eigenvalue of the training loss w.r.t. the ML parameters (``only="ml"``) or all.

    ``window`` must match the one used in training, so that this is the sharpness of the loss trained.
    """
    if window is not None:
        trajectories = split_windows(trajectories, window)
        times = times[: trajectories.shape[1]]
    from neurips26.methods.samhybrid.core import top_hessian_eigenvalue

    names = [n for n, _ in model.named_parameters() if only is None or n.startswith(f"{only}.")]
    if not names:
        raise ValueError(f"model has no parameters under {only!r}")
    params = dict(model.named_parameters())
    frozen = {k: v.detach() for k, v in params.items() if k not in names}

    def loss_of(selected: dict[str, torch.Tensor]) -> torch.Tensor:
        merged = {**frozen, **selected}

        def field_fn(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return torch.func.functional_call(model, merged, (t, x))

        return trajectory_loss(field_fn, trajectories, times, substeps)

    return top_hessian_eigenvalue(loss_of, {k: params[k] for k in names}, iterations=iterations)


@dataclass
class IdentifiabilityReport:
    """theta-hat across a rho sweep and seeds, validation error, sharpness, and drift warnings."""

    rhos: list[float]
    theta: dict[float, list[dict[str, float]]]  # rho -> one estimate per seed
    validation_mse: dict[float, list[float]]
    sharpness: dict[float, list[float]]
    drift: dict[str, float]  # parameter -> relative range of the seed-mean estimate across rho
    seed_spread: dict[str, float]  # parameter -> largest relative std across seeds at any rho
    warnings: list[str]
    selected_rho: float

    def summary(self) -> str:
        lines = [f"selected rho (lowest validation MSE): {self.selected_rho:g}"]
        for rho in self.rhos:
            means = {k: sum(t[k] for t in self.theta[rho]) / len(self.theta[rho]) for k in self.theta[rho][0]}
            shown = ", ".join(f"{k}={v:.4g}" for k, v in means.items())
            val = sum(self.validation_mse[rho]) / len(self.validation_mse[rho])
            lines.append(f"rho={rho:g}: {shown}; validation MSE {val:.3g}")
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)


def identifiability_report(
    build: Callable[[int], tuple[HybridModel, torch.optim.Optimizer]] | Callable[..., Any],
    train: torch.Tensor,
    validation: torch.Tensor,
    times: torch.Tensor,
    rhos: Sequence[float],
    seeds: Sequence[int],
    iterations: int,
    *,
    drift_tolerance: float = 0.05,
    measure_sharpness: bool = False,
    substeps: int = 2,
    window: int | None = None,
) -> IdentifiabilityReport:
    """Train one model per (rho, seed) and report whether theta-hat is stable.

    ``build(rho, seed)`` returns a fresh ``(model, optimizer)``. A parameter whose seed-mean estimate moves
    by more than ``drift_tolerance`` (relative) across rho, or whose estimates spread that much across
    seeds, is flagged: the data do not pin it down and the ML part may be absorbing the physics.
    rho is selected by validation prediction error only; the true theta is never used.
    """
    if not rhos or not seeds:
        raise ValueError("rhos and seeds must both be non-empty")
    for rho in rhos:
        check_positive("rho", rho, allow_zero=True)
    _validated_trajectories("validation", validation, times)
    theta: dict[float, list[dict[str, float]]] = {}
    val_mse: dict[float, list[float]] = {}
    sharp: dict[float, list[float]] = {}
    for rho in rhos:
        theta[rho], val_mse[rho], sharp[rho] = [], [], []
        for seed in seeds:
            torch.manual_seed(seed)
            model, optimizer = build(rho, seed)
            fit_hybrid(model, train, times, optimizer, iterations, substeps=substeps, window=window)
            theta[rho].append(model.theta())
            with torch.no_grad():
                val_mse[rho].append(float(trajectory_loss(model, validation, times, substeps)))
            if measure_sharpness:
                sharp[rho].append(training_sharpness(model, train, times, substeps, window=window))
    drift, spread = _theta_stability(theta)
    messages = [
        f"theta '{name}' drifts by {value:.1%} across rho {list(rhos)}: the ML part may be absorbing it"
        for name, value in drift.items()
        if value > drift_tolerance
    ] + [
        f"theta '{name}' varies by {value:.1%} across seeds: it is not identified by the data and model"
        for name, value in spread.items()
        if value > drift_tolerance
    ]
    for message in messages:
        warnings.warn(message, stacklevel=2)
    selected = min(rhos, key=lambda r: sum(val_mse[r]) / len(val_mse[r]))
    return IdentifiabilityReport(list(rhos), theta, val_mse, sharp, drift, spread, messages, selected)


def _theta_stability(theta: dict[float, list[dict[str, float]]]) -> tuple[dict[str, float], dict[str, float]]:
    names = list(next(iter(theta.values()))[0])
    drift, spread = {}, {}
    for name in names:
        per_rho = {rho: torch.tensor([t[name] for t in estimates]) for rho, estimates in theta.items()}
        means = torch.stack([v.mean() for v in per_rho.values()])
        scale = means.abs().mean().clamp_min(1e-12)
        drift[name] = float((means.max() - means.min()) / scale)
        spread[name] = max(float(v.std(unbiased=False) / scale) for v in per_rho.values())
    return drift, spread
