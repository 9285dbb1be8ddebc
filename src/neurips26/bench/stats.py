"""Summary statistics and claim verdicts that keep their level at 5-50 seeds, heavy tails included.

A claim compares ours with the best baseline, paired by seed (a pooled claim averages each seed's
differences over the grid points first: pairs from one seed share its data and are not independent).
The interval of the mean paired difference is a Student-t interval at every number of pairs. Issue #43
measured why not a bootstrap: on symmetric heavy-tailed null differences (t with 2 df) a BCa interval says
"true" 7.2% of the time at 10 pairs, 5.8% at 20 and 6.9% at 40 (nominal 2.5%), the t interval 1.8%, 1.7%
and 2.6%; on normal differences the t interval holds 2.1% where BCa gives 4.5% at 10 pairs. (No procedure
tried holds the level on a strongly skewed null at 10 pairs: a centred lognormal with its long tail on the
losing side gives 15-16% for t, BCa and a sign-flip test alike, 8% for a studentized bootstrap.) No
verdict is drawn below ``MIN_PAIRS`` pairs.

Besides ``true``/``false``/``inconclusive`` a check can be ``indistinguishable`` (ours equals a compared
system cell for cell: the claim is true by construction, never ``true``), ``vacuous`` (a negative
control passes too) or ``uninformative`` (the claim's positive contrast, a pair the design must resolve,
is not resolved). Each interval comes with the design's minimum detectable effect.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

Verdict = Literal["true", "false", "inconclusive", "vacuous", "indistinguishable", "uninformative"]
VERDICTS: tuple[Verdict, ...] = (
    "true",
    "false",
    "inconclusive",
    "vacuous",
    "indistinguishable",
    "uninformative",
)
MIN_PAIRS = 5  # ours: below 5 pairs even an exact test cannot reach two-sided 5% with a clear margin
LEVEL = 0.95
POWER = 0.8  # the minimum detectable effect is the one found with this probability (Cohen's usual 80%)
# Two cells are "the same" when they differ by no more than float32 rounding of one computation (eps
# 1.2e-7, with room for a different summation order); ATOL keeps exact zeros equal.
IDENTICAL_RTOL = 1e-6
IDENTICAL_ATOL = 1e-12

Cluster = Callable[[Hashable], Hashable]


def summarize(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean, sample standard deviation and count of the finite values (NaN-free summaries)."""
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(finite.size)
    mean = float(finite.mean()) if n else None
    std = float(finite.std(ddof=1)) if n > 1 else (0.0 if n == 1 else None)
    return {"mean": mean, "std": std, "n": n}


def t_interval(differences: Sequence[float], *, level: float = LEVEL) -> tuple[float, float]:
    """Student-t interval of the mean of paired differences (needs >= 2 pairs)."""
    diffs = _as_differences(differences, minimum=2)
    mean = float(diffs.mean())
    half = (
        float(stats.t.ppf(0.5 + level / 2, diffs.size - 1)) * float(diffs.std(ddof=1)) / math.sqrt(diffs.size)
    )
    return mean - half, mean + half


def paired_interval(differences: Sequence[float], *, level: float = LEVEL) -> tuple[float, float, str]:
    """The interval the verdict uses: ``(low, high, method)``; the method is ``"t"`` at every n (see the
    module docstring for the heavy-tailed simulation that retired the BCa bootstrap from 10 pairs)."""
    return (*t_interval(differences, level=level), "t")


def minimum_detectable_effect(
    differences: Sequence[float], *, level: float = LEVEL, power: float = POWER
) -> float:
    """The smallest true mean difference this design finds with probability ``power``.

    For a two-sided t test at ``1 - level`` on n paired differences of standard deviation s:
    ``(t_{1-alpha/2, n-1} + t_{power, n-1}) * s / sqrt(n)``, about 2.8 standard errors at large n and
    3.7 at n = 5 (Cohen 1988, the noncentral t approximated by a shifted central one).
    """
    diffs = _as_differences(differences, minimum=2)
    dof = diffs.size - 1
    factor = float(stats.t.ppf(0.5 + level / 2, dof) + stats.t.ppf(power, dof))
    return factor * float(diffs.std(ddof=1)) / math.sqrt(diffs.size)


def _as_differences(differences: Sequence[float], *, minimum: int) -> np.ndarray:
    diffs = np.asarray(differences, dtype=float)
    if diffs.ndim != 1 or diffs.size < minimum:
        raise ValueError(
            f"differences must be a 1-D sequence of >= {minimum} values, got shape {diffs.shape}"
        )
    if not np.isfinite(diffs).all():
        raise ValueError("differences must be finite")
    return diffs


def verdict_from_interval(low: float, high: float) -> Verdict:
    """True when the whole interval of the oriented improvement is above zero, false when below."""
    if low > 0:
        return "true"
    if high < 0:
        return "false"
    return "inconclusive"


def identical(first: Mapping[Any, float], second: Mapping[Any, float], *, min_shared: int = 1) -> bool:
    """Whether two systems' cells are equal (up to float rounding) on every key both have a finite value.

    Needs ``min_shared`` shared keys: two systems with (almost) nothing in common are not shown equal.
    """
    a, b = _finite(first), _finite(second)
    keys = set(a) & set(b)
    if len(keys) < max(min_shared, 1):
        return False
    x = np.array([a[k] for k in keys])
    y = np.array([b[k] for k in keys])
    return bool(np.all(np.abs(x - y) <= IDENTICAL_ATOL + IDENTICAL_RTOL * np.maximum(np.abs(x), np.abs(y))))


def by_cluster(differences: Mapping[Hashable, float], cluster: Cluster | None) -> np.ndarray:
    """The differences to test: one per key, or the mean over each cluster's keys (sorted by cluster)."""
    if cluster is None:
        return np.array([differences[k] for k in sorted(differences, key=repr)], dtype=float)
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for key, value in differences.items():
        groups[cluster(key)].append(value)
    return np.array([np.mean(groups[c]) for c in sorted(groups, key=repr)], dtype=float)


def below_floor(
    values: Mapping[Any, float],
    floor: float | Mapping[Any, float],
    *,
    goal: str,
    cluster: Cluster | None = None,
) -> str | None:
    """Why a system is no better than its trivial floor (chance, a constant predictor, the un-adapted
    model), or None when it clears the floor.

    ``floor`` is a number or a floor system's cells (paired with ``values`` by key). "Below" reads in the
    metric's direction: a system is below its floor unless the 95% t interval of its (paired) excess over
    the floor lies wholly on the good side, i.e. a system at chance is broken, not merely weak. With one
    value (or one cluster) its excess itself must be positive. None when nothing pairs with the floor.
    """
    sign = _oriented(goal)
    mine = _finite(values)
    if isinstance(floor, Mapping):
        floors = _finite(floor)
        excess = {k: sign * (mine[k] - floors[k]) for k in set(mine) & set(floors)}
        floor_mean = float(np.mean(list(floors.values()))) if floors else math.nan
    else:
        excess = {k: sign * (v - float(floor)) for k, v in mine.items()}
        floor_mean = float(floor)
    if not excess:
        return None
    diffs = by_cluster(excess, cluster)
    mean = float(np.mean([mine[k] for k in excess]))
    if diffs.size < 2:
        low = float(diffs.mean())
        text = f"mean {mean:.4g} vs floor {floor_mean:.4g}"
    else:
        low, high = t_interval(diffs)
        text = (
            f"mean {mean:.4g} vs floor {floor_mean:.4g}, excess 95% CI [{sign * low:.3g}, {sign * high:.3g}]"
        )
    return text if low <= 0 else None


@dataclass
class ClaimCheck:
    """The verdict of one claim at one grid point (or pooled over all points)."""

    point: dict
    best_baseline: str | None
    ours_mean: float | None
    baseline_mean: float | None
    effect: float | None  # mean of (ours - best baseline), in the metric's unit
    ci_low: float | None
    ci_high: float | None
    n_pairs: int  # independent pairs behind the interval (seeds, for a pooled claim)
    reproduced: Verdict
    interval: str | None = None  # "t"
    reason: str | None = None  # why a verdict is not true or false
    controls: dict[str, str] = field(default_factory=dict)  # control system -> its own verdict
    mde: float | None = None  # minimum detectable effect of the design, in the metric's unit (>= 0)
    paper_effect: float | None = None  # the paper's reported (ours - baseline), in the metric's unit
    versus_paper: str | None = None  # "smaller" / "larger" when the interval excludes the paper's effect
    n_cells: int | None = None  # paired cells before averaging each seed's (pooled claims only)
    contrast: dict | None = None  # the positive contrast's own check (good vs bad), when declared
    below_floor: dict[str, str] = field(default_factory=dict)  # system -> why it is below its floor
    sweep_points: dict[str, list[float]] = field(default_factory=dict)  # system -> its frontier's counts

    def to_dict(self) -> dict:
        return asdict(self)


def _oriented(goal: str) -> float:
    """+1 when higher is better, -1 when lower is better: improvement = sign * (ours - baseline)."""
    return 1.0 if goal == "max" else -1.0


def _finite(values: Mapping[Any, float]) -> dict[Any, float]:
    return {k: v for k, v in values.items() if v is not None and math.isfinite(v)}


def check_claim_at(
    ours: Mapping[Any, float],
    baselines: Mapping[str, Mapping[Any, float]],
    *,
    goal: str,
    kind: str,
    margin: float,
    point: dict,
    ours_name: str = "ours",
    margin_scale: str = "relative",
    cluster: Cluster | None = None,
    paper_effect: float | None = None,
    paper_effect_scale: str = "absolute",
) -> ClaimCheck:
    """Compare ours with the best baseline (by mean) on the pairing keys that every system has.

    ``ours`` and each baseline map a pairing key (seed, or (point, seed) when pooled) to a value. Every
    baseline must have values: one without any makes the check ``inconclusive: missing <name>``, so a
    claim is never judged against a weaker baseline because the strongest one failed. Pairs are the keys
    where ours and every baseline are finite; ``cluster(key)`` (e.g. the seed of a pooled key) averages
    the differences of one cluster into one pair. For ``kind="noninferior"`` the improvement is shifted by
    ``margin * |baseline mean|`` (or by ``margin`` itself when ``margin_scale="absolute"``) so that
    "ours is at most ``margin`` worse" becomes "shifted improvement > 0". Ours equal to any baseline cell
    for cell is ``indistinguishable``. ``paper_effect`` is the improvement the paper reports (positive =
    ours better, in the metric's unit or, with ``paper_effect_scale="relative"``, as a share of the
    baseline's mean); the check records whether the interval lies below (``smaller``) or above it.
    """
    sign = _oriented(goal)
    ours_finite = _finite(ours)
    finite = {name: _finite(values) for name, values in baselines.items()}
    missing = [name for name, values in (("ours", ours_finite), *finite.items()) if not values]
    if not baselines:
        missing.append("baselines")
    if missing:
        reason = "missing " + ", ".join(ours_name if m == "ours" else m for m in missing)
        return ClaimCheck(point, None, None, None, None, None, None, 0, "inconclusive", reason=reason)
    keys = set(ours_finite)
    for values in finite.values():
        keys &= set(values)
    keys_sorted = sorted(keys, key=repr)
    if not keys_sorted:
        return ClaimCheck(
            point, None, None, None, None, None, None, 0, "inconclusive", reason="no common pairs"
        )
    means = {name: float(np.mean([values[k] for k in keys_sorted])) for name, values in finite.items()}
    best = max(means, key=lambda name: sign * means[name])
    raw = by_cluster({k: ours_finite[k] - finite[best][k] for k in keys_sorted}, cluster)
    base_mean = means[best]
    check = ClaimCheck(
        point=point,
        best_baseline=best,
        ours_mean=float(np.mean([ours_finite[k] for k in keys_sorted])),
        baseline_mean=base_mean,
        effect=float(raw.mean()),
        ci_low=None,
        ci_high=None,
        n_pairs=int(raw.size),
        reproduced="inconclusive",
        n_cells=len(keys_sorted) if cluster is not None else None,
    )
    if paper_effect is not None:
        scale = abs(base_mean) if paper_effect_scale == "relative" else 1.0
        check.paper_effect = sign * paper_effect * scale
    if raw.size < MIN_PAIRS:
        check.reason = f"n={raw.size} < {MIN_PAIRS}"
        return check
    scale = abs(base_mean) if margin_scale == "relative" else 1.0
    shift = margin * scale if kind == "noninferior" else 0.0
    low, high, method = paired_interval(sign * raw + shift)
    # Report the interval on the raw difference (ours - baseline) so it reads in the metric's direction.
    check.ci_low, check.ci_high = sorted(((low - shift) * sign, (high - shift) * sign))
    check.interval = method
    check.mde = minimum_detectable_effect(raw)
    check.reproduced = verdict_from_interval(low, high)
    if check.paper_effect is not None:
        check.versus_paper = _versus_paper(low - shift, high - shift, sign * check.paper_effect)
    same = [name for name in baselines if identical(ours_finite, finite[name])]
    if same:
        check.reproduced = "indistinguishable"
        check.reason = f"{ours_name} equals {', '.join(same)} cell for cell"
    return check


def _versus_paper(low: float, high: float, paper: float) -> str | None:
    """Where the interval of the oriented improvement lies against the paper's oriented effect."""
    if high < paper:
        return "smaller"
    if low > paper:
        return "larger"
    return None


def combine_verdicts(verdicts: Sequence[Verdict]) -> Verdict:
    """Any false -> false; all true -> true; true and one other verdict only -> that verdict (vacuous,
    indistinguishable, uninformative, inconclusive); two different non-true verdicts -> inconclusive."""
    if not verdicts:
        return "inconclusive"
    if any(v == "false" for v in verdicts):
        return "false"
    others = {v for v in verdicts if v != "true"}
    if not others:
        return "true"
    return others.pop() if len(others) == 1 else "inconclusive"
