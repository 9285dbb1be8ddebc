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
    assert len(saved["cells"]) == 2 * 4 * 5
    assert {c["point"]["outlier_fraction"] for c in saved["cells"]} == {0.05, 0.2}
    check = {c["point"]["outlier_fraction"]: c for c in result["claims"][0]["checks"]}
    assert check[0.2]["reproduced"] == "true"  # the median clearly wins at 20% contamination
    assert len(list((tmp_path / "toy" / "cells").glob("*.json"))) == 40


def test_rerun_resumes_every_cell_with_identical_numbers(tmp_path) -> None:
    first = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    second = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert second["run_info"]["resumed_cells"] == 20
    assert first["systems"] == second["systems"]
    forced = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", force=True)
    assert forced["run_info"]["resumed_cells"] == 0


def test_interrupted_run_recomputes_only_missing_or_corrupt_cells(tmp_path) -> None:
    run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    cells = sorted((tmp_path / "toy" / "cells").glob("*.json"))
    cells[0].unlink()  # as if killed before this cell finished
    cells[1].write_text('{"schema": "neurips26.cell/1", "sys')  # a truncated file from a crash
    again = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert again["run_info"]["resumed_cells"] == 18
    assert read_cell(cells[1])["status"] == "ok"


def test_changed_config_invalidates_saved_cells(tmp_path) -> None:
    run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    again = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"n_samples": 50}
    )
    assert again["run_info"]["resumed_cells"] == 0


def test_changed_code_invalidates_saved_cells(tmp_path, monkeypatch) -> None:
    from neurips26.bench import runner

    first = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert first["run_info"]["code_fingerprint"] == runner.code_fingerprint(REF)
    monkeypatch.setattr(runner, "code_fingerprint", lambda ref: "edited-code")
    again = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert again["run_info"]["resumed_cells"] == 0
    assert {c["code_fingerprint"] for c in again["cells"]} == {"edited-code"}


def test_a_failing_system_is_recorded_and_the_others_still_run(tmp_path) -> None:
    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"fail_system": "mean"}
    )
    assert result["run_info"]["status"] == "error"
    assert all("asked to fail" in e for e in result["run_info"]["errors"])
    ok = [c for c in result["cells"] if c["status"] == "ok"]
    assert {c["system"] for c in ok} == {"median", "trimmed", "zero"}
    # never judged against the weaker baseline that is left: the claim says what is missing
    claim = result["claims"][0]
    assert claim["reproduced"] == "inconclusive" and claim["reason"] == "missing mean"


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
    assert again["run_info"]["resumed_cells"] == 20


def test_bad_arguments_fail_before_any_cell(tmp_path) -> None:
    with pytest.raises(ValueError, match="valid keys"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", overrides={"nope": 1})
    with pytest.raises(ValueError, match="outlier_fraction must lie"):
        run_experiment(
            TOY_EXPERIMENT, REF, tmp_path / "t", profile="smoke", overrides={"outlier_fraction": 0.9}
        )
    with pytest.raises(
        ValueError, match=r"swept by profile 'default'.s grid \(outlier_fraction=\[0.05, 0.2\]\)"
    ):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "t", overrides={"outlier_fraction": 0.1})
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


def test_claim_profiles_judge_the_claim_only_in_the_named_profiles(tmp_path) -> None:
    scoped = replace(TOY_EXPERIMENT.claims[0], text="only in smoke", profiles=("smoke",))
    experiment = replace(TOY_EXPERIMENT, claims=(TOY_EXPERIMENT.claims[0], scoped))
    smoke = run_experiment(experiment, REF, tmp_path / "smoke", profile="smoke")
    default = run_experiment(experiment, REF, tmp_path / "default", profile="default")
    assert [c["text"] for c in smoke["claims"]][-1] == "only in smoke"
    assert "only in smoke" not in [c["text"] for c in default["claims"]] and len(default["claims"]) == 1
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        replace(TOY_EXPERIMENT, claims=(replace(scoped, profiles=("nope",)),))


def test_a_nan_on_a_claimed_metric_is_a_visible_failure(tmp_path) -> None:
    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"nan_system": "median"}
    )
    nan_cells = [c for c in result["cells"] if c["status"] == "nan"]
    assert {c["system"] for c in nan_cells} == {"median"} and len(nan_cells) == 5
    assert result["run_info"]["cell_status"]["nan"] == 5 and result["run_info"]["status"] == "error"
    assert result["claims"][0]["reason"] == "missing median"


def test_a_control_that_passes_makes_the_claim_vacuous(tmp_path) -> None:
    result = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    controlled = result["claims"][1]
    assert controlled["checks"][0]["ours_mean"] < controlled["checks"][0]["baseline_mean"]  # ours did win
    assert controlled["reproduced"] == "vacuous" and "zero" in controlled["reason"]
    assert controlled["checks"][0]["controls"] == {"zero": "true"}


def test_dotted_overrides_reach_the_nested_method_config(tmp_path) -> None:
    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", overrides={"method.trim_quantile": 0.0}
    )
    assert result["run_info"]["config"]["method"] == {"trim_quantile": 0.0}
    trimmed = result["systems"]["trimmed"]["points"][0]["values"]["abs_error"]
    mean = result["systems"]["mean"]["points"][0]["values"]["abs_error"]
    assert trimmed == pytest.approx(mean)  # trimming nothing is the plain mean: the factory used the config
    with pytest.raises(ValueError, match=r"valid keys: .*method\.trim_quantile"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "bad", profile="smoke", overrides={"method.nope": 1})


def test_each_cell_records_its_device_and_the_run_its_command(tmp_path) -> None:
    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", device="cuda", command="neurips26 run toy"
    )
    # the toy declares devices=("cpu",): asked for CUDA, its cells say where they really ran
    assert {c["device"] for c in result["cells"]} == {"cpu"}
    assert result["run_info"]["command"] == "neurips26 run toy"


def test_heartbeat_prints_progress_lines(tmp_path, capsys) -> None:
    from neurips26.bench.progress import Heartbeat

    with Heartbeat("toy", total=4, budget_s=10, every_s=0.01) as beat:
        beat.done = 1
        import time

        time.sleep(0.05)
    out = capsys.readouterr().out
    assert "toy: 1/4 cells" in out and "ETA" in out


def test_rejudge_redraws_verdicts_from_stored_cells_and_refuses_stale_ones(tmp_path) -> None:
    import dataclasses

    from neurips26.bench.runner import rejudge

    result = run_experiment(
        TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", command="neurips26 run toy"
    )
    first = result["claims"][0]
    assert first["controls"] == []
    with_control = dataclasses.replace(
        TOY_EXPERIMENT, claims=(dataclasses.replace(TOY_EXPERIMENT.claims[0], controls=("zero",)),)
    )
    again = rejudge(with_control, result)
    assert again["claims"][0]["controls"] == ["zero"]
    assert again["cells"] == result["cells"] and again["run_info"]["command"] == "neurips26 run toy"
    assert again["run_info"]["rejudged"]["reason"].startswith("claims re-drawn")
    assert [c["ours_mean"] for c in again["claims"][0]["checks"]] == [c["ours_mean"] for c in first["checks"]]
    tampered = {**result, "cells": [{**c, "config_hash": "0" * 16} for c in result["cells"]]}
    with pytest.raises(ValueError, match="rerun the profile"):
        rejudge(TOY_EXPERIMENT, tampered)
    without_zero = {**result, "cells": [c for c in result["cells"] if c["system"] != "zero"]}
    with pytest.raises(ValueError, match="no stored cells for \\['zero'\\]"):
        rejudge(with_control, without_zero)


def test_cells_store_non_numeric_details_beside_their_metrics(tmp_path) -> None:
    from neurips26.bench.runner import CellTask, execute_cell

    def run_with_details(system, config, profile, seed, progress):
        metrics = TOY_EXPERIMENT.run(system, config, profile, seed, progress)
        return {**metrics, "details": {"rows": [{"program": "a", "ok": True}], "note": "kept as is"}}

    experiment = replace(TOY_EXPERIMENT, run=run_with_details)
    profile = experiment.profile("smoke")
    task = CellTask(REF, "median", profile.points()[0], 0, profile, {}, 1, "cpu")
    cell = execute_cell(task, experiment)
    assert cell["status"] == "ok" and cell["details"]["rows"][0]["program"] == "a"
    assert "details" not in cell["metrics"]

    def run_with_bad_details(system, config, profile, seed, progress):
        return {"details": {"f": object()}}

    bad = execute_cell(task, replace(TOY_EXPERIMENT, run=run_with_bad_details))
    assert bad["status"] == "error" and "JSON-serialisable" in bad["error"]


def test_a_hand_edited_saved_cell_is_recomputed_and_the_run_says_so(tmp_path, capsys) -> None:
    first = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    path = sorted((tmp_path / "toy" / "cells").glob("median-*.json"))[0]
    cell = json.loads(path.read_text())
    true_value = cell["metrics"]["abs_error"]
    cell["metrics"]["abs_error"] = 99.0  # a "better" number typed in by hand
    path.write_text(json.dumps(cell, indent=2))
    again = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    assert again["run_info"]["resumed_cells"] == 19
    assert again["run_info"]["edited_cells"] == [path.stem]
    assert f"{path} was edited by hand" in capsys.readouterr().err
    assert read_cell(path)["metrics"]["abs_error"] == true_value
    assert again["systems"] == first["systems"]
    # rewriting the same content in another layout is not an edit: the checksum is of the content
    path.write_text(json.dumps(read_cell(path), indent=None))
    assert (
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")["run_info"]["edited_cells"]
        == []
    )


def test_run_info_records_the_numeric_environment(tmp_path) -> None:
    result = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", jobs="auto")
    numeric = result["run_info"]["numeric"]
    assert numeric["threads"] == 1 and numeric["deterministic"] is True
    assert numeric["jobs"] == 1 and numeric["executor"] == "local"  # a 5 s profile runs in-process
    assert numeric["torch"] and numeric["numpy"] and isinstance(numeric["blas"], list)
    assert {c["numeric"]["threads"] for c in result["cells"]} == {1}
    with pytest.raises(ValueError, match="jobs must be"):
        run_experiment(TOY_EXPERIMENT, REF, tmp_path / "bad", jobs="many")


def test_auto_jobs_runs_short_work_in_process_and_long_work_on_every_core() -> None:
    from neurips26.bench.pool import PARALLEL_MIN_S, choose_jobs

    assert choose_jobs("auto", pending_cells=40, pending_budget_s=PARALLEL_MIN_S / 2, cores=8) == 1
    assert choose_jobs("auto", pending_cells=1, pending_budget_s=10 * PARALLEL_MIN_S, cores=8) == 1
    assert choose_jobs("auto", pending_cells=40, pending_budget_s=10 * PARALLEL_MIN_S, cores=8) == 8
    assert choose_jobs("auto", pending_cells=3, pending_budget_s=10 * PARALLEL_MIN_S, cores=8) == 3
    assert choose_jobs(4, pending_cells=1, pending_budget_s=0.0) == 4  # a number is obeyed


def test_parallel_jobs_give_the_numbers_of_one_process_and_one_pool_serves_several_methods(tmp_path) -> None:
    from neurips26.bench.pool import CellPool

    with CellPool(2) as pool:
        one = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "one", profile="smoke", jobs=2, pool=pool)
        two = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "two", profile="smoke", jobs=2, pool=pool)
    alone = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "alone", profile="smoke")
    assert one["systems"] == two["systems"] == alone["systems"]
    assert one["run_info"]["jobs"] == 2


def test_cells_made_under_other_numeric_settings_are_not_reused(tmp_path) -> None:
    run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    other = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke", threads=2)
    assert other["run_info"]["resumed_cells"] == 0 and other["run_info"]["numeric"]["threads"] == 2
    assert {c["numeric"]["threads"] for c in other["cells"]} == {2}


def test_cells_carry_their_built_config_and_a_cell_cannot_edit_the_next_ones(tmp_path) -> None:
    from neurips26.bench.runner import execute_cell, plan_cells

    profile = TOY_EXPERIMENT.profile("smoke")
    tasks = plan_cells(TOY_EXPERIMENT, REF, profile, 2, {"n_samples": 50}, 1)
    assert all(task.config is not None and task.config.n_samples == 50 for task in tasks)
    seen = []

    def run_that_edits_its_config(system, config, profile, seed, progress):
        seen.append(config.n_samples)
        config.n_samples = 3  # a careless cell: must not reach the next cell of the same point
        return TOY_EXPERIMENT.run(system, replace(config, n_samples=50), profile, seed, progress)

    editing = replace(TOY_EXPERIMENT, run=run_that_edits_its_config)
    for task in tasks[:3]:  # three cells of one point, in one process
        assert execute_cell(task, editing)["status"] == "ok"
    assert seen == [50, 50, 50]
    assert tasks[0].config.n_samples == 50


def test_a_config_value_json_cannot_hold_reaches_the_cell_intact(tmp_path) -> None:
    from neurips26.bench.runner import execute_cell, plan_cells

    marker = object()  # not JSON, not even picklable by value: carried as the object in-process
    profile = TOY_EXPERIMENT.profile("smoke")
    task = plan_cells(TOY_EXPERIMENT, REF, profile, 1, {}, 1)[0]
    config = replace(task.config)
    config.method.payload = marker  # an attribute JSON would drop on a round trip
    received = []

    def run_reading_the_payload(system, config, profile, seed, progress):
        received.append(getattr(config.method, "payload", None))
        return TOY_EXPERIMENT.run(system, config, profile, seed, progress)

    execute_cell(replace(task, config=config), replace(TOY_EXPERIMENT, run=run_reading_the_payload))
    assert received and received[0] is not None  # a copy of the carried object, not a rebuilt default
