"""The claim guards of issues #43 and #48, each on a constructed case: identical systems, a control equal to
a baseline, a baseline below its floor, a positive contrast the design cannot resolve, the paper's effect."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile
from neurips26.bench.runner import aggregate, rejudge
from neurips26.core.config import config_hash
from neurips26.report.tables import claims_table, systems_table

CHANCE = 1 / 3


@dataclass
class TableConfig:
    """No knobs: every system's accuracy per seed is fixed by the test's table."""


def _factory(name: str):
    return lambda config: name  # a distinct factory per system: identity is only visible in the cells


def _experiment(claims: tuple[Claim, ...], systems: tuple[str, ...], **extra) -> Experiment:
    return Experiment(
        slug="table",
        config_cls=TableConfig,
        claims=claims,
        metrics=(Metric("accuracy", "max", **extra.pop("metric", {})),),
        systems={name: _factory(name) for name in systems},
        profiles={"smoke": Profile("smoke", budget_s=1, seeds=5), "default": Profile("default", 1, seeds=5)},
        run=lambda system, config, profile, seed, progress: {},
        ours=systems[0],
        **extra,
    )


def _cells(table: dict[str, list[float]], point: dict | None = None) -> list[dict]:
    return [
        {
            "system": name,
            "point": point or {},
            "seed": seed,
            "status": "ok",
            "metrics": {"accuracy": value},
            "config_hash": config_hash(TableConfig()),
            "error": None,
        }
        for name, values in table.items()
        for seed, value in enumerate(values)
    ]


def _judge(experiment: Experiment, table: dict[str, list[float]]) -> dict:
    profile = experiment.profile("default")
    return aggregate(experiment, profile, _cells(table), TableConfig(), 5)


OURS = [0.80, 0.83, 0.79, 0.85, 0.81]
BASE = [0.70, 0.72, 0.69, 0.74, 0.71]
GOOD = [0.90, 0.91, 0.88, 0.93, 0.90]
BAD = [0.40, 0.45, 0.38, 0.42, 0.41]


def test_a_resolved_contrast_leaves_the_verdict_alone() -> None:
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("good", "bad"))
    result = _judge(_experiment((claim,), ("ours", "base", "good", "bad")), {
        "ours": OURS, "base": BASE, "good": GOOD, "bad": BAD,
    })  # fmt: skip
    judged = result["claims"][0]
    assert judged["reproduced"] == "true" and judged["contrast"] == ["good", "bad"]
    contrast = judged["checks"][0]["contrast"]
    assert contrast["reproduced"] == "true" and contrast["effect"] == pytest.approx(0.492)
    table = claims_table(result)  # the README names the contrast and shows its size and that it resolved
    assert "contrast: good > bad" in table
    assert "contrast 0.492 [0.468, 0.516] ✓" in table


def test_two_identical_systems_as_contrast_make_the_claim_uninformative() -> None:
    # issue #48: a design that cannot tell "good" from "bad" cannot judge ours against a baseline either
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("good", "bad"))
    experiment = _experiment((claim,), ("ours", "base", "good", "bad"))
    result = _judge(experiment, {"ours": OURS, "base": BASE, "good": GOOD, "bad": list(GOOD)})
    judged = result["claims"][0]
    assert judged["reproduced"] == "uninformative"
    assert judged["reason"] == "design cannot resolve good vs bad"
    assert judged["checks"][0]["effect"] == pytest.approx(0.104)  # ours vs base is still shown
    table = claims_table(result)
    assert "◌ uninformative (design cannot resolve good vs bad)" in table
    assert "◌ uninformative (the design cannot resolve" in table  # the legend explains the mark


def test_a_contrast_in_the_wrong_direction_is_uninformative_too() -> None:
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("bad", "good"))
    result = _judge(_experiment((claim,), ("ours", "base", "good", "bad")), {
        "ours": OURS, "base": BASE, "good": GOOD, "bad": BAD,
    })  # fmt: skip
    assert result["claims"][0]["reproduced"] == "uninformative"


def test_ours_equal_to_the_baseline_is_indistinguishable_and_shown_so() -> None:
    claim = Claim(
        "ours no worse than local",
        "accuracy",
        "ours",
        ("local",),
        kind="noninferior",
        margin=0.01,
        margin_source="test",
        margin_scale="absolute",
    )
    result = _judge(_experiment((claim,), ("ours", "local")), {"ours": OURS, "local": list(OURS)})
    judged = result["claims"][0]
    assert judged["reproduced"] == "indistinguishable"
    assert "≡ indistinguishable (ours equals local cell for cell)" in claims_table(result)


def test_ours_equal_to_a_control_is_indistinguishable() -> None:
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), controls=("copy",))
    result = _judge(_experiment((claim,), ("ours", "base", "copy")), {
        "ours": OURS, "base": BASE, "copy": list(OURS),
    })  # fmt: skip
    judged = result["claims"][0]
    assert judged["reproduced"] == "indistinguishable"
    assert judged["reason"] == "ours equals control copy cell for cell"


def test_a_control_equal_to_a_baseline_is_a_warning_on_the_claim() -> None:
    # spcacw: the control uniform_weights equals the baseline fedavg on every seed (only run() knows)
    claim = Claim("ours beats fedavg", "accuracy", "ours", ("fedavg",), controls=("uniform",))
    result = _judge(_experiment((claim,), ("ours", "fedavg", "uniform")), {
        "ours": OURS, "fedavg": BASE, "uniform": list(BASE),
    })  # fmt: skip
    judged = result["claims"][0]
    assert judged["warnings"] == ["control uniform equals baseline fedavg cell for cell"]
    assert judged["checks"][0]["controls"] == {"uniform": "indistinguishable"}
    assert judged["reproduced"] == "true"
    assert "Warnings:\n- ours beats fedavg: control uniform equals baseline fedavg" in claims_table(result)


def test_a_control_equal_on_too_few_cells_is_not_called_identical() -> None:
    claim = Claim("ours beats fedavg", "accuracy", "ours", ("fedavg",), controls=("uniform",))
    nan = float("nan")
    result = _judge(_experiment((claim,), ("ours", "fedavg", "uniform")), {
        "ours": OURS, "fedavg": BASE, "uniform": [*OURS[:2], nan, nan, nan],
    })  # fmt: skip
    assert result["claims"][0]["reproduced"] == "true" and result["claims"][0]["warnings"] == []


def test_a_control_built_by_a_baselines_factory_is_rejected_at_load() -> None:
    claim = Claim("ours beats fedavg", "accuracy", "ours", ("fedavg",), controls=("uniform",))
    shared = _factory("fedavg")
    with pytest.raises(ValueError, match="'uniform' with 'fedavg', but both are built by the same factory"):
        Experiment(
            slug="table",
            config_cls=TableConfig,
            claims=(claim,),
            metrics=(Metric("accuracy", "max"),),
            systems={"ours": _factory("ours"), "fedavg": shared, "uniform": shared},
            profiles={"smoke": Profile("smoke", 1, seeds=5), "default": Profile("default", 1, seeds=5)},
            run=lambda *args: {},
            ours="ours",
        )


A2GNN = [0.30, 0.34, 0.33, 0.31, 0.34]  # dacs' A2GNN on 3 classes, issue #43


@pytest.mark.parametrize(
    "floor",
    [
        {"metric": {"floor": CHANCE, "floor_source": "chance: 3 balanced classes"}},
        {"floors": {"accuracy": CHANCE}},
        {"floors": {"accuracy": "majority"}},
    ],
    ids=["metric-floor", "experiment-number", "floor-system"],
)
def test_a_baseline_below_its_floor_is_broken_and_the_claim_inconclusive(floor: dict) -> None:
    claim = Claim("ours beats the baselines", "accuracy", "ours", ("dann", "a2gnn"))
    systems = ("ours", "dann", "a2gnn", "majority")
    table = {"ours": GOOD, "dann": OURS, "a2gnn": A2GNN, "majority": [CHANCE] * 5}
    result = _judge(_experiment((claim,), systems, **floor), table)
    judged = result["claims"][0]
    assert judged["reproduced"] == "inconclusive" and judged["reason"] == "a2gnn below floor"
    assert set(judged["checks"][0]["below_floor"]) == {"a2gnn"}
    a2gnn_row = next(line for line in systems_table(result).splitlines() if line.startswith("| a2gnn |"))
    assert a2gnn_row.startswith("| a2gnn | 0.324 ± ") and a2gnn_row.endswith("(n=5) **broken** |")
    assert "- a2gnn: accuracy mean 0.324 vs floor 0.3333" in systems_table(result)
    # fixed, the same claim is judged
    fixed = _judge(_experiment((claim,), systems, **floor), {**table, "a2gnn": OURS})
    assert fixed["claims"][0]["reproduced"] == "true"


def test_ours_below_the_floor_makes_the_claim_inconclusive() -> None:
    claim = Claim("ours beats base", "accuracy", "ours", ("base",))
    floor = {"metric": {"floor": CHANCE, "floor_source": "chance"}}
    result = _judge(_experiment((claim,), ("ours", "base"), **floor), {"ours": A2GNN, "base": BAD})
    assert result["claims"][0]["reason"] == "ours below floor"


def test_floors_are_validated() -> None:
    with pytest.raises(ValueError, match="floor_source"):
        Metric("accuracy", "max", floor=0.5)
    claim = Claim("ours beats base", "accuracy", "ours", ("base",))
    with pytest.raises(ValueError, match="unknown system 'chance'"):
        _experiment((claim,), ("ours", "base"), floors={"accuracy": "chance"})
    with pytest.raises(ValueError, match="unknown metric 'loss'"):
        _experiment((claim,), ("ours", "base"), floors={"loss": 0.1})
    with pytest.raises(ValueError, match="in Metric and in floors"):
        _experiment(
            (claim,), ("ours", "base"), metric={"floor": 0.1, "floor_source": "x"}, floors={"accuracy": 0.1}
        )


def test_the_verdict_reports_the_mde_and_a_smaller_effect_than_the_papers() -> None:
    claim = Claim(
        "ours beats base", "accuracy", "ours", ("base",), paper_effect=0.25, paper_effect_source="abstract"
    )
    result = _judge(_experiment((claim,), ("ours", "base")), {"ours": OURS, "base": BASE})
    judged = result["claims"][0]
    assert judged["reproduced"] == "true" and judged["versus_paper"] == "smaller"
    table = claims_table(result)
    assert "✓ true; smaller than the paper's effect" in table
    assert "paper: +0.25 (abstract)" in table and ", MDE 0.0" in table and "< paper" in table


def test_claims_validate_contrast_and_paper_effect() -> None:
    with pytest.raises(ValueError, match="two different systems"):
        Claim("c", "accuracy", "ours", ("base",), contrast=("good", "good"))
    with pytest.raises(TypeError, match="pair"):
        Claim("c", "accuracy", "ours", ("base",), contrast="good")
    with pytest.raises(ValueError, match="paper_effect_source"):
        Claim("c", "accuracy", "ours", ("base",), paper_effect=0.1)


def test_rejudge_needs_the_contrast_systems_cells() -> None:
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("good", "bad"))
    experiment = _experiment((claim,), ("ours", "base", "good", "bad"))
    result = _judge(experiment, {"ours": OURS, "base": BASE, "good": GOOD, "bad": BAD})
    result["cells"] = [c for c in result["cells"] if c["system"] != "bad"]
    with pytest.raises(ValueError, match="no stored cells for \\['bad'\\]"):
        rejudge(experiment, result)


FRONTIER = Metric("accuracy", "max", points_metric="sweep_points")


def _frontier_experiment(claim: Claim, systems: tuple[str, ...], *metrics: Metric) -> Experiment:
    """The table experiment with ``accuracy`` declared a frontier metric counted by ``sweep_points``."""
    return dataclasses.replace(_experiment((claim,), systems), metrics=(FRONTIER, *metrics))


def _frontier_cells(table: dict[str, list[float]], points: dict[str, int]) -> list[dict]:
    cells = _cells(table)
    for cell in cells:
        cell["metrics"]["sweep_points"] = float(points[cell["system"]])
    return cells


def test_a_frontier_metric_over_unequal_sweep_points_is_inconclusive() -> None:
    # issue #43 rule 3: styleroute's hypervolume gave ours 4 sweep points and StyleID 2; a frontier only
    # grows with points, so ours "won" by its budget
    claim = Claim("ours' frontier beats base's", "accuracy", "ours", ("base",), controls=("ctrl",))
    experiment = _frontier_experiment(claim, ("ours", "base", "ctrl"), Metric("sweep_points", "max"))
    table, profile = {"ours": OURS, "base": BASE, "ctrl": BASE}, experiment.profile("default")
    cells = _frontier_cells(table, {"ours": 4, "base": 2, "ctrl": 4})
    unequal = aggregate(experiment, profile, cells, TableConfig(), 5)
    judged = unequal["claims"][0]
    assert judged["reproduced"] == "inconclusive"
    assert judged["reason"] == "unequal sweep points (ours 4, base 2, ctrl 4)"
    assert judged["checks"][0]["sweep_points"] == {"ours": [4.0], "base": [2.0], "ctrl": [4.0]}
    assert "unequal sweep points" in claims_table(unequal)
    cells = _frontier_cells(table, {"ours": 4, "base": 4, "ctrl": 4})
    assert aggregate(experiment, profile, cells, TableConfig(), 5)["claims"][0]["reproduced"] == "true"


def test_a_frontier_metric_must_name_a_points_metric_that_exists() -> None:
    claim = Claim("ours beats base", "accuracy", "ours", ("base",))
    with pytest.raises(ValueError, match="points_metric 'sweep_points' not in metrics"):
        _frontier_experiment(claim, ("ours", "base"))
    with pytest.raises(ValueError, match="points_metric must name another metric"):
        Metric("hv", "max", points_metric="hv")


def _uninformative_rate(effect: float, n_pairs: int, trials: int) -> float:
    """Share of simulated claims judged ``uninformative`` when the contrast's good system beats its bad one
    by ``effect`` SD of the paired difference (ours clearly beats the baseline in every trial)."""
    rng = np.random.default_rng(48 + n_pairs)
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("good", "bad"))
    experiment = _experiment((claim,), ("ours", "base", "good", "bad"))
    profile = Profile("default", 1, seeds=n_pairs)
    hits = 0
    for _ in range(trials):
        bad = rng.normal(size=n_pairs)
        table = {
            "ours": [1.0 + 0.01 * s for s in range(n_pairs)],
            "base": [0.0] * n_pairs,
            "good": list(bad + effect + rng.normal(size=n_pairs)),  # the difference has SD 1 here
            "bad": list(bad),
        }
        result = aggregate(experiment, profile, _cells(table), TableConfig(), n_pairs)
        verdict = result["claims"][0]["reproduced"]
        hits += verdict == "uninformative"
    return hits / trials


def test_a_null_contrast_makes_the_claim_uninformative_at_the_nominal_rate() -> None:
    # issue #48: good and bad equal in distribution: the contrast may be resolved by chance only at the
    # interval's one-sided level (2.5%), so the claim is uninformative in >= 95% of trials (simulation noise)
    assert _uninformative_rate(effect=0.0, n_pairs=5, trials=300) >= 0.95


def test_a_contrast_of_one_sd_is_resolved_with_the_designs_power_at_ten_pairs() -> None:
    # the same power as the claim's own check (tests/bench/test_stats.py): a two-sided t test finds a 1-SD
    # effect at 10 pairs about 80% of the time, so the claim is uninformative in ~20% of trials; the bar
    # of 25% leaves two standard errors of simulation noise (a 0.3-SD contrast gives 87%)
    assert _uninformative_rate(effect=1.0, n_pairs=10, trials=200) <= 0.25


def _fail_experiment(claim: Claim) -> Experiment:
    metric = {"fail_level": 1.0, "fail_reason": "no method identifies theta here"}
    return _experiment((claim,), ("ours", "base", "good", "bad"), metric=metric)


def test_a_point_where_every_compared_system_fails_says_so_instead_of_comparing_failures() -> None:
    # issue #48 (samhybrid duffing/non-additive): theta error 1.0-1.4 for every method; the metric reads
    # "max" in this table, so failing is staying at or under the fail level of 1.0
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("good", "bad"))
    failing = {"ours": [0.95, 0.9, 1.0, 0.97, 0.93], "base": [0.5, 0.6, 0.4, 0.55, 0.5]}
    result = _judge(_fail_experiment(claim), {**failing, "good": GOOD, "bad": BAD})
    assert result["claims"][0]["reproduced"] == "inconclusive"
    assert result["claims"][0]["reason"] == "no method identifies theta here"


def test_one_failing_baseline_does_not_stop_the_comparison() -> None:
    # ours clears the fail level where the baseline does not: a finding, not a comparison of failures
    claim = Claim("ours beats base", "accuracy", "ours", ("base",), contrast=("good", "bad"))
    table = {
        "ours": [1.5, 1.6, 1.55, 1.7, 1.6],
        "base": [0.9, 0.95, 1.0, 0.9, 0.92],
        "good": GOOD,
        "bad": BAD,
    }
    # the contrast lies below the fail level too: it is judged on its own, not as a compared system
    assert _judge(_fail_experiment(claim), table)["claims"][0]["reproduced"] == "true"


def test_fail_level_and_fail_reason_go_together() -> None:
    with pytest.raises(ValueError, match="fail_level and fail_reason go together"):
        Metric("theta_error", "min", fail_level=1.0)
    with pytest.raises(ValueError, match="fail_level and fail_reason go together"):
        Metric("theta_error", "min", fail_reason="no method identifies theta here")
    with pytest.raises(ValueError, match="fail_level must be finite"):
        Metric("theta_error", "min", fail_level=float("nan"), fail_reason="x")
