"""The SAM-hybrid experiment: do sharpness-aware hybrids estimate theta better than ERM and ERM + L2?

Data: damped pendulum (APHYNITY protocol) and unforced Duffing oscillator, each fitted with three hybrid
shapes. Every system trains on the same trajectories, with the same MLP, learning rate and iterations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, NotApplicable, Profile, Progress
from neurips26.core.config import nested, param
from neurips26.core.validation import check_choice, check_positive
from neurips26.methods.samhybrid.baselines import NeuralField, Recipe, make_optimizer
from neurips26.methods.samhybrid.config import SAMHybridConfig
from neurips26.methods.samhybrid.dynamics import get_system, make_splits
from neurips26.methods.samhybrid.integration import (
    COMPOSE_SHAPES,
    HybridModel,
    fit_hybrid,
    ml_io_sizes,
    training_sharpness,
    trajectory_loss,
)
from neurips26.methods.samhybrid.physics import ESTIMATED_PARAMETERS, PHYSICS_FOR_SYSTEM, build_physics
from neurips26.zoo.builders import tiny_mlp


@dataclass
class SAMHybridExperimentConfig:
    """Data, model and training settings shared by our method and every baseline; ``method`` is ours."""

    method: SAMHybridConfig = nested(SAMHybridConfig, "SAMHybridConfig's own defaults (config.py)")
    ode_system: str = param("pendulum", "paper: pendulum time series (APHYNITY protocol)")
    shape: str = param("additive", "issue: additive, output-correcting and non-additive hybrids")
    n_train: int = param(24, "ours: small data is where the ML part can absorb the physics")
    n_test: int = param(32, "ours: enough trajectories for a stable test MSE")
    noise_std: float = param(0.01, "ours: mild observation noise on training data")
    hidden: int = param(32, "ours: a 2-hidden-layer MLP, flexible enough to absorb theta")
    iterations: int = param(
        200, "ours: theta moves <= lr per Adam step, 200 steps cover the 0.5 -> truth gap"
    )
    lr: float = param(0.01, "ours: Adam's rate that trains all systems stably (every system uses it)")
    substeps: int = param(1, "ours: one RK4 step per sample (dt=0.5) errs ~1e-3, below the noise")
    window: int = param(2, "ours: multiple shooting on 2-step windows: short, fast, stable rollouts")
    rho_asam: float = param(0.5, "ASAM paper (Kwon et al. 2021) uses rho about 10x SAM's")
    l2_weight: float = param(1e-3, "ours: ERM+L2 weight decay on the ML part (not tuned)")
    aphynity_lambda0: float = param(1.0, "APHYNITY (Yin et al. 2021) lambda_0")
    aphynity_tau: float = param(100.0, "ours: APHYNITY's tau_2 scaled to our loss magnitude")
    measure_sharpness: bool = param(True, "issue: sharpness is a reported metric")

    def __post_init__(self) -> None:
        check_choice("ode_system", self.ode_system, tuple(PHYSICS_FOR_SYSTEM))
        check_choice("shape", self.shape, tuple(COMPOSE_SHAPES))
        for name in ("n_train", "n_test", "hidden", "iterations", "substeps", "window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("lr", "aphynity_lambda0", "aphynity_tau"):
            check_positive(name, getattr(self, name))
        for name in ("rho_asam", "l2_weight", "noise_std"):
            check_positive(name, getattr(self, name), allow_zero=True)


# name -> factory(config) -> Recipe: every hyper-parameter a system uses comes from the config.
SYSTEMS: dict[str, Callable[[SAMHybridExperimentConfig], Recipe]] = {
    "sam_ml": lambda c: Recipe("sam_ml", "hybrid", "sam_hybrid", c.lr, sam=c.method),
    "physics_only": lambda c: Recipe("physics_only", "physics", "adam", c.lr),
    "nn_only": lambda c: Recipe("nn_only", "neural", "adam", c.lr),
    "erm": lambda c: Recipe("erm", "hybrid", "adam", c.lr),
    "erm_l2": lambda c: Recipe("erm_l2", "hybrid", "adam_l2", c.lr, l2_weight=c.l2_weight),
    "aphynity": lambda c: Recipe(
        "aphynity",
        "hybrid",
        "aphynity",
        c.lr,
        aphynity_lambda0=c.aphynity_lambda0,
        aphynity_tau=c.aphynity_tau,
    ),
    "sam_all": lambda c: Recipe("sam_all", "hybrid", "sam_all", c.lr, sam=c.method),
    "asam_ml": lambda c: Recipe(
        "asam_ml", "hybrid", "sam_hybrid", c.lr, sam=replace(c.method, adaptive=True, rho=c.rho_asam)
    ),
    # negative control: the same radius in a random direction (perturbation without sharpness-awareness)
    "random_ml": lambda c: Recipe(
        "random_ml", "hybrid", "sam_hybrid", c.lr, sam=replace(c.method, ascent="random")
    ),
}

BASELINES = ("erm", "erm_l2")
SHAPE_FREE_POINT = "additive"  # physics-only and NN-only do not depend on the shape: run them here once


def build_model(recipe: Recipe, config: SAMHybridExperimentConfig, seed: int) -> torch.nn.Module:
    """The model of a recipe; the ML part's initial weights depend on the seed only."""
    state_dim = get_system(config.ode_system).state_dim
    if recipe.structure == "neural":
        return NeuralField(tiny_mlp(state_dim, state_dim, config.hidden, depth=3, seed=seed))
    physics = build_physics(config.ode_system)
    if recipe.structure == "physics":
        return HybridModel(physics, None)
    ml_in, ml_out = ml_io_sizes(config.shape, state_dim)
    return HybridModel(physics, tiny_mlp(ml_in, ml_out, config.hidden, depth=3, seed=seed), config.shape)


def relative_theta_error(model: torch.nn.Module, ode_system: str) -> float:
    """Mean over estimated parameters of |theta_hat - theta*| / |theta*| (theta* used only to score)."""
    truth = get_system(ode_system).params
    estimate = model.theta()
    names = ESTIMATED_PARAMETERS[ode_system]
    return sum(abs(estimate[n] - truth[n]) / abs(truth[n]) for n in names) / len(names)


def train_system(
    recipe: Recipe,
    config: SAMHybridExperimentConfig,
    seed: int,
    train: torch.Tensor,
    times: torch.Tensor,
    progress: Any = None,
) -> tuple[torch.nn.Module, float]:
    """Build and train one system on ``train``; returns the model and the training wall time."""
    model = build_model(recipe, config, seed)
    optimizer = make_optimizer(recipe, model)
    penalty = recipe.penalty()
    start = time.perf_counter()
    fit_hybrid(
        model,
        train,
        times,
        optimizer,
        config.iterations,
        penalty=penalty,
        substeps=config.substeps,
        window=config.window,
        progress=progress,
    )
    return model, time.perf_counter() - start


def run(
    recipe: Recipe, config: SAMHybridExperimentConfig, profile: Profile, seed: int, progress: Progress
) -> dict[str, Any]:
    """One cell: draw the seed's trajectories, train the recipe's system, score theta and predictions."""
    if recipe.name == "aphynity" and config.shape != "additive":
        raise NotApplicable("APHYNITY's ||F_a|| penalty is defined for additive hybrids only")
    if recipe.structure != "hybrid" and config.shape != SHAPE_FREE_POINT:
        raise NotApplicable(f"{recipe.name} has no ML/physics composition: it runs once, at shape=additive")
    system = get_system(config.ode_system)
    data = make_splits(system, config.n_train, config.n_test, config.noise_std, seed=seed)
    model, train_seconds = train_system(recipe, config, seed, data.train, data.times, progress.loop)
    with torch.no_grad():
        metrics: dict[str, Any] = {
            "test_mse": float(trajectory_loss(model, data.test, data.times, config.substeps)),
            "ood_mse": float(trajectory_loss(model, data.ood, data.times, config.substeps)),
            "train_seconds": train_seconds,
        }
    if isinstance(model, HybridModel):
        metrics["theta_error"] = relative_theta_error(model, config.ode_system)
        states = data.test.reshape(-1, system.state_dim)
        metrics["ml_contribution"] = model.ml_contribution(states) if model.ml is not None else 0.0
        if config.measure_sharpness and model.ml is not None:
            metrics["sharpness"] = training_sharpness(
                model, data.train, data.times, config.substeps, iterations=10, window=config.window
            )
    return metrics


GRID = {"ode_system": ["pendulum", "duffing"], "shape": ["additive", "output_correcting", "non_additive"]}
DEFAULT_GRID = {"ode_system": ["pendulum", "duffing"], "shape": ["additive", "non_additive"]}

# Positive contrasts (issue #48). Theta: an L2 penalty on the ML part (APHYNITY's minimal-norm principle)
# identifies theta better than plain ERM. Test error: plain ERM fits the data better than the same model
# pulled towards a zero ML part.
THETA_CONTRAST = ("erm_l2", "erm")
FIT_CONTRAST = ("erm", "erm_l2")

EXPERIMENT = Experiment(
    slug="samhybrid",
    config_cls=SAMHybridExperimentConfig,
    claims=(
        Claim(
            "SAM on the ML part lowers the relative theta error versus ERM and ERM+L2 on every shape",
            "theta_error",
            "sam_ml",
            BASELINES,
            controls=("random_ml",),
            contrast=THETA_CONTRAST,
        ),
        Claim(
            "SAM on the ML part lowers the relative theta error versus plain ERM on every shape",
            "theta_error",
            "sam_ml",
            ("erm",),
            controls=("random_ml",),
            contrast=THETA_CONTRAST,
        ),
        Claim(
            "the gain comes from sharpness-awareness: SAM lowers the relative theta error versus the same "
            "radius in a random direction on every shape",
            "theta_error",
            "sam_ml",
            ("random_ml",),
            controls=("erm",),  # plain ERM must not beat the random-direction perturbation
            contrast=THETA_CONTRAST,
        ),
        Claim(
            "with test prediction error comparable to ERM and ERM+L2 (at most 50% worse)",
            "test_mse",
            "sam_ml",
            BASELINES,
            kind="noninferior",
            margin=0.5,
            margin_source="ours: the paper claims comparable prediction error without a number; "
            "50% reads 'same order of magnitude' on MSEs that vary 2x across seeds",
            controls=("physics_only",),
            contrast=FIT_CONTRAST,
        ),
    ),
    metrics=(
        Metric(
            "theta_error",
            "min",
            "relative",
            "mean |theta_hat - theta*| / |theta*| over estimated parameters",
            # theta_hat = 0 scores 1: a system not shown below 1 has not identified theta (issue #48: on
            # duffing/non-additive every method scored 1.0-1.4, and the claims compared failures there)
            fail_level=1.0,
            fail_reason="no method identifies theta here",
        ),
        Metric("test_mse", "min", "", "trajectory MSE on in-distribution test initial conditions"),
        Metric("ood_mse", "min", "", "trajectory MSE on larger, out-of-distribution initial conditions"),
        Metric("ml_contribution", "min", "relative", "||F - f_phys|| / ||F|| on test states"),
        Metric(
            "sharpness", "min", "", "top Hessian eigenvalue of the training loss w.r.t. the ML parameters"
        ),
        Metric("train_seconds", "min", "s", "wall time of training", timing=True),
    ),
    systems=SYSTEMS,
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=40,
            seeds=2,
            overrides={"iterations": 15, "n_train": 6, "n_test": 6, "measure_sharpness": False},
            grid={"shape": ["additive", "non_additive"]},
        ),
        "default": Profile(
            "default",
            budget_s=253,  # measured: 253 s wall, 195 s CPU, one worker, with other jobs running
            seeds=5,
            grid=DEFAULT_GRID,
            systems=("sam_ml", "physics_only", "erm", "erm_l2", "aphynity", "random_ml"),
        ),
        "full": Profile(
            "full", budget_s=3600, seeds=10, overrides={"iterations": 1000, "n_train": 64}, grid=GRID
        ),
    },
    run=run,
    ours="sam_ml",
)
