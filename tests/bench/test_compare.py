"""`report --compare`: non-timing values compared exactly, environments warned about; `--strict` modes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from neurips26.bench.compare import compare_results, result_files
from neurips26.bench.runner import run_experiment
from neurips26.cli import EXIT_METHOD_ERROR, EXIT_OK, main, parse_args, strict_passes
from neurips26.testing.toy_experiment import TOY_EXPERIMENT

REF = "neurips26.testing.toy_experiment:TOY_EXPERIMENT"


@pytest.fixture(scope="module")
def toy_result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_experiment(TOY_EXPERIMENT, REF, tmp_path_factory.mktemp("toy") / "toy", profile="smoke")


def _with_value(result: dict, metric: str, value: float) -> dict:
    changed = copy.deepcopy(result)
    changed["cells"][3]["metrics"][metric] = value
    return changed


def test_two_runs_of_the_same_code_are_identical_and_an_edit_is_found(
    toy_result: dict, tmp_path: Path
) -> None:
    again = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "again", profile="smoke", force=True)
    same = compare_results(toy_result, again)
    assert same.identical and same.compared == 20 * 2 and same.environment == []
    edited = compare_results(toy_result, _with_value(again, "abs_error", 99.0))
    assert not edited.identical and len(edited.differing) == 1
    assert "abs_error" in edited.differing[0] and "99.0" in edited.differing[0]


def test_timing_metrics_are_left_out(toy_result: dict) -> None:
    slower = _with_value(toy_result, "n", 12345.0)
    assert not compare_results(toy_result, slower).identical
    assert compare_results(toy_result, slower, timing=["n"]).identical  # the experiment declares it
    marked = copy.deepcopy(slower)
    marked["metrics"][1]["timing"] = True  # or the file marks it
    comparison = compare_results(toy_result, marked)
    assert comparison.identical and comparison.timing == ["n"] and comparison.compared == 20


def test_different_numeric_environments_are_compared_with_a_warning(toy_result: dict) -> None:
    other = copy.deepcopy(toy_result)
    other["run_info"]["numeric"]["threads"] = 2
    comparison = compare_results(toy_result, other)
    assert comparison.identical and comparison.environment == ["threads: 1 vs 2"]
    assert any("warning: numeric environments differ: threads" in line for line in comparison.lines())
    older = copy.deepcopy(toy_result)  # a result published before run_info.numeric existed
    del older["run_info"]["numeric"]
    warned = compare_results(older, toy_result).environment
    assert any(line.startswith("threads: 'not recorded' vs 1") for line in warned)


def test_results_of_two_methods_are_not_compared(toy_result: dict) -> None:
    other = copy.deepcopy(toy_result)
    other["run_info"]["slug"] = "other"
    with pytest.raises(ValueError, match="different methods"):
        compare_results(toy_result, other)


def test_cli_compares_a_run_folder_with_committed_style_results(
    toy_result: dict, tmp_path: Path, capsys
) -> None:
    run_dir, published = tmp_path / "runs", tmp_path / "results"
    (run_dir / "toy").mkdir(parents=True)
    (run_dir / "toy" / "result.json").write_text(json.dumps(toy_result))
    (published / "toy").mkdir(parents=True)
    (published / "toy" / "smoke.json").write_text(json.dumps(toy_result))
    assert set(result_files(published, "smoke")) == {"toy"}
    assert main(["report", "--compare", str(run_dir), str(published), "--profile", "smoke"]) == EXIT_OK
    assert "toy: identical (40 non-timing values compared)" in capsys.readouterr().out
    (published / "toy" / "smoke.json").write_text(json.dumps(_with_value(toy_result, "abs_error", 99.0)))
    assert (
        main(["report", "--compare", str(run_dir), str(published), "--profile", "smoke"]) == EXIT_METHOD_ERROR
    )
    assert "toy: 1 value(s) differ" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("verdict", "refuted", "all_"),
    [("true", True, True), ("false", False, False), ("inconclusive", True, False), ("vacuous", True, False)],
)
def test_strict_modes(verdict: str, refuted: bool, all_: bool) -> None:
    assert strict_passes(verdict, None)
    assert strict_passes(verdict, "refuted") is refuted
    assert strict_passes(verdict, "all") is all_


def test_a_bare_strict_keeps_its_meaning_and_never_eats_the_slug() -> None:
    assert parse_args(["run", "--strict", "samhybrid"]).strict == "refuted"
    args = parse_args(["run", "samhybrid", "--strict=all"])
    assert args.strict == "all" and args.methods == ["samhybrid"]
    assert parse_args(["run", "samhybrid"]).strict is None
    with pytest.raises(SystemExit):
        parse_args(["run", "--strict=some"])
