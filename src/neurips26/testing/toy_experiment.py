"""A seconds-long experiment with a known answer, used to test the harness itself (runner, CLI, report).

Estimating a location from contaminated samples: the median ("ours") beats the mean under outliers,
and a trimmed mean sits in between. Everything is numpy, so each cell takes milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from neurips26.bench.experiment import Claim, Experiment, Metric, NotApplicable, Profile, Progress
from neurips26.core.config import param


@dataclass
class ToyConfig:
    """Config of the toy location-estimation experiment."""

    n_samples: int = param(200, "ours: enough for the median to win clearly")
    outlier_fraction: float = param(0.1, "ours: contamination that breaks the mean")
    fail_system: str = param("", "ours: a system name that raises, to test error capture")
    skip_system: str = param("", "ours: a system name that does not apply, to test n/a cells")

    def __post_init__(self) -> None:
        if self.n_samples < 3:
            raise ValueError(f"n_samples must be >= 3, got {self.n_samples}")
        if not 0.0 <= self.outlier_fraction < 0.5:
            raise ValueError(f"outlier_fraction must lie in [0, 0.5), got {self.outlier_fraction}")


def _estimator(name: str) -> Any:
    def estimate(samples: np.ndarray) -> float:
        if name == "median":
            return float(np.median(samples))
        if name == "trimmed":
            lo, hi = np.quantile(samples, [0.2, 0.8])
            return float(samples[(samples >= lo) & (samples <= hi)].mean())
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
    return {"abs_error": abs(system(samples)), "n": float(config.n_samples)}


TOY_EXPERIMENT = Experiment(
    slug="toy",
    config_cls=ToyConfig,
    claims=(
        Claim("The median beats the mean under contamination.", "abs_error", "median", ("mean", "trimmed")),
    ),
    metrics=(Metric("abs_error", "min", description="|estimate - true location|"), Metric("n", "max")),
    systems={
        "median": lambda c: _estimator("median"),
        "mean": lambda c: _estimator("mean"),
        "trimmed": lambda c: _estimator("trimmed"),
    },
    profiles={
        "smoke": Profile("smoke", budget_s=5, seeds=3),
        "default": Profile("default", budget_s=10, seeds=5, grid={"outlier_fraction": [0.05, 0.2]}),
        "full": Profile("full", budget_s=30, seeds=20, grid={"outlier_fraction": [0.0, 0.1, 0.3]}),
    },
    run=_run,
    ours="median",
)
