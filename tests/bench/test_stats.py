import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurips26.bench.stats import check_claim_at, combine_verdicts, paired_bootstrap_ci, summarize


def test_summarize_ignores_missing_values() -> None:
    s = summarize([1.0, None, 3.0, float("nan")])
    assert s == {"mean": 2.0, "std": pytest.approx(np.sqrt(2.0)), "n": 2}
    assert summarize([]) == {"mean": None, "std": None, "n": 0}


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=30))
def test_bootstrap_ci_brackets_the_mean(values: list[float]) -> None:
    low, high = paired_bootstrap_ci(values)
    mean = float(np.mean(values))
    assert low <= mean + 1e-9 and mean - 1e-9 <= high


def test_bootstrap_rejects_empty() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap_ci([])


def _check(ours, base, goal="min", kind="better", margin=0.0):
    seeds = range(len(ours))
    return check_claim_at(
        dict(zip(seeds, ours, strict=True)),
        {"b": dict(zip(seeds, base, strict=True))},
        goal=goal,
        kind=kind,
        margin=margin,
        point={},
    )


def test_clear_win_and_loss_for_lower_is_better() -> None:
    assert _check([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.2]).reproduced == "true"
    assert _check([2.0, 2.1, 1.9, 2.2], [1.0, 1.1, 0.9, 1.0]).reproduced == "false"


def test_direction_follows_the_metric_goal() -> None:
    assert _check([2.0, 2.1, 1.9, 2.2], [1.0, 1.1, 0.9, 1.0], goal="max").reproduced == "true"


def test_noise_is_inconclusive_and_one_seed_never_decides() -> None:
    assert _check([1.0, 2.0, 1.0, 2.0], [2.0, 1.0, 2.0, 1.0]).reproduced == "inconclusive"
    assert _check([1.0], [5.0]).reproduced == "inconclusive"


def test_noninferiority_margin() -> None:
    # ours is 10% worse: non-inferior within a 20% margin, not within a 5% one
    ours, base = [1.1, 1.1, 1.1, 1.1], [1.0, 1.0, 1.0, 1.0]
    assert _check(ours, base, kind="noninferior", margin=0.2).reproduced == "true"
    assert _check(ours, base, kind="noninferior", margin=0.05).reproduced == "false"


def test_best_baseline_is_chosen_by_mean() -> None:
    check = check_claim_at(
        {0: 1.0, 1: 1.0},
        {"weak": {0: 5.0, 1: 5.0}, "strong": {0: 2.0, 1: 2.1}},
        goal="min",
        kind="better",
        margin=0.0,
        point={},
    )
    assert check.best_baseline == "strong"
    assert check.effect == pytest.approx(-1.05)


def test_combine() -> None:
    assert combine_verdicts(["true", "true"]) == "true"
    assert combine_verdicts(["true", "inconclusive"]) == "inconclusive"
    assert combine_verdicts(["true", "false"]) == "false"
    assert combine_verdicts([]) == "inconclusive"
