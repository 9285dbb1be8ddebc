import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurips26.bench.stats import (
    MIN_PAIRS,
    below_floor,
    check_claim_at,
    combine_verdicts,
    identical,
    minimum_detectable_effect,
    paired_interval,
    summarize,
    t_interval,
)


def test_summarize_ignores_missing_values() -> None:
    s = summarize([1.0, None, 3.0, float("nan")])
    assert s == {"mean": 2.0, "std": pytest.approx(np.sqrt(2.0)), "n": 2}
    assert summarize([]) == {"mean": None, "std": None, "n": 0}


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=30))
def test_intervals_bracket_the_mean(values: list[float]) -> None:
    low, high, _ = paired_interval(values)
    mean = float(np.mean(values))
    assert low <= mean + 1e-6 and mean - 1e-6 <= high


def test_the_interval_is_student_t_at_every_number_of_pairs() -> None:
    rng = np.random.default_rng(1)
    for n in (5, 10, 40):
        d = rng.normal(size=n)
        assert paired_interval(d) == (*t_interval(d), "t")


def test_t_interval_matches_the_textbook_formula() -> None:
    d = np.array([0.3, -0.1, 0.4, 0.2, 0.0])
    half = 2.7764451051977987 * d.std(ddof=1) / math.sqrt(5)  # t_{0.975, 4}
    low, high = t_interval(d)
    assert low == pytest.approx(d.mean() - half) and high == pytest.approx(d.mean() + half)


def test_intervals_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="differences"):
        paired_interval([1.0])
    with pytest.raises(ValueError, match="finite"):
        paired_interval([1.0, float("nan"), 2.0])


def _check(ours, base, goal="min", kind="better", margin=0.0, margin_scale="relative"):
    seeds = range(len(ours))
    return check_claim_at(
        dict(zip(seeds, ours, strict=True)),
        {"b": dict(zip(seeds, base, strict=True))},
        goal=goal,
        kind=kind,
        margin=margin,
        margin_scale=margin_scale,
        point={},
    )


def test_clear_win_and_loss_for_lower_is_better() -> None:
    assert _check([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.2, 2.0]).reproduced == "true"
    assert _check([2.0, 2.1, 1.9, 2.2, 2.0], [1.0, 1.1, 0.9, 1.0, 1.05]).reproduced == "false"


def test_direction_follows_the_metric_goal() -> None:
    assert _check([2.0, 2.1, 1.9, 2.2, 2.0], [1.0, 1.1, 0.9, 1.0, 1.05], goal="max").reproduced == "true"


def test_too_few_pairs_never_decide_and_say_so() -> None:
    check = _check([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.2])  # four pairs, every one a win
    assert check.reproduced == "inconclusive" and check.reason == f"n=4 < {MIN_PAIRS}"
    assert check.ci_low is None and check.n_pairs == 4


def test_noise_is_inconclusive() -> None:
    assert _check([1.0, 2.0, 1.0, 2.0, 1.5], [2.0, 1.0, 2.0, 1.0, 1.5]).reproduced == "inconclusive"


def test_noninferiority_margin() -> None:
    # ours is 10% worse: non-inferior within a 20% margin, not within a 5% one
    ours, base = [1.1, 1.12, 1.08, 1.1, 1.1], [1.0] * 5
    assert _check(ours, base, kind="noninferior", margin=0.2).reproduced == "true"
    assert _check(ours, base, kind="noninferior", margin=0.05).reproduced == "false"


def test_an_exact_tie_is_indistinguishable_never_noninferior() -> None:
    # issue #43 rule 1: spcacw's digits claims were "true" only because SP-CACW equalled Local on every
    # seed (differences all 0, interval [0, 0], turned into a tick by the margin)
    local = [0.81, 0.79, 0.84, 0.80, 0.82]
    check = _check(local, local, goal="max", kind="noninferior", margin=0.01, margin_scale="absolute")
    assert check.reproduced == "indistinguishable" and check.reason == "ours equals b cell for cell"
    assert (check.ci_low, check.ci_high) == (0.0, 0.0)  # the interval is still shown
    assert _check([0.0] * 5, [0.0] * 5, kind="noninferior", margin=0.01).reproduced == "indistinguishable"
    # the same data one accuracy point apart on one seed is an ordinary noninferiority verdict
    shifted = [local[0] - 0.001, *local[1:]]
    assert (
        _check(
            shifted, local, goal="max", kind="noninferior", margin=0.01, margin_scale="absolute"
        ).reproduced
        == "true"
    )


def test_float_rounding_is_identical_but_a_real_difference_is_not() -> None:
    base = {s: 0.5 + 0.1 * s for s in range(5)}
    rounded = {s: v * (1 + 3e-7 * (-1) ** s) for s, v in base.items()}
    assert identical(base, rounded)
    assert not identical(base, {**base, 2: base[2] + 1e-4})
    assert not identical(base, {9: 0.5})  # nothing shared: not shown equal


def test_ours_equal_to_a_weaker_baseline_is_indistinguishable() -> None:
    seeds = range(5)
    weak = {s: 2.0 + 0.1 * s for s in seeds}
    check = check_claim_at(
        dict(weak),
        {"strong": {s: 1.0 for s in seeds}, "weak": weak},
        goal="min",
        kind="noninferior",
        margin=2.0,
        point={},
    )
    assert check.best_baseline == "strong" and check.reproduced == "indistinguishable"
    assert "equals weak" in check.reason


def test_best_baseline_is_chosen_by_mean() -> None:
    seeds = range(5)
    check = check_claim_at(
        {s: 1.0 for s in seeds},
        {"weak": {s: 5.0 for s in seeds}, "strong": {s: 2.0 + 0.01 * s for s in seeds}},
        goal="min",
        kind="better",
        margin=0.0,
        point={},
    )
    assert check.best_baseline == "strong"
    assert check.effect == pytest.approx(-1.02)


def test_a_failed_strong_baseline_is_never_replaced_by_a_weaker_one() -> None:
    # The constructed case of issue #19: ours NaN on 3 of 5 seeds, the strongest baseline errored.
    nan = float("nan")
    ours = {0: 1.0, 1: 1.0, 2: nan, 3: nan, 4: nan}
    check = check_claim_at(
        ours,
        {"strong": {s: nan for s in range(5)}, "weak": {s: 9.0 for s in range(5)}},
        goal="min",
        kind="better",
        margin=0.0,
        point={},
    )
    assert check.reproduced == "inconclusive" and check.reason == "missing strong"


def test_nan_pairs_reduce_n_below_the_minimum() -> None:
    nan = float("nan")
    check = _check([1.0, 1.0, nan, nan, nan], [2.0] * 5)
    assert check.reproduced == "inconclusive" and check.n_pairs == 2


def _false_reproduced_rate(n: int, trials: int, effect: float = 0.0) -> float:
    """Share of simulated claims judged 'true' when ours differs from the baseline by ``effect`` SD."""
    rng = np.random.default_rng(2026 + n)
    base = rng.normal(size=(trials, n))
    ours = base - effect + rng.normal(size=(trials, n))  # lower is better: effect > 0 helps ours
    hits = 0
    for row_ours, row_base in zip(ours, base, strict=True):
        hits += _check(list(row_ours), list(row_base)).reproduced == "true"
    return hits / trials


@pytest.mark.parametrize("n", [5, 10])
def test_null_effect_is_reproduced_at_most_at_the_nominal_rate(n: int) -> None:
    # One-sided error of a two-sided 95% interval is 2.5%; the bar is 5% with simulation noise.
    assert _false_reproduced_rate(n, trials=600 if n == 5 else 300) <= 0.05


def test_heavy_tailed_null_keeps_the_level_at_ten_pairs() -> None:
    # Issue #43 rule 5: on symmetric heavy-tailed null differences (t, 2 df) the BCa interval the harness
    # used from 10 pairs said "true" 7.2% of the time (8.3% in the run); nominal is 2.5%. With
    # 3,000 replicates the rate's standard error is about 0.3 points, so a 4% bar separates the two.
    rng = np.random.default_rng(43)
    differences = rng.standard_t(2, size=(3000, 10))
    hits = sum(_check(list(d), [0.0] * 10, goal="max").reproduced == "true" for d in differences)
    assert hits / len(differences) <= 0.04


def test_a_true_effect_of_one_sd_is_found_at_ten_pairs() -> None:
    # Differences have SD sqrt(2) here, so a 1-SD effect on the difference is sqrt(2) in raw units.
    assert _false_reproduced_rate(10, trials=200, effect=math.sqrt(2)) >= 0.8


def test_combine() -> None:
    assert combine_verdicts(["true", "true"]) == "true"
    assert combine_verdicts(["true", "inconclusive"]) == "inconclusive"
    assert combine_verdicts(["true", "false"]) == "false"
    assert combine_verdicts(["true", "vacuous"]) == "vacuous"
    assert combine_verdicts(["vacuous", "inconclusive"]) == "inconclusive"
    assert combine_verdicts(["true", "indistinguishable"]) == "indistinguishable"
    assert combine_verdicts(["uninformative", "true", "uninformative"]) == "uninformative"
    assert combine_verdicts(["uninformative", "false"]) == "false"
    assert combine_verdicts(["uninformative", "indistinguishable"]) == "inconclusive"
    assert combine_verdicts([]) == "inconclusive"


def test_pooled_pairs_are_averaged_per_seed() -> None:
    # Issue #43 rule 5: 5 seeds x 2 points are 5 independent pairs, not 10
    ours = {(point, seed): 1.0 + 0.1 * seed + point for point in (0, 1) for seed in range(5)}
    base = {key: value + 0.5 + 0.01 * key[0] for key, value in ours.items()}
    check = check_claim_at(
        ours, {"b": base}, goal="min", kind="better", margin=0.0, point={}, cluster=lambda k: k[1]
    )
    assert (check.n_pairs, check.n_cells) == (5, 10)
    assert check.effect == pytest.approx(-0.505)
    assert _check([1.0] * 5, [2.0] * 5).n_cells is None


def test_minimum_detectable_effect_is_about_2_8_standard_errors() -> None:
    rng = np.random.default_rng(4)
    d = rng.normal(size=5)
    se = d.std(ddof=1) / math.sqrt(5)
    assert minimum_detectable_effect(d) == pytest.approx((2.7764451 + 0.9409646) * se)  # t_.975,4 + t_.8,4
    big = rng.normal(size=2000)
    ratio = minimum_detectable_effect(big) / (big.std(ddof=1) / math.sqrt(2000))
    assert ratio == pytest.approx(1.959964 + 0.841621, abs=0.01)


def test_the_design_finds_an_effect_of_one_mde_about_80_percent_of_the_time() -> None:
    rng = np.random.default_rng(5)
    n, trials = 10, 1000
    mde = (2.262157 + 0.883304) / math.sqrt(n)  # the population value for unit-SD differences
    found = sum(
        _check(list(d), [0.0] * n, goal="max").reproduced == "true" for d in rng.normal(mde, 1.0, (trials, n))
    )
    assert 0.7 <= found / trials <= 0.9


def test_checks_report_the_mde_and_compare_with_the_papers_effect() -> None:
    ours, base = [1.0, 1.1, 0.9, 1.0, 1.05], [1.2, 1.3, 1.1, 1.25, 1.2]  # lower is better; gain ~0.2
    check = check_claim_at(
        dict(enumerate(ours)),
        {"b": dict(enumerate(base))},
        goal="min",
        kind="better",
        margin=0.0,
        point={},
        paper_effect=1.0,
    )
    assert check.reproduced == "true" and check.mde > 0
    assert check.paper_effect == -1.0  # ours - baseline, in the metric's direction
    assert check.versus_paper == "smaller"  # the interval [-0.27, -0.13] excludes -1.0
    relative = check_claim_at(
        dict(enumerate(ours)),
        {"b": dict(enumerate(base))},
        goal="min",
        kind="better",
        margin=0.0,
        point={},
        paper_effect=0.05,
        paper_effect_scale="relative",
    )
    assert relative.paper_effect == pytest.approx(-0.05 * np.mean(base)) and relative.versus_paper == "larger"
    near = check_claim_at(
        dict(enumerate(ours)),
        {"b": dict(enumerate(base))},
        goal="min",
        kind="better",
        margin=0.0,
        point={},
        paper_effect=0.2,
    )
    assert near.versus_paper is None


def test_a_system_at_chance_is_below_its_floor() -> None:
    chance = 1 / 3  # dacs' A2GNN: 0.30-0.34 on 3 classes
    a2gnn = dict(enumerate([0.30, 0.34, 0.33, 0.31, 0.34]))
    assert "vs floor 0.3333" in below_floor(a2gnn, chance, goal="max")
    barely = dict(enumerate([0.34, 0.36, 0.30, 0.38, 0.35]))  # mean above chance, interval across it
    assert below_floor(barely, chance, goal="max") is not None
    dann = dict(enumerate([0.71, 0.94, 0.80, 0.77, 0.88]))
    assert below_floor(dann, chance, goal="max") is None
    # lower is better: an error no lower than a constant predictor's is below the floor
    constant = {s: 1.0 + 0.01 * s for s in range(5)}
    noise = [0.01, -0.02, 0.005, -0.01, 0.02]  # no better than the constant predictor on average
    assert below_floor({s: v + noise[s] for s, v in constant.items()}, constant, goal="min") is not None
    assert below_floor({s: 0.5 for s in range(5)}, constant, goal="min") is None
    assert below_floor({0: 0.2}, chance, goal="max") is not None  # one value: its own side decides
    assert below_floor(dann, {9: 0.5}, goal="max") is None  # nothing pairs with the floor system
