"""SOLAR's JAX library baselines (XLA cost_analysis, jax.experimental.roofline) and the JAX suite cells."""

from __future__ import annotations

import math

import pytest

from neurips26.bench.experiment import NotApplicable, SilentProgress
from neurips26.methods.solar.config import SOLARConfig
from neurips26.methods.solar.experiment import EXPERIMENT

jax = pytest.importorskip("jax")
pytest.importorskip("absl")


def _program(name: str) -> dict:
    from neurips26.methods.solar.suite.jax_programs import programs

    return next(e for e in programs() if e["name"] == name)


def test_jax_roofline_counts_matmuls_and_its_gaps_are_named() -> None:
    from neurips26.methods.solar.baselines import jax_roofline

    mlp = _program("jax_mlp")
    counted = jax_roofline(mlp["fn"], mlp["inputs"]())
    assert counted.flops == 2 * mlp["macs"] and counted.gaps == []  # dot_general only: exact
    rnn = _program("jax_scan_rnn")
    counted = jax_roofline(rnn["fn"], rnn["inputs"]())
    assert counted.flops == 2 * rnn["macs"] // 16  # the scan body once, not x16
    assert counted.gaps == ["scan body counted once (length 16)"]
    solver = _program("jax_while_solver")
    counted = jax_roofline(solver["fn"], solver["inputs"]())
    assert counted.flops == 0 and "while_loop counted as zero" in counted.gaps[0]
    cnn = _program("jax_cnn")
    counted = jax_roofline(cnn["fn"], cnn["inputs"]())
    assert counted.flops == 0 and counted.extra["unfused_flops"] >= 2 * cnn["macs"]
    assert any("conv_general_dilated" in gap for gap in counted.gaps)


def test_xla_cost_analysis_counts_loop_bodies_once() -> None:
    from neurips26.methods.solar.baselines import xla_cost_analysis

    rnn = _program("jax_scan_rnn")
    counted = xla_cost_analysis(rnn["fn"], rnn["inputs"]())
    assert 0 < counted.flops < 2 * rnn["macs"] / 5 and counted.bytes > 0
    assert counted.gaps == ["scan body counted once (length 16)"]


def test_jax_suite_cells_and_not_applicable_baselines() -> None:
    config = SOLARConfig(suite="jax", jax_programs=("jax_scan_rnn",), reps=1)
    profile = EXPERIMENT.profile("smoke")
    ours = EXPERIMENT.run_cell(EXPERIMENT.systems["solar"](config), config, profile, 0, SilentProgress())
    library = EXPERIMENT.run_cell(
        EXPERIMENT.systems["jax_roofline"](config), config, profile, 0, SilentProgress()
    )
    assert {m.name for m in EXPERIMENT.metrics} == set(ours) == set(library)
    assert all(math.isfinite(v) for v in [*ours.values(), *library.values()])
    assert ours["coverage"] == ours["count_agreement"] == ours["validated_fraction"] == 1.0
    assert ours["violations"] <= ours["violations_raw"]  # load-dependent: reported, not asserted
    assert library["coverage"] == 0.0  # the scan body counted once
    with pytest.raises(NotApplicable, match="torch programs only"):
        EXPERIMENT.run_cell(
            EXPERIMENT.systems["flopcounter_meta"](config), config, profile, 0, SilentProgress()
        )
    torch_config = SOLARConfig(programs=("add",), reps=1)
    with pytest.raises(NotApplicable, match="jax programs only"):
        EXPERIMENT.run_cell(
            EXPERIMENT.systems["xla_cost_analysis"](torch_config), torch_config, profile, 0, None
        )


def test_config_rejects_unknown_suite_and_programs() -> None:
    with pytest.raises(ValueError, match="suite must be 'torch', 'jax' or 'real_lm'"):
        SOLARConfig(suite="tf")
    with pytest.raises(ValueError, match="jax_programs=\\['jax_nope'\\]"):
        SOLARConfig(jax_programs=("jax_nope",))


def test_loop_trips_are_the_idea_that_covers_jax_loops() -> None:
    """Switching loop trips off (the loop-blind control) must lose the MACs of scan and while bodies."""
    from neurips26.methods.solar.core import analyze

    for name, trips in (("jax_scan_rnn", 16), ("jax_while_solver", None)):
        program = _program(name)
        inputs = program["inputs"]()
        full = sum(analyze(program["fn"], inputs, hw="H100-SXM", validate=False).macs.values())
        blind = analyze(program["fn"], inputs, hw="H100-SXM", validate=False, loop_trips=False)
        assert full == program["macs"]
        assert sum(blind.macs.values()) < full
        if trips:
            assert sum(blind.macs.values()) * trips == full  # the body once instead of 16 times


def test_overclaimed_control_is_caught_as_violated_and_never_tighter() -> None:
    config = SOLARConfig(suite="jax", jax_programs=("jax_mlp", "jax_scan_rnn"), reps=1, control_overclaim=1e6)
    profile = EXPERIMENT.profile("smoke")
    over = EXPERIMENT.run_cell(
        EXPERIMENT.systems["overclaimed_bound"](config), config, profile, 0, SilentProgress()
    )
    assert over["violations"] == 2.0 and over["valid_fraction"] == 0.0
    assert over["median_valid_tightness"] == 0.0  # violated bounds count 0, however large
    with pytest.raises(ValueError, match="control_overclaim must be > 1"):
        SOLARConfig(control_overclaim=1.0)
