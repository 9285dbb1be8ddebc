import json
from dataclasses import replace

import pytest

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile
from neurips26.bench.results import ResultsFileError, read_cell, read_result
from neurips26.bench.runner import run_experiment
from neurips26.testing.toy_experiment import TOY_EXPERIMENT

REF = "neurips26.testing.toy_experiment:TOY_EXPERIMENT"


def test_run_writes_result_with_claims_and_cells(tmp_path) -> None:
    result = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="default")
    saved = read_result(tmp_path / "toy")
    assert saved["run_info"]["status"] == "ok"
    assert len(saved["cells"]) == 2 * 3 * 5
    assert {c["point"]["outlier_fraction"] for c in saved["cells"]} == {0.05, 0.2}
    check = {c["point"]["outlier_fraction"]: c for c in result["claims"][0]["checks"]}
    assert check[0.2]["reproduced"] == "true"  # the median clearly wins at 20% contamination
    assert len(list((tmp_path / "toy" / "cells").glob("*.json"))) == 30


def test_rerun_resumes_every_cell_with_identical_numbers(tmp_path) -> None:
    first = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    second = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert second["run_info"]["resumed_cells"] == 9
    assert first["systems"] == second["systems"]
    forced = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", force=True)
    assert forced["run_info"]["resumed_cells"] == 0


def test_interrupted_run_recomputes_only_missing_or_corrupt_cells(tmp_path) -> None:
    run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    cells = sorted((tmp_path / "toy" / "cells").glob("*.json"))
    cells[0].unlink()  # as if killed before this cell finished
    cells[1].write_text('{"schema": "neurips26.cell/1", "sys')  # a truncated file from a crash
    again = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert again["run_info"]["resumed_cells"] == 7
    assert read_cell(cells[1])["status"] == "ok"


def test_changed_config_invalidates_saved_cells(tmp_path) -> None:
    run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    again = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"n_samples": 50}
    )
    assert again["run_info"]["resumed_cells"] == 0


def test_a_failing_system_is_recorded_and_the_others_still_run(tmp_path) -> None:
    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"fail_system": "mean"}
    )
    assert result["run_info"]["status"] == "error"
    assert all("asked to fail" in e for e in result["run_info"]["errors"])
    ok = [c for c in result["cells"] if c["status"] == "ok"]
    assert {c["system"] for c in ok} == {"median", "trimmed"}
    assert result["claims"][0]["checks"][0]["best_baseline"] == "trimmed"


def test_not_applicable_cells_are_neither_errors_nor_compared(tmp_path) -> None:
    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"skip_system": "trimmed"}
    )
    assert result["run_info"]["status"] == "ok" and result["run_info"]["errors"] == []
    assert {c["status"] for c in result["cells"] if c["system"] == "trimmed"} == {"n/a"}
    assert result["claims"][0]["checks"][0]["best_baseline"] == "mean"
    again = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"skip_system": "trimmed"}
    )
    assert again["run_info"]["resumed_cells"] == 9


def test_parallel_jobs_give_the_numbers_of_one_process(tmp_path) -> None:
    one = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "one", profile="smoke")
    two = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "two", profile="smoke", jobs=2)
    assert one["systems"] == two["systems"]


def test_bad_arguments_fail_before_any_cell(tmp_path) -> None:
    with pytest.raises(ValueError, match="valid keys"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", overrides={"nope": 1})
    with pytest.raises(ValueError, match="outlier_fraction must lie"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", overrides={"outlier_fraction": 0.9})
    with pytest.raises(ValueError, match="unknown profile"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", profile="huge")
    with pytest.raises(ValueError, match="executor"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", executor="dask")
    with pytest.raises(ValueError, match="seeds"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", seeds=0)
    assert not (tmp_path / "t").exists()


def test_corrupt_and_foreign_result_files_get_clear_errors(tmp_path) -> None:
    (tmp_path / "r.json").write_text("{not json")
    with pytest.raises(ResultsFileError, match="not valid JSON"):
        read_result(tmp_path / "r.json")
    (tmp_path / "r.json").write_text(json.dumps({"schema": "other/1"}))
    with pytest.raises(ResultsFileError, match=r"expected a 'neurips26\.result/1' file"):
        read_result(tmp_path / "r.json")


def test_experiment_spec_validation() -> None:
    with pytest.raises(ValueError, match="not in metrics"):
        replace(TOY_EXPERIMENT, claims=(Claim("x", "nope", "median", ("mean",)),))
    with pytest.raises(ValueError, match="ours="):
        replace(TOY_EXPERIMENT, ours="nope")
    with pytest.raises(ValueError, match="must not contain ours"):
        Claim("x", "abs_error", "median", ("median",))
    with pytest.raises(ValueError, match="goal"):
        Metric("m", "up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget_s"):
        Profile("p", budget_s=0)
    with pytest.raises(ValueError, match="profile 'smoke' is required"):
        Experiment(
            "x",
            TOY_EXPERIMENT.config_cls,
            TOY_EXPERIMENT.claims,
            TOY_EXPERIMENT.metrics,
            TOY_EXPERIMENT.systems,
            {"default": Profile("default", 1)},
            TOY_EXPERIMENT.run,
            "median",
        )


def test_claim_where_restricts_the_verdict_to_listed_grid_points(tmp_path) -> None:
    claim = replace(TOY_EXPERIMENT.claims[0], where={"outlier_fraction": (0.2,)})
    experiment = replace(TOY_EXPERIMENT, claims=(claim,))
    result = run_experiment(experiment, REF, tmp_path / "toy", profile="default")
    checks = result["claims"][0]["checks"]
    assert [c["point"] for c in checks] == [{"outlier_fraction": 0.2}]
    assert result["claims"][0]["where"] == {"outlier_fraction": [0.2]}
    assert claim.covers({"outlier_fraction": 0.2}) and not claim.covers({"outlier_fraction": 0.05})
