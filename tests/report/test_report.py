import dataclasses

import pytest

from neurips26.bench.runner import run_experiment
from neurips26.report import build_report, refresh_method_readme
from neurips26.report.figures import OURS_COLOUR, system_colours
from neurips26.testing.toy_experiment import TOY_EXPERIMENT

REF = "neurips26.testing.toy_experiment:TOY_EXPERIMENT"


def test_report_is_rebuilt_from_json_alone(tmp_path) -> None:
    result = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="default")
    path = build_report(tmp_path)
    text = path.read_text()
    assert "| toy |" in text and "**median**" in text and "outlier_fraction=0.2" in text
    figure = tmp_path / "figures" / "toy.png"
    assert figure.stat().st_size > 1000
    assert result["claims"][0]["text"] in text


def test_report_of_an_empty_folder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no <method>/result\.json"):
        build_report(tmp_path)


def test_colours_are_distinct_within_a_figure_and_ours_is_red() -> None:
    names = ["sam_ml", "erm", "physics_only", "nn_only", "erm_l2", "aphynity", "sam_all", "asam_ml"]
    colours = system_colours(names, "sam_ml")
    assert colours["sam_ml"] == OURS_COLOUR and len(set(colours.values())) == len(names)


def test_readme_results_region_is_replaced_between_markers(tmp_path) -> None:
    result = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:start -->\nold\n<!-- results:end -->\nafter\n")
    assert not refresh_method_readme(readme, result)  # a smoke result never overwrites the default block
    readme.write_text("intro\n<!-- results:smoke:start -->\nold\n<!-- results:smoke:end -->\nafter\n")
    assert refresh_method_readme(readme, result)
    text = readme.read_text()
    assert "old" not in text and "neurips26 run toy" in text and text.endswith("after\n")
    (tmp_path / "plain.md").write_text("no markers")
    assert not refresh_method_readme(tmp_path / "plain.md", result)


def test_pareto_figure_plots_the_headline_against_a_cost_metric(tmp_path) -> None:
    experiment = dataclasses.replace(TOY_EXPERIMENT, pareto_x="n")
    result = run_experiment(experiment, REF, tmp_path / "toy", profile="default")
    assert result["run_info"]["pareto_x"] == "n"
    text = build_report(tmp_path).read_text()
    pareto, main = tmp_path / "figures" / "toy_pareto.png", tmp_path / "figures" / "toy.png"
    assert pareto.stat().st_size > 1000 and "figures/toy_pareto.png" in text
    assert pareto.read_bytes() != main.read_bytes()


def test_pareto_x_must_be_a_metric() -> None:
    with pytest.raises(ValueError, match="pareto_x 'bits' not in metrics"):
        dataclasses.replace(TOY_EXPERIMENT, pareto_x="bits")


def test_terminal_summary_fits_120_columns(tmp_path) -> None:
    from neurips26.cli import TABLE_CLAIM_WIDTH
    from neurips26.report.tables import SUMMARY_HEADER, summary_rows

    result = run_experiment(TOY_EXPERIMENT, REF, tmp_path / "toy", profile="smoke")
    result["claims"][0]["text"] = "a very long claim " * 20
    result["claims"][0]["reason"] = "missing " + ", ".join(["some_long_baseline_name"] * 5)
    rows = summary_rows([result], claim_width=TABLE_CLAIM_WIDTH)
    widths = [max(len(str(row[i])) for row in [SUMMARY_HEADER, *rows]) for i in range(len(SUMMARY_HEADER))]
    assert sum(widths) + 2 * (len(widths) - 1) <= 120


def test_absolute_margins_print_in_the_metrics_unit_not_as_a_share() -> None:
    from neurips26.report.tables import _margin_text

    assert _margin_text({"margin": 0.05, "margin_scale": "relative"}) == "5%"
    assert _margin_text({"margin": 0.02, "margin_scale": "absolute"}) == "0.02 absolute"
    assert _margin_text({"margin": 0.25}) == "25%"  # results written before margin_scale existed


def _two_point_claim(control_verdicts: list[str]) -> dict:
    checks = [
        {"point": {"k": k}, "reproduced": "inconclusive", "controls": {"fixed_random": verdict}}
        for k, verdict in zip((10, 20), control_verdicts, strict=True)
    ]
    return {"text": "ours beats random", "reproduced": "inconclusive", "reason": None,
            "controls": ["fixed_random"], "checks": checks}  # fmt: skip


def test_verdict_sentences_state_where_a_control_passes() -> None:
    # issue #43 rule 8: poes' README said "the fixed-random control never passes"; its JSON had it pass at
    # k = 20. The generated sentence says what the JSON holds, and the table shows each control's verdict.
    from neurips26.report import verdict_sentences
    from neurips26.report.tables import claim_cells

    claim = _two_point_claim(["inconclusive", "true"])
    text = verdict_sentences({"claims": [claim]}).markdown
    assert "1 claim(s): 1 inconclusive." in text
    assert "control `fixed_random` **passes** at k=20 (not at k=10)" in text
    quiet = verdict_sentences({"claims": [_two_point_claim(["false", "inconclusive"])]}).markdown
    assert "control `fixed_random` passes nowhere" in quiet
    for check in claim["checks"]:
        check.update(ours_mean=0.5, best_baseline="b", baseline_mean=0.4, effect=0.1, ci_low=None)
    assert "k=20: 0.1 n=0, control fixed_random ✓ ?" in claim_cells(claim)["delta"]


def test_the_verdicts_analysis_name_is_reserved() -> None:
    from neurips26.bench.experiment import Analysis
    from neurips26.registry import get_spec
    from neurips26.report import readme_analyses

    experiment = get_spec("poes").load_experiment()
    assert "verdicts" in readme_analyses(experiment)
    taken = dataclasses.replace(experiment, analyses={"verdicts": lambda result: Analysis("")})
    with pytest.raises(ValueError, match="reserved"):
        readme_analyses(taken)


def test_prose_that_misstates_the_json_is_caught_and_generated_blocks_are_not_read() -> None:
    from neurips26.report.verdicts import prose_verdict_mismatches

    passing = {"claims": [_two_point_claim(["inconclusive", "true"])]}
    poes_before = (
        "All six claims are **inconclusive**, and none is vacuous (the fixed-random control never passes)."
    )
    found = prose_verdict_mismatches(poes_before, [passing])
    assert len(found) == 1 and "a control passes in the JSON" in found[0]
    assert prose_verdict_mismatches("Four of the six claims are refuted.", [passing]) == [
        "'claims are refuted': no claim or check holds refuted"
    ]
    quiet = {"claims": [_two_point_claim(["false", "inconclusive"])]}
    assert prose_verdict_mismatches(poes_before, [quiet]) == []
    start, end = "<!-- analysis:verdicts:default:start -->", "<!-- analysis:verdicts:default:end -->"
    generated = f"{start}\nthe claim is refuted\n{end}"
    assert prose_verdict_mismatches(generated, [quiet]) == []
