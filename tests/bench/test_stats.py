import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurips26.bench.stats import (
    BOOTSTRAP_FROM,
    MIN_PAIRS,
    bca_interval,
    check_claim_at,
    combine_verdicts,
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


def test_interval_method_switches_at_ten_pairs() -> None:
    rng = np.random.default_rng(1)
    assert paired_interval(rng.normal(size=BOOTSTRAP_FROM - 1))[2] == "t"
    assert paired_interval(rng.normal(size=BOOTSTRAP_FROM))[2] == "bca"


def test_t_interval_matches_the_textbook_formula() -> None:
    d = np.array([0.3, -0.1, 0.4, 0.2, 0.0])
    half = 2.7764451051977987 * d.std(ddof=1) / math.sqrt(5)  # t_{0.975, 4}
    low, high = t_interval(d)
    assert low == pytest.approx(d.mean() - half) and high == pytest.approx(d.mean() + half)


def test_bca_is_wider_than_the_percentile_points_on_skewed_data() -> None:
    # On right-skewed differences BCa moves both ends right of the plain percentile interval.
    rng = np.random.default_rng(3)
    d = rng.exponential(size=40)
    low, high = bca_interval(d)
    means = d[np.random.default_rng(0).integers(0, 40, size=(10_000, 40))].mean(axis=1)
    plain_low, plain_high = np.quantile(means, [0.025, 0.975])
    assert low > plain_low and high > plain_high


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


def test_an_exact_tie_is_noninferior_with_a_positive_margin() -> None:
    ties = [0.0] * 5
    assert _check(ties, ties, kind="noninferior", margin=0.01, margin_scale="absolute").reproduced == "true"
    # a relative margin on a zero baseline is zero: the tie cannot be shown that way
    assert _check(ties, ties, kind="noninferior", margin=0.01).reproduced == "inconclusive"


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


def test_a_true_effect_of_one_sd_is_found_at_ten_pairs() -> None:
    # Differences have SD sqrt(2) here, so a 1-SD effect on the difference is sqrt(2) in raw units.
    assert _false_reproduced_rate(10, trials=200, effect=math.sqrt(2)) >= 0.8


def test_combine() -> None:
    assert combine_verdicts(["true", "true"]) == "true"
    assert combine_verdicts(["true", "inconclusive"]) == "inconclusive"
    assert combine_verdicts(["true", "false"]) == "false"
    assert combine_verdicts(["true", "vacuous"]) == "vacuous"
    assert combine_verdicts(["vacuous", "inconclusive"]) == "inconclusive"
    assert combine_verdicts([]) == "inconclusive"
