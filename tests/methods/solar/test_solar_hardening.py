"""solar hardening (issue #33): calibration as data (repeated trials, maximum kept, noise and load recorded,
embedded in every cell), violations counted outside a measured noise band, tightness that never rewards a
violated bound."""

from __future__ import annotations

import argparse
import os
import statistics

import pytest
import torch

from neurips26.methods.solar import PEAK_FACTOR, HardwareSpec, calibrate, load_hardware
from neurips26.methods.solar import cli as solar_cli
from neurips26.methods.solar.config import SOLARAnalysisConfig, SOLARConfig
from neurips26.methods.solar.experiment import EXPERIMENT, suite_metrics
from neurips26.methods.solar.hardware import load_verdict, save_hardware
from neurips26.methods.solar.timing import noise_band

SMALL = dict(gemm_n=128, copy_bytes=4 * 2**20, reps=1)


def test_calibrate_keeps_the_maximum_and_records_trials_noise_and_load():
    spec = calibrate(trials=3, **SMALL)
    record = spec.calibration
    assert len(record["trials"]) == 3 and record["factor"] == PEAK_FACTOR
    assert record["timestamp"].endswith("+00:00") and record["load_average"] >= 0
    best_bandwidth = max(t["bandwidth_Bps"] for t in record["trials"])
    assert spec.dram_bandwidth_Bps == pytest.approx(PEAK_FACTOR * best_bandwidth)
    best_fp32 = max(t["fp32_flops"] for t in record["trials"])
    assert spec.peak_flops["float32"] >= PEAK_FACTOR * best_fp32 * (1 - 1e-12)
    for key in ("fp32_flops", "bandwidth_Bps"):
        values = [t[key] for t in record["trials"]]
        assert record["spread"][key] == pytest.approx((max(values) - statistics.median(values)) / max(values))
    assert spec.noise == max(record["spread"]["fp32_flops"], record["spread"]["bandwidth_Bps"]) >= 0


def test_calibration_trials_are_spread_over_time_and_judged_for_load():
    spec = calibrate(trials=3, spacing_s=0.2, **SMALL)
    record = spec.calibration
    starts = [t["at_s"] for t in record["trials"]]
    assert starts == sorted(starts) and record["spread_s"] == starts[-1] - starts[0] >= 0.4
    assert all(t["cpu_share"] > 0 for t in record["trials"]) and isinstance(record["loaded"], bool)
    assert record["load_limit"] == os.cpu_count() and record["load_reason"]
    quiet = [{"load_average": 0.5, "cpu_share": 0.98}] * 3
    assert load_verdict(quiet, 2.0)[0] is False
    busy = [{"load_average": 10.2, "cpu_share": 0.98}] * 3
    assert load_verdict(busy, 2.0) == (True, "1-min load average 10.20 > limit 2")
    starved = [{"load_average": 1.0, "cpu_share": 0.25}] * 3  # the load average lags; the CPU share does not
    assert load_verdict(starved, 2.0)[0] and "CPU-s per wall-s" in load_verdict(starved, 2.0)[1]
    with pytest.raises(ValueError, match="spacing_s"):
        calibrate(trials=1, spacing_s=-1.0)


def test_tests_never_use_a_calibration_from_the_users_home():
    """tests/conftest.py points solar's user hardware folder into a temporary folder of this process."""
    import tempfile
    from pathlib import Path

    from neurips26.methods.solar.hardware import user_hardware_dir

    assert user_hardware_dir().is_relative_to(tempfile.gettempdir())
    assert not user_hardware_dir().is_relative_to(Path.home() / ".cache")


def test_calibration_survives_yaml_and_datasheet_specs_have_no_noise(tmp_path):
    spec = calibrate(trials=2, factor=2.0, **SMALL)
    loaded = load_hardware(save_hardware(spec, tmp_path / "cpu-local.yaml"))
    assert loaded.calibration == spec.calibration and loaded.noise == spec.noise
    assert load_hardware("H200").noise == 0.0 and load_hardware("H200").calibration == {}
    with pytest.raises(ValueError, match="trials must be an integer >= 1"):
        calibrate(trials=0)
    with pytest.raises(ValueError, match="factor must be >= 1"):
        calibrate(factor=0.9)


@pytest.mark.parametrize("loaded", [False, True])
def test_cli_calibrate_shows_load_and_spread_and_refuses_a_loaded_machine(
    tmp_path, monkeypatch, capsys, loaded
):
    import dataclasses

    import neurips26.methods.solar.cli as module

    def measured(**kw):
        spec = calibrate(**{**kw, **SMALL})
        return dataclasses.replace(
            spec, calibration={**spec.calibration, "loaded": loaded, "load_reason": "x"}
        )

    monkeypatch.setattr(module, "calibrate", measured)
    parser = argparse.ArgumentParser()
    solar_cli.add_arguments(parser)
    out = tmp_path / "spec.yaml"
    args = parser.parse_args(["calibrate", "--trials", "2", "--spacing", "0.1", "--out", str(out)])
    code = solar_cli.main(args)
    shown = capsys.readouterr()
    assert "2 trials over" in shown.out and "trial 1: t=" in shown.out and "CPU share" in shown.out
    assert "spread (max - median) / max" in shown.out and "load: " in shown.out
    if loaded:  # refused: nothing written, and the message says what to do
        assert code == 2 and not out.exists() and "--allow-load" in shown.err
        args = parser.parse_args(["calibrate", "--trials", "2", "--out", str(out), "--allow-load"])
        assert solar_cli.main(args) == 0 and load_hardware(out).calibration["loaded"]
    else:
        assert code == 0 and len(load_hardware(out).calibration["trials"]) == 2


def test_noise_band_is_the_relative_iqr():
    assert noise_band([1.0, 1.0, 1.0]) == 0.0  # too few runs to measure a spread
    samples = [1.0, 1.1, 0.9, 1.0, 1.2, 0.8, 1.0, 1.05]
    q1, _, q3 = statistics.quantiles(samples, n=4)
    assert noise_band(samples) == pytest.approx((q3 - q1) / statistics.median(samples))


def _row(bound: float, cold: float, noise: float) -> dict:
    return {
        "program": "p",
        "flops": 2,
        "hand_flops": 2,
        "bound": bound,
        "cold": cold,
        "warm": cold,
        "noise": noise,
        "violated_raw": cold < bound,
        "violated": cold * (1 + noise) < bound,
        "validated": True,
        "seconds": 0.0,
        "gaps": [],
        "ratio_flop_only": bound / cold,
        "ratio_fused": bound / cold,
        "ratio_cache_aware": bound / cold,
    }


def test_violations_count_outside_the_band_and_never_count_as_tighter():
    spec = HardwareSpec("x", "cpu", True, "test", 1e9, 2**20, {"float32": 1e9}, calibration={"noise": 0.05})
    inside = _row(bound=1.04, cold=1.0, noise=0.1)  # below the bound by 4%, inside a 10% band
    outside = _row(bound=3.0, cold=1.0, noise=0.1)  # a bound 3x the measured time
    honest = _row(bound=0.5, cold=1.0, noise=0.1)
    metrics = suite_metrics([inside, outside, honest], spec)
    assert metrics["violations_raw"] == 2 and metrics["violations"] == 1
    assert metrics["valid_fraction"] == pytest.approx(2 / 3)
    # the violated bound counts 0 (not 3), the one inside the band at most 1: median of (1, 0, 0.5)
    assert metrics["median_valid_tightness"] == pytest.approx(0.5)
    assert metrics["median_bound_over_measured"] == pytest.approx(1.04)  # the raw ratio rewards violations
    assert metrics["spec_noise"] == 0.05


def test_tightness_claim_includes_the_naive_roofline():
    claim = next(c for c in EXPERIMENT.claims if c.metric == "median_valid_tightness")
    assert "naive_roofline" in claim.versus and "flopcounter_meta" in claim.versus


def test_default_profile_draws_verdicts_on_five_seeds():
    assert EXPERIMENT.profile("default").seeds >= 5


def test_cells_carry_the_spec_they_used():
    from neurips26.bench.experiment import SilentProgress
    from neurips26.bench.setup import build_context

    torch.manual_seed(0)
    config = SOLARConfig(SOLARAnalysisConfig(calibration_trials=2), programs=("add",), reps=4)
    smoke = EXPERIMENT.profile("smoke")
    context = build_context(EXPERIMENT, config, smoke, 0)  # the spec is calibrated once, in setup
    metrics = EXPERIMENT.run(EXPERIMENT.systems["solar"](config), config, context, smoke, 0, SilentProgress())
    spec = context.spec
    assert metrics["spec_fp32_gflops"] == pytest.approx(spec.peak_flops["float32"] / 1e9)
    assert metrics["spec_bandwidth_gbps"] == pytest.approx(spec.dram_bandwidth_Bps / 1e9)
    assert metrics["spec_noise"] == spec.noise and len(spec.calibration["trials"]) == 2


# ---------------------------------------------------------------------------------------------------------
# (1) exact and conventional counts
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["conv2d_padded", "sdpa_causal", "gqa_causal", "gemm_skinny"])
def test_conventional_count_agrees_with_flop_counter_mode(name):
    from neurips26.methods.solar.baselines import flop_counter_flops
    from neurips26.methods.solar.core import analyze
    from neurips26.methods.solar.suite import get_program

    program = get_program(name)
    report = analyze(*program.build("cpu"), hw="H200", validate=False)
    assert report.flops == 2 * program.hand_macs  # the exact count the bounds use
    assert report.flops_conventional == flop_counter_flops(*program.build("cpu"), "meta")
    if name != "gemm_skinny":  # padded taps / the masked triangle: the conventional count is larger
        assert report.flops_conventional > report.flops
    record = report.to_dict()
    assert record["flops_conventional"] == report.flops_conventional and record["flops"] == report.flops


def test_jax_conv_conventional_count_includes_padding_taps():
    pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    from neurips26.methods.solar.core import analyze

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME")

    x, w = jnp.ones((2, 3, 8, 8)), jnp.ones((4, 3, 3, 3))
    report = analyze(conv, [x, w], hw="H200", validate=False)
    assert sum(report.macs_conventional.values()) == 2 * 4 * 3 * 8 * 8 * 3 * 3  # every tap
    assert sum(report.macs.values()) == 2 * 4 * 3 * (3 * 8 - 2) ** 2  # taps inside the 8x8 input per axis


# ---------------------------------------------------------------------------------------------------------
# (2) loops checked independently: one validated iteration, trips executed by a counter
# ---------------------------------------------------------------------------------------------------------


def _jax_program(name):
    from neurips26.methods.solar.suite.jax_programs import programs

    return next(e for e in programs() if e["name"] == name)


@pytest.mark.parametrize("name", ["jax_scan_rnn", "jax_while_solver", "jax_cnn"])
def test_jax_loops_and_convolutions_are_checked_independently(name):
    pytest.importorskip("jax")
    from neurips26.methods.solar.core import analyze
    from neurips26.methods.solar.validation import MIN_CHECKED_SHARE

    entry = _jax_program(name)
    report = analyze(entry["fn"], entry["inputs"](), hw="H200")
    assert report.validated and report.validation.checked_mac_fraction >= MIN_CHECKED_SHARE
    for loop in report.validation.loop_checks:
        assert loop["ok"] and loop["trips_used"] == loop["trips_counted"] > 1
        assert loop["body_checked"] == loop["body_macs"] > 0


def test_a_wrong_trip_count_is_caught_and_not_validated():
    pytest.importorskip("jax")
    from neurips26.methods.solar.frontend_jax import trace_jax
    from neurips26.methods.solar.validation_jax import validate_jax

    entry = _jax_program("jax_scan_rnn")
    inputs = entry["inputs"]()
    trace = trace_jax(entry["fn"], inputs)
    assert trace.loops == [("scan", 16)]
    trace.loops[0] = ("scan", 1)  # what XLA's cost_analysis does: the body counted once
    validation = validate_jax(entry["fn"], inputs, trace)
    assert not validation.validated and validation.checked_mac_fraction == 0.0
    assert "trip count 1 used, 16 executed" in validation.reason


def test_a_while_loop_inside_a_scan_is_not_validated_when_its_trips_are_unknown():
    pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    from neurips26.methods.solar.core import analyze

    def nested(a, x):
        def step(c, _):
            inner = lax.while_loop(lambda s: s[1] < 3, lambda s: (jnp.tanh(s[0] @ a), s[1] + 1), (c, 0))
            return inner[0], None

        return lax.scan(step, x, None, length=4)[0]

    a, x = jnp.ones((8, 8)) * 0.1, jnp.ones((2, 8))
    report = analyze(nested, [a, x], hw="H200")
    assert "trip-unknown" in report.frontend  # the count saw no values inside the scan: one trip
    assert not report.validated and "needs 95%" in report.validation.reason
    inner = [r for r in report.validation.loop_checks if r["loop"] == "while"]
    assert inner and inner[0]["trips_used"] == 1 and inner[0]["trips_counted"] == 3 and not inner[0]["ok"]


def test_a_violation_audit_carries_the_spec_it_was_checked_against():
    from neurips26.methods.solar.core import analyze, check

    spec = calibrate(trials=2, **SMALL)
    report = analyze(lambda a, b: a @ b, [torch.randn(64, 64), torch.randn(64, 64)], hw=spec, validate=False)
    audit = check(report, report.bounds.fused / 2)
    assert not audit.ok and audit.hardware["calibration"]["trials"] == spec.calibration["trials"]
