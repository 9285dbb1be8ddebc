"""A seconds-long experiment with a known answer, used to test the harness itself (runner, CLI, report).

Estimating a location from contaminated samples: the median ("ours") beats the mean under outliers,
and a trimmed mean sits in between. A constant estimator that always answers 0 (the true location) is
the negative control of the second claim: it "wins" without estimating anything, so that claim comes out
``vacuous``. Everything is numpy, so each cell takes milliseconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from neurips26.bench.experiment import Claim, Experiment, Metric, NotApplicable, Profile, Progress
from neurips26.bench.setup import Setup, SetupContext
from neurips26.core.config import nested, param


@dataclass
class TrimmedMeanConfig:
    """The toy's "method config": how much the trimmed mean cuts from each tail."""

    trim_quantile: float = param(0.2, "ours: cuts the 10-20% contamination of the toy")

    def __post_init__(self) -> None:
        if not 0.0 <= self.trim_quantile < 0.5:
            raise ValueError(f"trim_quantile must lie in [0, 0.5), got {self.trim_quantile}")


@dataclass
class ToyConfig:
    """Config of the toy location-estimation experiment."""

    method: TrimmedMeanConfig = nested(TrimmedMeanConfig, "the estimator's own defaults")
    n_samples: int = param(200, "ours: enough for the median to win clearly")
    outlier_fraction: float = param(0.1, "ours: contamination that breaks the mean")
    fail_system: str = param("", "ours: a system name that raises, to test error capture")
    skip_system: str = param("", "ours: a system name that does not apply, to test n/a cells")
    nan_system: str = param("", "ours: a system name that returns NaN, to test nan cells")

    def __post_init__(self) -> None:
        if self.n_samples < 3:
            raise ValueError(f"n_samples must be >= 3, got {self.n_samples}")
        if not 0.0 <= self.outlier_fraction < 0.5:
            raise ValueError(f"outlier_fraction must lie in [0, 0.5), got {self.outlier_fraction}")


def _estimator(name: str, trim_quantile: float = 0.2) -> Any:
    def estimate(samples: np.ndarray) -> float:
        if name == "median":
            return float(np.median(samples))
        if name == "trimmed":
            lo, hi = np.quantile(samples, [trim_quantile, 1 - trim_quantile])
            return float(samples[(samples >= lo) & (samples <= hi)].mean())
        if name == "zero":
            return 0.0
        return float(samples.mean())

    estimate.__name__ = name
    return estimate


def _run(system: Any, config: ToyConfig, profile: Profile, seed: int, progress: Progress) -> dict[str, float]:
    if config.skip_system and system.__name__ == config.skip_system:
        raise NotApplicable(f"{config.skip_system} does not apply here")
    if config.fail_system and system.__name__ == config.fail_system:
        raise RuntimeError(f"asked to fail for {config.fail_system}")
    rng = np.random.default_rng(seed)
    n_out = int(config.n_samples * config.outlier_fraction)
    samples = np.concatenate([rng.normal(0.0, 1.0, config.n_samples - n_out), rng.normal(8.0, 1.0, n_out)])
    error = float("nan") if system.__name__ == config.nan_system else abs(system(samples))
    return {"abs_error": error, "n": float(config.n_samples)}


TOY_EXPERIMENT = Experiment(
    slug="toy",
    config_cls=ToyConfig,
    claims=(
        Claim("The median beats the mean under contamination.", "abs_error", "median", ("mean", "trimmed")),
        Claim("The median beats the plain mean.", "abs_error", "median", ("mean",), controls=("zero",)),
    ),
    metrics=(Metric("abs_error", "min", description="|estimate - true location|"), Metric("n", "max")),
    systems={
        "median": lambda c: _estimator("median"),
        "mean": lambda c: _estimator("mean"),
        "trimmed": lambda c: _estimator("trimmed", c.method.trim_quantile),
        "zero": lambda c: _estimator("zero"),
    },
    profiles={
        "smoke": Profile("smoke", budget_s=5, seeds=5),
        "default": Profile("default", budget_s=10, seeds=5, grid={"outlier_fraction": [0.05, 0.2]}),
        "full": Profile("full", budget_s=30, seeds=20, grid={"outlier_fraction": [0.0, 0.1, 0.3]}),
    },
    run=_run,
    ours="median",
)


def _seed_samples(config: ToyConfig, profile: Profile, seed: int, context: SetupContext) -> np.ndarray:
    """The seed's contaminated samples (drawn exactly as ``_run`` draws them), shared by every estimator."""
    rng = np.random.default_rng(seed)
    n_out = int(config.n_samples * config.outlier_fraction)
    return np.concatenate([rng.normal(0.0, 1.0, config.n_samples - n_out), rng.normal(8.0, 1.0, n_out)])


def _run_on_shared_samples(
    system: Any, config: ToyConfig, context: SetupContext, profile: Profile, seed: int, progress: Progress
) -> dict[str, float]:
    return {"abs_error": abs(system(context.samples)), "n": float(config.n_samples)}


# The toy with its samples drawn once per (grid point, seed) in a setup stage: the same numbers as
# TOY_EXPERIMENT (tests of the setup stage under each executor import it by name).
TOY_SETUP_EXPERIMENT = dataclasses.replace(
    TOY_EXPERIMENT,
    setup=Setup(
        "samples",
        build=_seed_samples,
        key=lambda config, profile, seed: (config.n_samples, config.outlier_fraction, seed),
    ),
    run=_run_on_shared_samples,
)
