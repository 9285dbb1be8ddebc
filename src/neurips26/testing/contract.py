"""The registry contract every ready method must pass (the test matrix runs it over all of them)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from neurips26.bench.experiment import Experiment
from neurips26.core.config import config_from_dict, config_hash, config_to_dict

SMOKE_BUDGET_LIMIT_S = 60.0
SMOKE_OVERRUN_FACTOR = 1.5


def check_config_round_trip(experiment: Experiment) -> None:
    """Default config -> dict -> JSON-ready dict -> config gives an equal config with an equal hash."""
    config = experiment.config_cls()
    again = config_from_dict(experiment.config_cls, config_to_dict(config))
    assert again == config, f"{experiment.slug}: config does not round-trip"
    assert config_hash(again) == config_hash(config), f"{experiment.slug}: hash changed on round trip"


def check_experiment_contract(experiment: Experiment, experiment_ref: str, run_smoke: bool = True) -> dict:
    """Spec, config round trip, smoke budget and a real smoke run with finite metrics for every system."""
    from neurips26.bench.runner import run_experiment

    check_config_round_trip(experiment)
    smoke = experiment.profile("smoke")
    assert smoke.budget_s <= SMOKE_BUDGET_LIMIT_S, f"{experiment.slug}: smoke budget {smoke.budget_s}s > 60 s"
    if not run_smoke:
        return {}
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        result = run_experiment(experiment, experiment_ref, Path(folder) / experiment.slug, profile="smoke")
        elapsed = time.perf_counter() - start
    assert result["run_info"]["status"] == "ok", (
        f"{experiment.slug}: smoke errors {result['run_info']['errors']}"
    )
    assert elapsed <= SMOKE_OVERRUN_FACTOR * smoke.budget_s, (
        f"{experiment.slug}: smoke took {elapsed:.1f}s, budget {smoke.budget_s}s"
    )
    for cell in result["cells"]:
        if cell["status"] == "n/a":
            continue
        assert cell["metrics"], f"{experiment.slug}: {cell['system']} returned no metrics"
        assert not cell.get("nonfinite"), (
            f"{experiment.slug}: {cell['system']} returned non-finite {cell['nonfinite']}"
        )
    returned = {cell["system"] for cell in result["cells"] if cell["status"] == "ok"}
    missing = set(experiment.system_names(smoke)) - returned
    assert not missing, f"{experiment.slug}: systems {sorted(missing)} returned nothing"
    return result
