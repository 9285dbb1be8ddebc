"""The ray executor must give the numbers of the local one (a real local Ray instance, 2 CPUs)."""

from dataclasses import replace

import pytest

from neurips26.bench.runner import run_experiment
from neurips26.methods.samhybrid.experiment import EXPERIMENT
from neurips26.testing import requires_package


@requires_package("ray")
@pytest.mark.timeout(600)  # starting a Ray instance on 2 busy cores can take a minute or two
def test_ray_matches_local_on_samhybrid_smoke(tmp_path) -> None:
    import ray

    smoke = EXPERIMENT.profile("smoke")
    tiny = replace(
        smoke,
        seeds=2,
        overrides={**smoke.overrides, "iterations": 4},
        grid={"shape": ["additive"]},
        systems=("sam_ml", "erm", "sam_all"),
    )
    experiment = EXPERIMENT.with_profile("smoke", tiny)
    ref = "neurips26.methods.samhybrid.experiment:EXPERIMENT"
    local = run_experiment(experiment, ref, tmp_path / "local", profile="smoke")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_experiment(experiment, ref, tmp_path / "ray", profile="smoke", executor="ray")
    finally:
        ray.shutdown()
    assert local["run_info"]["status"] == remote["run_info"]["status"] == "ok"
    assert len(remote["cells"]) == 6
    for name, system in local["systems"].items():
        for mine, theirs in zip(system["points"], remote["systems"][name]["points"], strict=True):
            for metric, values in mine["values"].items():
                if metric != "train_seconds":  # wall time differs; every computed number must not
                    assert values == theirs["values"][metric], (name, metric)


@requires_package("ray")
@pytest.mark.timeout(600)
def test_ray_workers_build_each_setup_key_once_and_give_the_local_numbers(tmp_path) -> None:
    import ray

    from neurips26.testing.toy_experiment import TOY_SETUP_EXPERIMENT

    ref = "neurips26.testing.toy_experiment:TOY_SETUP_EXPERIMENT"
    local = run_experiment(TOY_SETUP_EXPERIMENT, ref, tmp_path / "local", profile="default", seeds=3)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_experiment(
            TOY_SETUP_EXPERIMENT, ref, tmp_path / "ray", profile="default", seeds=3, executor="ray"
        )
    finally:
        ray.shutdown()
    assert local["systems"] == remote["systems"]
    builds: dict[tuple, int] = {}
    for cell in remote["cells"]:
        key = (cell["point"]["outlier_fraction"], cell["seed"])
        builds[key] = builds.get(key, 0) + (not cell["setup_reused"])
    assert len(builds) == 6 and all(1 <= count <= 2 for count in builds.values())  # at most once per worker
