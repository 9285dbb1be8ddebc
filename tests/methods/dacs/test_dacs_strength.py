"""DACS: the accuracy-vs-shift-strength profile and its figure (computed from a result JSON alone)."""

from __future__ import annotations

import math

import pytest

from neurips26.methods.dacs.experiment import EXPERIMENT, STRENGTH_GRID
from neurips26.methods.dacs.figures import cell_values, gain_growth, paired_gain, strength_figure


def _result(gains: dict[float, float], seeds: int = 5) -> dict:
    """A result whose DACS beats DANN-GCN by ``gains[structure] + 0.01 * seed`` at every feature level."""
    cells = []
    for feature in (0.0, 1.0):
        for structure, gain in gains.items():
            for seed in range(seeds):
                base = 0.7 + 0.02 * seed - 0.05 * feature
                for system, value in (("dacs", base + gain + 0.01 * seed), ("dann_gcn", base)):
                    cells.append(
                        {
                            "system": system,
                            "point": {"feature_shift": feature, "structure_shift": structure},
                            "seed": seed,
                            "status": "ok",
                            "metrics": {"target_accuracy": value},
                        }
                    )
    cells.append({**cells[0], "status": "error", "metrics": {"target_accuracy": 0.0}})  # skipped
    return {
        "run_info": {"ours": "dacs", "slug": "dacs"},
        "systems": {"dacs": {}, "dann_gcn": {}},
        "cells": cells,
    }


def test_strength_profile_sweeps_each_knob_with_the_other_at_its_default():
    profile = EXPERIMENT.profile("strength")
    config = EXPERIMENT.config_for(profile, profile.points()[0], {})
    assert config.setting == "coupled" and profile.seeds >= 5
    defaults = EXPERIMENT.config_cls()
    assert defaults.feature_shift in STRENGTH_GRID["feature_shift"]
    assert defaults.structure_shift in STRENGTH_GRID["structure_shift"]
    assert 0.0 in STRENGTH_GRID["feature_shift"] and 0.0 in STRENGTH_GRID["structure_shift"]
    # each grid value really reaches the generator (the coupled setting keeps both knobs on)
    spec = EXPERIMENT.config_for(profile, {"feature_shift": 0.5, "structure_shift": 0.3}, {}).shift_spec()
    assert (spec.feature_shift, spec.structure_shift) == (0.5, 0.3)
    strong = [c for c in EXPERIMENT.claims if c.profiles == ("strength",)]
    assert len(strong) == 1 and strong[0].controls
    covered = {p["structure_shift"] for p in profile.points() if strong[0].covers(p)}
    assert covered == {0.6, 0.9}
    assert not strong[0].judged_in("default")
    for claim in EXPERIMENT.claims:  # the setting-based claims are not judged on this grid
        if claim is not strong[0]:
            assert not any(claim.covers(p) for p in profile.points())
            assert not claim.judged_in("strength") and claim.judged_in("default")


def test_paired_gain_and_its_growth_match_a_hand_computation():
    values = cell_values(_result({0.0: 0.0, 0.9: 0.1}))
    gain = paired_gain(values, "dacs", "dann_gcn", 1.0, 0.9)
    assert gain.n == 5 and gain.mean == pytest.approx(0.12)  # 0.1 + 0.01 * mean(0..4)
    sd = math.sqrt(sum((0.01 * (s - 2)) ** 2 for s in range(5)) / 4)
    half = 2.7764451051977987 * sd / math.sqrt(5)  # t_{0.975, 4}
    assert (gain.low, gain.high) == (pytest.approx(0.12 - half), pytest.approx(0.12 + half))
    growth = gain_growth(values, "dacs", "dann_gcn", 0.0, 0.0, 0.9)
    assert growth.mean == pytest.approx(0.1) and growth.high - growth.low == pytest.approx(0.0, abs=1e-9)
    flat = gain_growth(cell_values(_result({0.0: 0.05, 0.9: 0.05})), "dacs", "dann_gcn", 0.0, 0.0, 0.9)
    assert flat.mean == pytest.approx(0.0, abs=1e-12)


def test_strength_figure_writes_a_png_and_rejects_bad_input(tmp_path):
    result = _result({0.0: 0.0, 0.45: 0.05, 0.9: 0.1})
    path = strength_figure(
        result, tmp_path / "f.png", fixed_feature=1.0, fixed_structure=0.9, versus=("dann_gcn",)
    )
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="fixed_structure"):
        strength_figure(result, tmp_path / "g.png", fixed_structure=0.6, versus=("dann_gcn",))
    with pytest.raises(ValueError, match="structure_shift"):
        cell_values({"cells": [{"system": "dacs", "point": {"setting": "fs"}, "seed": 0, "status": "ok"}]})
    with pytest.raises(ValueError, match="cells"):
        cell_values({})


def test_the_diagnoser_is_scored_against_the_knobs_not_the_setting_name():
    from neurips26.methods.dacs.experiment import SETTINGS, SHIFT_TRUTH, shift_truth

    profile = EXPERIMENT.profile("strength")
    for setting in SETTINGS:  # at the published knobs: the per-setting table
        config = EXPERIMENT.config_for(profile, {"setting": setting}, {})
        assert shift_truth(config) == SHIFT_TRUTH.get(setting)
    for knobs, truth in (
        ({"feature_shift": 0.0, "structure_shift": 0.0}, (False, False)),
        ({"feature_shift": 0.0, "structure_shift": 0.3}, (False, True)),
        ({"feature_shift": 1.5, "structure_shift": 0.0}, (True, False)),
        ({"feature_shift": 0.5, "structure_shift": 0.6}, (True, True)),
    ):
        assert shift_truth(EXPERIMENT.config_for(profile, knobs, {})) == truth  # setting "coupled"
    digits = EXPERIMENT.config_for(profile, {"setting": "digits", "structure_shift": 0.0}, {})
    assert shift_truth(digits) == (True, False)


def test_strength_analysis_tables_the_paired_gains_and_draws_the_figure(tmp_path):
    from neurips26.methods.dacs.figures import strength_analysis

    assert EXPERIMENT.analyses["strength"] is strength_analysis
    analysis = strength_analysis(_result({0.0: 0.0, 0.9: 0.1}), versus=("dann_gcn",))
    rows = [line for line in analysis.markdown.splitlines() if line.startswith("| 0 |")]
    # feature level 0: gain 0.02 at structure 0 (the seed term), 0.12 at 0.9, growth exactly 0.1
    assert rows == ["| 0 | +0.020 [+0.000, +0.040] | +0.120 [+0.100, +0.140] | +0.100 [+0.100, +0.100] |"]
    analysis.figure(tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
