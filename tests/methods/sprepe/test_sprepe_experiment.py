"""SpRePE's experiment: smoke run of every system, claims per task, n/a cells (split from test_sprepe.py)."""

import math

import pytest
import torch

torch.set_num_threads(1)


# --- Experiment and README ---------------------------------------------------------------------------------


def test_smoke_experiment_returns_finite_metrics_for_every_system() -> None:
    import time

    from neurips26.bench.experiment import SilentProgress
    from neurips26.methods.sprepe.experiment import EXPERIMENT, TASK_METRICS

    profile = EXPERIMENT.profile("smoke")
    assert [p["task"] for p in profile.points()] == ["digits", "shallow_water"]
    start = time.perf_counter()
    for point in profile.points():
        if point["task"] == "shallow_water":
            pytest.importorskip("torch_harmonics")
        config = EXPERIMENT.config_for(profile, point, {})
        for name in EXPERIMENT.system_names(profile):
            metrics = EXPERIMENT.run_cell(
                EXPERIMENT.systems[name](config), config, profile, 0, SilentProgress()
            )
            assert set(metrics) == set(TASK_METRICS[point["task"]]), (name, point)
            assert all(math.isfinite(v) for v in metrics.values()), (name, metrics)
            if point["task"] == "digits":
                assert 0.0 <= metrics["accuracy"] <= 1.0
            else:
                assert -1.0 <= metrics["acc_rollout"] <= 1.0 and metrics["rmse_rollout"] > 0
    assert time.perf_counter() - start < profile.budget_s
    assert set().union(*TASK_METRICS.values()) == {m.name for m in EXPERIMENT.metrics}


def test_claims_are_restricted_to_their_task() -> None:
    from neurips26.methods.sprepe.experiment import EXPERIMENT, TASK_METRICS

    for claim in EXPERIMENT.claims:
        (task,) = claim.where["task"]
        assert claim.metric in TASK_METRICS[task], claim.text


def test_shallow_water_cells_are_not_applicable_off_the_first_digits_grid_values() -> None:
    from neurips26.bench.experiment import NotApplicable, SilentProgress
    from neurips26.bench.setup import SetupContext
    from neurips26.methods.sprepe.experiment import EXPERIMENT, run_experiment_cell

    full = EXPERIMENT.profile("full")
    config = EXPERIMENT.config_for(full, {"task": "shallow_water", "split": "NR/R", "max_spin_deg": 0.0}, {})
    with pytest.raises(NotApplicable, match="split"):
        no_data = SetupContext()  # the check comes before the data are read
        run_experiment_cell(EXPERIMENT.systems["none"](config), config, no_data, full, 0, SilentProgress())
