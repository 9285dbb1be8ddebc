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
