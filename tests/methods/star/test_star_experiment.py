"""STAR's experiment: systems are built from the config, a cell returns every metric, the README runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from neurips26.bench.experiment import SilentProgress
from neurips26.methods.star.experiment import (
    EXPERIMENT,
    SYSTEMS,
    _shuffle_states,
    build_detector,
    score_metrics,
)

torch.set_num_threads(1)
README = Path(__file__).parents[3] / "src" / "neurips26" / "methods" / "star" / "README.md"


def tiny_config(**overrides):
    profile = EXPERIMENT.profile("smoke")
    return EXPERIMENT.config_for(profile, {}, {**overrides})


def test_systems_use_the_config() -> None:
    config = tiny_config(**{"method.rank": 2, "method.use_memory": False})
    star = EXPERIMENT.build_system("star", config)
    assert star.star.rank == 2 and not star.star.use_memory
    ablation = EXPERIMENT.build_system("star_no_matching", config)
    assert not ablation.star.use_matching and ablation.star.rank == 2
    lora = EXPERIMENT.build_system("static_lora", config)
    assert lora.star.rank == 2 and lora.adapter == "lora" and lora.state_handling == "drop"
    assert EXPERIMENT.build_system("star_shuffled_states", config).shuffle_states
    assert set(SYSTEMS) >= {"star", "numeric_only", "states_as_numbers", "one_hot", "iforest", "pca"}


def test_one_cell_returns_every_metric() -> None:
    config = tiny_config()
    profile = EXPERIMENT.profile("smoke")
    metrics = EXPERIMENT.run(EXPERIMENT.build_system("star", config), config, profile, 0, SilentProgress())
    assert set(metrics) == {m.name for m in EXPERIMENT.metrics}
    assert all(math.isfinite(v) for v in metrics.values())
    assert 0 <= metrics["vus_pr"] <= 1


def test_family_metrics_leave_other_families_out_and_control_breaks_alignment() -> None:
    labels = np.zeros(400, dtype=int)
    labels[50:60], labels[150:170], labels[300:320] = 1, 2, 3
    perfect_for_2 = (labels == 2).astype(float) + 0.01 * np.arange(400) / 400
    out = score_metrics(labels, perfect_for_2, 5)
    assert out["vus_pr_state_conditional"] > 0.95 > out["vus_pr_numeric"]
    series = np.arange(40.0).reshape(20, 2)
    rolled = _shuffle_states(series, [1], np.random.default_rng(0))
    assert np.array_equal(rolled[:, 0], series[:, 0]) and not np.array_equal(rolled[:, 1], series[:, 1])


def test_deep_pyod_baselines_run_on_a_short_series() -> None:
    config = tiny_config(deep_epochs=1)
    profile = EXPERIMENT.profile("smoke")
    for name in ("lstm_ad", "anomaly_transformer"):
        system = EXPERIMENT.build_system(name, config)
        metrics = EXPERIMENT.run(system, config, profile, 0, SilentProgress())
        assert math.isfinite(metrics["vus_pr"]) and "trainable_params" not in metrics


def test_random_scores_ignore_the_data_and_follow_the_seed() -> None:
    # the known-bad side of every claim's contrast (issue #48) must not see the series
    system = EXPERIMENT.build_system("random_scores", tiny_config())
    rng = np.random.default_rng(0)
    train, first, second = rng.normal(size=(50, 3)), rng.normal(size=(40, 3)), rng.normal(size=(40, 3))

    def scores(seed: int, test: np.ndarray) -> np.ndarray:
        return build_detector(system, tiny_config(), {}, seed).fit(train).decision_function(test)

    assert scores(1, first).shape == (40,)
    assert np.array_equal(scores(1, first), scores(1, second))
    assert not np.array_equal(scores(1, first), scores(2, first))
