"""The setup stage: shared work built once per key per worker, timed apart, handed to ``run``."""

from dataclasses import replace

import numpy as np
import pytest

from neurips26.bench.experiment import Experiment
from neurips26.bench.runner import CellTask, execute_cell, run_experiment
from neurips26.bench.setup import WORKER_STORE, Setup, SetupContext, SetupStore, order_by_setup
from neurips26.testing.toy_experiment import TOY_EXPERIMENT

REF = "neurips26.testing.toy_experiment:TOY_EXPERIMENT"


def _samples(config, profile, seed, context):
    """The toy's contaminated samples of one seed, built once and shared by every estimator."""
    BUILDS.append(("samples", seed))
    rng = np.random.default_rng(seed)
    n_out = int(config.n_samples * config.outlier_fraction)
    return np.concatenate([rng.normal(0.0, 1.0, config.n_samples - n_out), rng.normal(8.0, 1.0, n_out)])


def _scale(config, profile, seed, context):
    BUILDS.append(("scale", None))
    return 1.0


BUILDS: list[tuple[str, object]] = []
SAMPLES = Setup(
    "samples",
    build=_samples,
    key=lambda config, profile, seed: (config.n_samples, config.outlier_fraction, seed),
)
SCALE = Setup("scale", build=_scale, key=lambda config, profile, seed: "one per worker")


def _run_with_context(system, config, context, profile, seed, progress):
    return {"abs_error": abs(system(context.samples)) * context.scale, "n": float(config.n_samples)}


EXPERIMENT = replace(TOY_EXPERIMENT, setup=(SCALE, SAMPLES), run=_run_with_context)


@pytest.fixture(autouse=True)
def fresh_store():
    BUILDS.clear()
    WORKER_STORE.clear()
    yield
    WORKER_STORE.clear()


def test_setup_gives_the_numbers_of_the_run_that_computes_everything_itself(tmp_path) -> None:
    plain = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "plain", profile="default", seeds=2)
    shared = run_experiment(EXPERIMENT, REF, tmp_path / "shared", profile="default", seeds=2)
    assert shared["run_info"]["status"] == "ok"
    assert shared["systems"] == plain["systems"]


def test_each_key_is_built_once_per_worker_and_the_cells_say_whether_they_reused_it(tmp_path) -> None:
    profile = EXPERIMENT.profile("default")  # two grid points
    result = run_experiment(EXPERIMENT, REF, tmp_path / "run", profile="default", seeds=3)
    points = len(profile.points())
    samples_keys = {(c["point"]["outlier_fraction"], c["seed"]) for c in result["cells"]}
    assert len(samples_keys) == points * 3
    assert sorted(b for b in BUILDS if b[0] == "samples") == sorted(
        ("samples", seed) for seed in range(3) for _ in range(points)
    )
    assert BUILDS.count(("scale", None)) == 1  # the per-worker stage: its key never changes
    built = [c for c in result["cells"] if not c["setup_reused"]]
    assert len(built) == len(samples_keys)  # the first cell of each key built it, the others reused it
    assert all(c["setup"]["samples"]["wall_s"] >= 0 and c["setup_s"] >= 0 for c in built)
    reused = [c for c in result["cells"] if c["setup_reused"]]
    assert reused and all(c["setup_s"] == 0.0 for c in reused)
    assert result["run_info"]["setup_wall_s"] == pytest.approx(sum(c["setup_s"] for c in built))


def test_the_store_keeps_one_value_per_stage_and_rebuilds_after_a_key_change() -> None:
    store = SetupStore()
    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(profile, profile.points()[0], {})
    first, record = store.context_for(EXPERIMENT, config, profile, 0)
    assert record["samples"]["reused"] is False and record["scale"]["reused"] is False
    again, record = store.context_for(EXPERIMENT, config, profile, 0)
    assert record["samples"]["reused"] is True and again.samples is first.samples
    store.context_for(EXPERIMENT, config, profile, 1)  # another seed: the seed-0 samples are dropped
    back, record = store.context_for(EXPERIMENT, config, profile, 0)
    assert record["samples"]["reused"] is False and record["scale"]["reused"] is True
    np.testing.assert_array_equal(back.samples, first.samples)
    assert store.builds == 4 and len(store._entries) == 2  # bounded: one value per stage


def test_the_context_reaches_run_with_every_stage() -> None:
    seen = {}

    def run(system, config, context, profile, seed, progress):
        seen["context"] = context
        return {"abs_error": 0.0, "n": 1.0}

    experiment = replace(EXPERIMENT, run=run)
    profile = experiment.profile("smoke")
    task = CellTask(REF, "median", profile.points()[0], 1, profile, {}, 1, "cpu")
    cell = execute_cell(task, experiment)
    assert cell["status"] == "ok"
    assert isinstance(seen["context"], SetupContext) and set(seen["context"]) == {"scale", "samples"}
    config = experiment.config_for(profile, task.point, {})
    assert seen["context"]["scale"] == 1.0 and len(seen["context"].samples) == config.n_samples
    with pytest.raises(AttributeError, match="no stage 'model'"):
        _ = seen["context"].model


def test_a_failing_setup_becomes_a_clear_error_in_every_cell_of_its_key(tmp_path) -> None:
    def broken(config, profile, seed, context):
        BUILDS.append(("broken", seed))
        raise RuntimeError("no weights on disk")

    stage = Setup("weights", build=broken, key=lambda config, profile, seed: seed)
    experiment = replace(EXPERIMENT, setup=(SCALE, stage))
    result = run_experiment(experiment, REF, tmp_path / "run", profile="smoke", seeds=2)
    assert result["run_info"]["status"] == "error"
    assert {c["status"] for c in result["cells"]} == {"error"}
    message = "setup stage 'weights' failed: RuntimeError: no weights on disk"
    assert all(message in c["error"] for c in result["cells"])
    assert sorted(BUILDS.count(("broken", seed)) for seed in (0, 1)) == [1, 1]  # not retried per cell


def test_a_value_holding_a_resource_is_released_when_dropped() -> None:
    released = []
    stage = Setup(
        "sandbox",
        build=lambda config, profile, seed, context: f"process-{seed}",
        key=lambda config, profile, seed: seed,
        release=released.append,
    )
    experiment = replace(EXPERIMENT, setup=stage)
    profile = experiment.profile("smoke")
    config = experiment.config_for(profile, profile.points()[0], {})
    store = SetupStore()
    store.context_for(experiment, config, profile, 0)
    store.context_for(experiment, config, profile, 0)
    assert released == []  # reused, still held
    store.context_for(experiment, config, profile, 1)
    assert released == ["process-0"]  # a new key drops the old value
    store.clear()
    assert released == ["process-0", "process-1"]


def test_cells_sharing_a_key_are_ordered_together_and_keep_their_order_within() -> None:
    tasks = [("p0", "a", 0), ("p0", "a", 1), ("p0", "b", 0), ("p0", "b", 1), ("p1", "a", 0), ("p1", "b", 0)]
    by_seed = order_by_setup(tasks, lambda t: ("model", t[2]))  # a key that ignores the point
    assert by_seed == [tasks[0], tasks[2], tasks[4], tasks[5], tasks[1], tasks[3]]
    by_point_seed = order_by_setup(tasks, lambda t: ("model", (t[0], t[2])))
    assert by_point_seed == [tasks[0], tasks[2], tasks[1], tasks[3], tasks[4], tasks[5]]


def test_a_setup_stage_is_seeded_so_it_does_not_depend_on_the_cell_that_builds_it() -> None:
    import torch

    def draw(config, profile, seed, context):
        return torch.rand(3)

    stage = Setup("draw", build=draw, key=lambda config, profile, seed: seed)
    experiment = replace(EXPERIMENT, setup=stage)
    profile = experiment.profile("smoke")
    config = experiment.config_for(profile, profile.points()[0], {})
    torch.manual_seed(123)  # whatever state the previous cell left
    first, _ = SetupStore().context_for(experiment, config, profile, 4)
    torch.rand(100)
    second, _ = SetupStore().context_for(experiment, config, profile, 4)
    torch.manual_seed(4)
    assert torch.equal(first.draw, second.draw) and torch.equal(first.draw, torch.rand(3))


def test_bad_setup_declarations_fail_early_with_clear_messages() -> None:
    with pytest.raises(ValueError, match="public identifier"):
        Setup("not a name", build=_scale, key=lambda c, p, s: 0)
    with pytest.raises(ValueError, match="toy: setup stage names must be unique"):
        replace(TOY_EXPERIMENT, setup=(SCALE, SCALE))
    with pytest.raises(TypeError, match="toy: setup must be a Setup"):
        replace(TOY_EXPERIMENT, setup=(SCALE, "samples"))
    unhashable = Setup("rows", build=_scale, key=lambda c, p, s: [s])
    experiment = replace(EXPERIMENT, setup=unhashable)
    profile = experiment.profile("smoke")
    config = experiment.config_for(profile, profile.points()[0], {})
    with pytest.raises(TypeError, match="setup stage 'rows': key must be hashable"):
        SetupStore().context_for(experiment, config, profile, 0)


def test_an_experiment_without_setup_keeps_its_signature_and_cells() -> None:
    assert isinstance(TOY_EXPERIMENT, Experiment) and TOY_EXPERIMENT.setup is None
    profile = TOY_EXPERIMENT.profile("smoke")
    task = CellTask(REF, "median", profile.points()[0], 0, profile, {}, 1, "cpu")
    cell = execute_cell(task, TOY_EXPERIMENT)
    assert cell["status"] == "ok" and "setup_s" not in cell


def test_pool_workers_build_each_key_at_most_once_each_and_give_the_numbers_of_one_worker(tmp_path) -> None:
    from neurips26.testing.toy_experiment import TOY_SETUP_EXPERIMENT

    ref = "neurips26.testing.toy_experiment:TOY_SETUP_EXPERIMENT"
    one = run_experiment(TOY_SETUP_EXPERIMENT, ref, tmp_path / "one", profile="default", seeds=2)
    two = run_experiment(TOY_SETUP_EXPERIMENT, ref, tmp_path / "two", profile="default", seeds=2, jobs=2)
    plain = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "plain", profile="default", seeds=2)
    assert one["systems"] == two["systems"] == plain["systems"]
    assert sum(not c["setup_reused"] for c in one["cells"]) == 4  # 2 points x 2 seeds, one worker
    builds: dict[tuple, int] = {}
    for cell in two["cells"]:
        key = (cell["point"]["outlier_fraction"], cell["seed"])
        builds[key] = builds.get(key, 0) + (not cell["setup_reused"])
    assert len(builds) == 4 and all(1 <= count <= 2 for count in builds.values())


def test_a_rerun_resumes_setup_cells_without_building_anything(tmp_path) -> None:
    first = run_experiment(EXPERIMENT, REF, tmp_path / "run", profile="default", seeds=2)
    BUILDS.clear()
    again = run_experiment(EXPERIMENT, REF, tmp_path / "run", profile="default", seeds=2)
    assert again["run_info"]["resumed_cells"] == len(first["cells"]) and BUILDS == []
    assert again["systems"] == first["systems"]
