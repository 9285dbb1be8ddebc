"""A speed-of-light floor calibrated on a loaded machine is not a floor (issue #50).

The sequence the issue met, constructed: a ``cpu-local`` calibration made under load (peaks far too low,
load average 10) is cached; later, on the machine as it is now, the four timing-dependent tests it broke
run again and pass — the loaded record is re-calibrated on load, and a floor an honest measurement beats
is re-calibrated and never turns an honest solution into a REWARD_HACK."""

from __future__ import annotations

import dataclasses

import pytest

import neurips26.methods.solar.hardware as hardware
from neurips26.methods.solar import HardwareSpec, load_hardware, save_hardware
from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, load_problem_set
from neurips26.methods.solexecbench.solutions import ladder_solution
from tests.methods.solexecbench import test_solexecbench as main_tests
from tests.methods.solexecbench import test_solexecbench_isolation as isolation_tests
from tests.methods.solexecbench import test_solexecbench_problems as problem_tests

LOADED_AT = "2026-12-04T20:33:33+00:00"


def _loaded_record(flagged: bool) -> dict:
    """What a calibration during the busy hour recorded: load 10 on every trial, a spread of 0.19."""
    trial = {"at_s": 0.0, "load_average": 10.2, "cpu_share": 0.2, "fp32_flops": 1e9, "bandwidth_Bps": 2e8}
    record = {"timestamp": LOADED_AT, "trials": [trial] * 3, "factor": 1.5, "noise": 0.1945}
    record["load_average"] = 10.2
    if flagged:  # a record written since issue #50 carries the verdict; an older one only its load
        record.update(loaded=True, load_reason="1-min load average 10.20 > limit 2")
    return record


def _low_spec(record: dict) -> HardwareSpec:
    """Peaks 1/50 of any machine this runs on: every honest time beats a floor built on them."""
    return HardwareSpec(
        "cpu-local", "cpu", True, "busy hour", 3e8, 2**25, {"float32": 1.5e9}, calibration=record
    )


@pytest.fixture
def calibrated_under_load(tmp_path, monkeypatch):
    """The cached cpu-local spec is the busy hour's; this process has not calibrated yet."""
    monkeypatch.setenv("NEURIPS26_SOLAR_HW", str(tmp_path))
    monkeypatch.setattr(hardware, "_PROCESS_SPECS", {})
    monkeypatch.setattr(hardware, "_LAST_REFRESH", {})
    monkeypatch.setattr(hardware, "_SUPERSEDED", {})
    save_hardware(_low_spec(_loaded_record(flagged=True)), tmp_path / "cpu-local.yaml")
    return tmp_path


@pytest.fixture(scope="module")
def rmsnorm():
    problem = load_problem_set(("rmsnorm",))["rmsnorm"]
    return dataclasses.replace(problem, workloads=problem.workloads[:1])


@pytest.mark.parametrize("flagged", [True, False])
def test_a_cached_calibration_made_under_load_is_recalibrated(tmp_path, monkeypatch, flagged):
    monkeypatch.setenv("NEURIPS26_SOLAR_HW", str(tmp_path))
    monkeypatch.setattr(hardware, "_PROCESS_SPECS", {})
    monkeypatch.setattr(hardware, "load_verdict", lambda records, limit: (False, "quiet (test)"))
    save_hardware(_low_spec(_loaded_record(flagged)), tmp_path / "cpu-local.yaml")
    spec = load_hardware("cpu-local")
    assert spec.calibration["previous"]["timestamp"] == LOADED_AT  # the busy hour's record was replaced
    assert "loaded machine" in spec.calibration["reason"] and spec.calibration["loaded"] is False
    assert spec.peak_flops["float32"] > 1.5e9 and spec.dram_bandwidth_Bps > 3e8
    assert load_hardware(tmp_path / "cpu-local.yaml").calibration["timestamp"] != LOADED_AT  # saved
    assert load_hardware("cpu-local") is spec  # once per process


def test_peaks_only_rise_when_calibrations_merge():
    low = _low_spec(_loaded_record(True))
    high = dataclasses.replace(low, peak_flops={"float32": 9e9, "float64": 1e9}, dram_bandwidth_Bps=1e8)
    merged = hardware.merge_calibrations(low, high, "test")
    assert merged.peak_flops == {"float32": 9e9, "float64": 1e9} and merged.dram_bandwidth_Bps == 3e8
    assert merged.calibration["reason"] == "test" and merged.calibration["previous"]["timestamp"] == LOADED_AT


def test_honest_ladder_after_a_loaded_calibration(calibrated_under_load, rmsnorm):
    with SolExecBench(SolExecBenchConfig(**main_tests.FAST)) as bench:
        main_tests.test_idea_honest_ladder_passes_with_bounded_monotone_scores(bench, rmsnorm)
        assert bench.hardware.calibration["timestamp"] != LOADED_AT


def test_solar_bound_after_a_loaded_calibration(calibrated_under_load):
    problem_tests.test_solar_bounds_the_problem_below_its_measured_time("scatter_add")


def test_fork_bomb_after_a_loaded_calibration(calibrated_under_load, rmsnorm):
    isolation_tests.test_fork_bomb_is_stopped_quickly(rmsnorm)


def test_readme_snippet_after_a_loaded_calibration(calibrated_under_load):
    main_tests.test_readme_snippet_runs()


def test_a_floor_the_reference_beats_is_recalibrated_not_a_verdict(calibrated_under_load, rmsnorm):
    """A spec that does not say it was loaded (peaks too low anyway): the reference, timed beside the
    solution, beats the floor, so the spec is re-calibrated — evidence against the floor, not the
    solution; the honest solution passes with a T_SOL below its time."""
    spec = _low_spec({**_loaded_record(True), "loaded": False})
    with SolExecBench(SolExecBenchConfig(**main_tests.FAST), hardware=spec) as bench:
        result = bench.evaluate(rmsnorm, ladder_solution("rmsnorm", "eager"))
        evaluation = result.traces[0].evaluation
        assert result.statuses == ["PASSED"], evaluation.log
        assert "reference (T_b) ran below the floor" in evaluation.sol["floor"]["recalibrated"]
        assert bench.hardware.peak_flops["float32"] > spec.peak_flops["float32"]
        assert result.scores[0].latency_ms >= result.scores[0].sol_ms
        # the next harness of this process starts from the re-calibrated spec
        assert SolExecBench(SolExecBenchConfig(**main_tests.FAST), hardware=spec).hardware is bench.hardware
