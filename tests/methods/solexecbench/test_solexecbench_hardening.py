"""SOL-ExecBench hardening (issue #33): a narrowed static check (clocks and sleep allowed, patching and heap
introspection not), the scale-aware default tolerance, a private /tmp and HOME per evaluation, and a SOL floor
widened by the calibration's measured noise."""

from __future__ import annotations

import dataclasses
import os
import uuid

import pytest
import torch

from neurips26.methods.solar import HardwareSpec
from neurips26.methods.solar.hardware import DEFAULT_TRIALS
from neurips26.methods.solexecbench import (
    SolExecBench,
    SolExecBenchConfig,
    driver,
    load_problem_set,
    static_check,
)
from neurips26.methods.solexecbench.config import PRIVATE_TMP_SWITCH
from neurips26.methods.solexecbench.harness import DEFAULT_TOLERANCE
from neurips26.methods.solexecbench.solutions import make_solution, red_team_solution
from tests.methods.solexecbench_helpers import FAST

# the default before issue #33 (and upstream's): atol = rtol = 1e-2 on 99% of elements
LEGACY_TOLERANCE = {
    "max_atol": 1e-2,
    "max_rtol": 1e-2,
    "required_matched_ratio": 0.99,
    "max_error_cap": None,
    "allow_negative_inf": False,
}
SLEEPY = """import time

import torch


def run(x, norm_weight, eps, y):
    start = time.perf_counter()
    time.sleep(0.0002)
    assert time.perf_counter_ns() > 0 and time.perf_counter() >= start
    torch.mul(x, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), out=y)
    y.mul_(norm_weight)
"""


@pytest.fixture(scope="module")
def rmsnorm():
    problem = load_problem_set(("rmsnorm",))["rmsnorm"]
    return dataclasses.replace(problem, workloads=problem.workloads[:1])


# ---------------------------------------------------------------------------------------------------------
# (4) the static check, narrowed
# ---------------------------------------------------------------------------------------------------------


def _reasons(source: str) -> list[str]:
    return [f.reason for f in static_check({"kernel.py": source})]


def test_static_check_allows_clocks_sleep_and_collect():
    assert _reasons(SLEEPY) == []
    assert (
        _reasons("from time import sleep, perf_counter_ns\n\ndef run(x):\n    sleep(0)\n    return x\n") == []
    )
    assert _reasons("import gc\n\ndef run(x):\n    gc.collect()\n    return x\n") == []
    assert _reasons("def run(x):\n    time = x.shape[0]\n    return x\n") == []  # a local named time


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import time\ntime.perf_counter = lambda: 0\n", "assigns to time.perf_counter"),
        ("import time as t\nt.perf_counter_ns = lambda: 0\n", "assigns to t.perf_counter_ns"),
        ("import torch as T\nT.allclose = lambda *a, **k: True\n", "assigns to T.allclose"),
        ("import time\ntime = None\n", "rebinds 'time'"),
        ("from time import get_clock_info\n", "imports 'get_clock_info' from 'time'"),
        ("import gc\nobjects = gc.get_objects()\n", "uses gc.get_objects"),
        ("import gc as g\nr = g.get_referrers(1)\n", "uses gc.get_referrers"),
        ("from gc import get_referents\n", "imports 'get_referents' from 'gc'"),
        ("import importlib\n", "imports 'importlib'"),
        ("x = __import__('os')\n", "calls __import__()"),
        ("f = open('/tmp/x', 'w')\n", "calls open()"),
    ],
)
def test_static_check_still_bans_patching_introspection_io_and_dynamic_imports(source, reason):
    assert any(reason in r for r in _reasons(source)), _reasons(source)


def test_honest_sleeping_solution_passes_with_every_defence(rmsnorm):
    with SolExecBench(SolExecBenchConfig(**FAST)) as bench:
        result = bench.evaluate(rmsnorm, make_solution("rmsnorm", "sleepy", SLEEPY))
    assert result.statuses == ["PASSED"], result.traces[0].evaluation.log


def test_heap_introspection_is_caught_at_run_time_without_the_static_check(rmsnorm):
    with SolExecBench(SolExecBenchConfig(**FAST, static_check=False)) as bench:
        result = bench.evaluate(rmsnorm, red_team_solution("rmsnorm", "import_reference"))
    log = result.traces[0].evaluation.log
    assert result.statuses == ["REWARD_HACK"] and "heap introspection attempted (1x: gc.get_objects)" in log


# ---------------------------------------------------------------------------------------------------------
# (6) the scale-aware default tolerance
# ---------------------------------------------------------------------------------------------------------


def _softmax_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(16, n, generator=generator)
    other = torch.randn(16, n, generator=generator)
    return torch.softmax(x, -1), x, torch.softmax(other, -1)


def _passes(out: torch.Tensor, ref: torch.Tensor, tolerance: dict) -> bool:
    try:
        driver._compare(out, ref, tolerance, "probs")
    except driver.Incorrect:
        return False
    return True


@pytest.mark.parametrize("n", [64, 4096])
def test_default_tolerance_fails_stale_and_constant_softmax_at_any_size(n):
    ref, x, stale = _softmax_rows(n, seed=n)
    shifted = torch.exp(x - x.max(-1, keepdim=True).values)  # an honest kernel, another summation order
    honest = shifted / shifted.sum(-1, keepdim=True)
    constant = torch.full_like(ref, 1.0 / n)
    assert _passes(honest, ref, DEFAULT_TOLERANCE)
    assert _passes(ref.bfloat16().float(), ref, DEFAULT_TOLERANCE)  # bf16 rounding is within the rule
    assert not _passes(stale, ref, DEFAULT_TOLERANCE)
    assert not _passes(constant, ref, DEFAULT_TOLERANCE)
    if n == 4096:  # what the rule fixes: a fixed atol = 1e-2 passes both once values are below 1e-2
        element_rule_only = {**LEGACY_TOLERANCE, "max_norm_rtol": float("inf")}
        assert _passes(stale, ref, element_rule_only) and _passes(constant, ref, element_rule_only)
        # ... and the norm-wise precision check (issue #44) fails both even under the legacy tolerance
        assert not _passes(stale, ref, LEGACY_TOLERANCE) and not _passes(constant, ref, LEGACY_TOLERANCE)


def test_default_tolerance_scales_per_row_and_keeps_integers_exact():
    ref = torch.stack([torch.linspace(1, 2, 100), 1e-2 * torch.linspace(1, 2, 100)])
    small_row_wrong = ref.clone()
    small_row_wrong[1] = 1.5e-2  # wrong by up to 33% on the small row: within a fixed atol of 1e-2
    assert _passes(ref * (1 + 1e-4), ref, DEFAULT_TOLERANCE)
    assert not _passes(small_row_wrong, ref, DEFAULT_TOLERANCE)
    assert _passes(small_row_wrong, ref, LEGACY_TOLERANCE)
    ints = torch.arange(200)
    off = ints.clone()
    off[:3] += 1  # 1.5% of the elements off by one
    assert _passes(ints.clone(), ints, DEFAULT_TOLERANCE) and not _passes(off, ints, DEFAULT_TOLERANCE)
    scalar = torch.tensor(2.5)
    assert _passes(scalar * (1 + 1e-3), scalar, DEFAULT_TOLERANCE)
    assert not _passes(scalar * 1.1, scalar, DEFAULT_TOLERANCE)


STALE_SOFTMAX = """import torch

_FIRST = []


def run(scores, probs):
    if not _FIRST:  # keeps the first call's result and replays it for every later input
        _FIRST.append(torch.softmax(scores, dim=-1))
    probs.copy_(_FIRST[0])
"""


def test_stale_softmax_at_4096_columns_fails_under_the_default_tolerance():
    problem = load_problem_set(("softmax",))["softmax"]
    wide = problem.workloads[0].model_copy(update={"axes": {"rows": 8, "cols": 4096}, "tolerance": None})
    problem = dataclasses.replace(problem, workloads=[wide])
    config = SolExecBenchConfig(**FAST, static_check=False)
    with SolExecBench(config) as bench:
        assert bench._request(problem, None)["workloads"][0]["tolerance"]["rule"] == "scaled"
        result = bench.evaluate(problem, make_solution("softmax", "stale", STALE_SOFTMAX))
    log = result.traces[0].evaluation.log
    assert result.statuses == ["INCORRECT_NUMERICAL"] and "row-wise relative error" in log, log


# ---------------------------------------------------------------------------------------------------------
# (5) a private /tmp and HOME per evaluation
# ---------------------------------------------------------------------------------------------------------

PERSIST = """import os
import tempfile

import torch

HOME_MARK = os.path.join(os.environ["HOME"], "seb-TOKEN")
MARKS = ("/tmp/seb-persist-TOKEN", "/dev/shm/seb-persist-TOKEN", HOME_MARK)
SEEN = any(os.path.exists(path) for path in MARKS)  # left by an earlier evaluation


def run(x, norm_weight, eps, y):
    for path in MARKS + (os.path.join(tempfile.gettempdir(), "seb-t-TOKEN"),):
        with open(path, "w") as handle:
            handle.write("cached")
    if SEEN:  # a cheat would replay its cache here; this one answers wrongly so that the test sees it
        y.zero_()
        return
    torch.mul(x, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), out=y)
    y.mul_(norm_weight)
"""


def _persist_solution() -> tuple[object, str]:
    token = uuid.uuid4().hex
    return make_solution("rmsnorm", "persist", PERSIST.replace("TOKEN", token)), token


def test_private_tmp_keeps_files_from_the_host_and_from_the_next_evaluation(rmsnorm, monkeypatch):
    monkeypatch.delenv(PRIVATE_TMP_SWITCH, raising=False)  # the config's policy, whatever CI forces
    solution, token = _persist_solution()
    with SolExecBench(SolExecBenchConfig(**FAST, static_check=False)) as bench:
        first = bench.evaluate(rmsnorm, solution)
        second = bench.evaluate(rmsnorm, solution)
    sandbox = first.traces[0].evaluation.sandbox
    if sandbox.get("tmp") != "private-tmpfs":
        pytest.skip(f"the kernel refused a mount namespace here: {sandbox.get('tmp_refused')}")
    assert first.statuses == ["PASSED"] and second.statuses == ["PASSED"], second.traces[0].evaluation.log
    assert not os.path.exists(f"/tmp/seb-persist-{token}") and not os.path.exists(
        f"/dev/shm/seb-persist-{token}"
    )


def test_persistence_cheat_is_reward_hack_without_a_mount_namespace(rmsnorm, monkeypatch):
    monkeypatch.delenv(PRIVATE_TMP_SWITCH, raising=False)  # private_tmp=False decides, whatever CI forces
    solution, token = _persist_solution()
    with SolExecBench(SolExecBenchConfig(**FAST, static_check=False, private_tmp=False)) as bench:
        result = bench.evaluate(rmsnorm, solution)
    evaluation = result.traces[0].evaluation
    assert evaluation.sandbox["tmp"] == "staging-tmpdir+scan"
    assert result.statuses == ["REWARD_HACK"] and "files left outside the staging dir" in evaluation.log
    assert f"/tmp/seb-persist-{token}" in evaluation.log
    if os.geteuid() == 0:  # the child ran as the sandbox uid: its leftovers were removed from the host
        assert not os.path.exists(f"/tmp/seb-persist-{token}")


# ---------------------------------------------------------------------------------------------------------
# (7) the SOL floor widened by the calibration's measured noise
# ---------------------------------------------------------------------------------------------------------


def _spec_with_noise(noise: float) -> HardwareSpec:
    record = {"noise": noise, "trials": [{}, {}, {}], "timestamp": "2026-01-01T00:00:00+00:00"}
    return HardwareSpec("cpu-test", "cpu", True, "test", 20e9, 2**25, {"float32": 100e9}, calibration=record)


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_idea_sol_floor_flags_only_beyond_the_measured_noise(rmsnorm, monkeypatch, noise):
    """10% below T_SOL: inside a 20% noise band nothing happens; outside a zero one the solution is
    re-verified and the spec re-calibrated, and a re-verified time that still beats the floor is a flag on
    a PASS, never a REWARD_HACK on its own (issue #50)."""
    import neurips26.methods.solexecbench.harness as harness_module

    bench = SolExecBench(SolExecBenchConfig(**FAST), hardware=_spec_with_noise(noise))
    t_sol, _ = bench.sol_ms(rmsnorm, rmsnorm.workloads[0])
    latency = 0.9 * t_sol
    runs = []

    def fake_driver(problem, solution):
        runs.append(bench.config)
        return [
            {
                "uuid": rmsnorm.workloads[0].uuid,
                "status": "PASSED",
                "performance": {"latency_ms": latency, "reference_latency_ms": 10 * t_sol},
            }
        ]

    refreshed = []
    monkeypatch.setattr(
        harness_module, "refresh_calibration", lambda spec, why: refreshed.append(why) or spec
    )
    monkeypatch.setattr(bench, "run_driver", fake_driver)
    result = bench.evaluate(rmsnorm, make_solution("rmsnorm", "fast", SLEEPY))
    evaluation = result.traces[0].evaluation
    assert result.statuses == ["PASSED"], evaluation.log
    assert evaluation.sol["floor_tolerance"] == pytest.approx(noise)
    assert f"calibration noise {noise:.4g} of cpu-test (3 trials" in evaluation.sol["floor_tolerance_source"]
    if noise:  # inside the band: one run, no flag
        assert len(runs) == 1 and "floor" not in evaluation.sol and not refreshed
    else:  # re-verified with every timed output re-checked, the spec re-calibrated, then flagged
        assert len(runs) == 2 and runs[1].recheck_k == runs[1].min_reps == runs[1].max_reps
        assert "re-verified solution ran below the floor" in refreshed[0]
        assert (
            evaluation.sol["floor"]["reverified"] == "PASSED"
            and "ms < T_SOL" in evaluation.sol["floor"]["flag"]
        )
        assert evaluation.log.startswith("flag: below speed of light")
    unwidened = SolExecBench(
        SolExecBenchConfig(**FAST, sol_floor_noise=False), hardware=_spec_with_noise(noise)
    )
    assert unwidened.sol_floor_tolerance()[0] == 0.0


def test_the_experiment_calibrates_its_spec_in_process_once_per_worker():
    from neurips26.bench.setup import SetupStore
    from neurips26.methods.solexecbench.experiment import EXPERIMENT

    smoke = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(smoke, smoke.points()[0], {})
    store = SetupStore()
    try:
        first, _ = store.context_for(EXPERIMENT, config, smoke, 0)
        again, record = store.context_for(EXPERIMENT, config, smoke, 1)
        assert again.hardware is first.hardware and again.sandbox is first.sandbox
        assert record["hardware"]["reused"] and record["sandbox"]["reused"]
    finally:
        store.clear()  # closes the sandbox's driver


def test_the_experiment_calibrates_its_spec_in_process():
    from neurips26.methods.solexecbench.experiment import experiment_hardware

    spec = experiment_hardware(SolExecBenchConfig())
    assert spec.name == "cpu-local" and len(spec.calibration["trials"]) == DEFAULT_TRIALS and spec.noise >= 0
    assert experiment_hardware(SolExecBenchConfig(hardware="H200")) is None  # a named spec is loaded as is
    tolerance, source = SolExecBench(SolExecBenchConfig(), hardware=spec).sol_floor_tolerance()
    assert tolerance == spec.noise and f"{DEFAULT_TRIALS} trials at" in source
