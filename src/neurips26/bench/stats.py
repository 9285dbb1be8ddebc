"""Summary statistics and the claim verdict: paired bootstrap CI of ours minus the best baseline."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

Verdict = Literal["true", "false", "inconclusive"]
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # ours: a fixed resampling seed so a verdict is a pure function of the measurements


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    """Mean, sample standard deviation and count of the finite values (NaN-free summaries)."""
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(finite.size)
    mean = float(finite.mean()) if n else None
    std = float(finite.std(ddof=1)) if n > 1 else (0.0 if n == 1 else None)
    return {"mean": mean, "std": std, "n": n}


def paired_bootstrap_ci(
    differences: Sequence[float], *, level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of paired differences (resampling the pairs)."""
    diffs = np.asarray(differences, dtype=float)
    if diffs.ndim != 1 or diffs.size == 0:
        raise ValueError("differences must be a non-empty 1-D sequence")
    if diffs.size == 1:
        return float(diffs[0]), float(diffs[0])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, diffs.size, size=(resamples, diffs.size))
    means = diffs[idx].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


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
    n_pairs: int
    reproduced: Verdict

    def to_dict(self) -> dict:
        return asdict(self)


def _oriented(goal: str) -> float:
    """+1 when higher is better, -1 when lower is better: improvement = sign * (ours - baseline)."""
    return 1.0 if goal == "max" else -1.0


def verdict_from_ci(low: float, high: float, n_pairs: int) -> Verdict:
    """True when the whole CI of the oriented improvement is above zero, false when below."""
    if n_pairs < 2:
        return "inconclusive"
    if low > 0:
        return "true"
    if high < 0:
        return "false"
    return "inconclusive"


def check_claim_at(
    ours: Mapping[int, float],
    baselines: Mapping[str, Mapping[int, float]],
    *,
    goal: str,
    kind: str,
    margin: float,
    point: dict,
) -> ClaimCheck:
    """Compare ours with the best baseline (by mean) on the seeds both have.

    ``ours`` and each baseline map a pairing key (seed, or (point, seed) when pooled) to a value.
    For ``kind="noninferior"`` the improvement is shifted by ``margin * |baseline mean|`` so that
    "ours is at most ``margin`` worse" becomes "shifted improvement > 0".
    """
    sign = _oriented(goal)
    candidates = {
        name: float(np.mean(list(vals.values())))
        for name, vals in baselines.items()
        if vals and all(math.isfinite(v) for v in vals.values())
    }
    ours_finite = {k: v for k, v in ours.items() if math.isfinite(v)}
    if not candidates or not ours_finite:
        return ClaimCheck(point, None, None, None, None, None, None, 0, "inconclusive")
    best = max(candidates, key=lambda name: sign * candidates[name])
    keys = sorted(set(ours_finite) & set(baselines[best]), key=repr)
    if not keys:
        return ClaimCheck(point, best, None, candidates[best], None, None, None, 0, "inconclusive")
    raw = np.array([ours_finite[k] - baselines[best][k] for k in keys])
    base_mean = float(np.mean([baselines[best][k] for k in keys]))
    shift = margin * abs(base_mean) if kind == "noninferior" else 0.0
    improvement = sign * raw + shift
    low, high = paired_bootstrap_ci(improvement)
    # Report the CI on the raw difference (ours - baseline) so it reads in the metric's own direction.
    raw_low, raw_high = sorted(((low - shift) * sign, (high - shift) * sign))
    return ClaimCheck(
        point=point,
        best_baseline=best,
        ours_mean=float(np.mean([ours_finite[k] for k in keys])),
        baseline_mean=base_mean,
        effect=float(raw.mean()),
        ci_low=float(raw_low),
        ci_high=float(raw_high),
        n_pairs=len(keys),
        reproduced=verdict_from_ci(low, high, len(keys)),
    )


def combine_verdicts(verdicts: Sequence[Verdict]) -> Verdict:
    """All true -> true; any false -> false; otherwise inconclusive."""
    if not verdicts:
        return "inconclusive"
    if any(v == "false" for v in verdicts):
        return "false"
    return "true" if all(v == "true" for v in verdicts) else "inconclusive"
