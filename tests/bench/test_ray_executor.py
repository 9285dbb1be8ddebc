"""The ray executor must give the numbers of the local one (a real local Ray instance, 2 CPUs)."""

from dataclasses import replace

from neurips26.bench.runner import run_experiment
from neurips26.methods.samhybrid.experiment import EXPERIMENT
from neurips26.testing import requires_package


@requires_package("ray")
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
