"""Range-based PR AUC and VUS-PR (Paparrizos et al., "Volume Under the Surface", PVLDB 15(11), 2022).

The definition follows aeon's ``range_pr_vus_score`` (aeon 1.6): labels get sqrt-shaped slopes of
``buffer // 2`` steps on both sides of each anomaly; 250 thresholds are sampled uniformly from the sorted
scores; recall is the soft true-positive mass over P (the mean of the hard and soft positive mass) times
the existence reward (the share of extended anomaly ranges hit at least once); precision is the soft
true-positive mass over the number of alarms; the PR area is a trapezoid sum; VUS-PR averages it over
buffers 0..max_buffer. aeon loops over thresholds and buffers in Python (minutes on 10 k steps with its
default ``max_buffer_size=500``); this version is vectorised over thresholds and ranges, and is checked
against a loop written from the definition (``tests/methods/star/test_star_metrics.py``) and against aeon
itself
where aeon is installed. aeon is not a dependency: aeon 1.6 pins numba < 0.64, which would move numpy and
numba under the other methods.
"""

from __future__ import annotations

import numpy as np

__all__ = ["point_adjusted_f1", "range_pr_auc", "range_pr_vus", "soft_labels"]

N_THRESHOLDS = 250  # the original implementation's number of uniformly sampled thresholds


def _check(y_true: np.ndarray, y_score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y_true = np.asarray(y_true)
    y_score = np.asarray(y_score, dtype=np.float64)
    if y_true.ndim != 1 or y_score.shape != y_true.shape:
        raise ValueError(
            f"y_true and y_score must be 1-D of equal length, got {y_true.shape} and {y_score.shape}"
        )
    if not np.isfinite(y_score).all():
        raise ValueError("y_score must be finite")
    if not (y_true > 0).any():
        raise ValueError("y_true holds no anomaly: range PR is undefined")
    return (y_true > 0).astype(np.float64), y_score


def _bounds(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and (exclusive) ends of the runs where labels > 0."""
    edges = np.diff(np.r_[0, (labels > 0).astype(np.int8), 0])
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def soft_labels(y_true: np.ndarray, buffer: int) -> np.ndarray:
    """Labels with sqrt slopes of ``buffer // 2`` steps before and after each anomaly, clipped to 1."""
    y = (np.asarray(y_true) > 0).astype(np.float64)
    if buffer <= 1:
        return y
    n, slope = y.shape[0], buffer // 2
    starts, ends = _bounds(y)
    offsets = np.arange(slope)
    soft = y.copy()
    after = (ends - 1)[:, None] + offsets  # positions e, e+1, ... (aeon includes e itself)
    ok = after < n
    np.add.at(soft, after[ok], np.broadcast_to(np.sqrt(1 - offsets / buffer), after.shape)[ok])
    before = starts[:, None] - slope + offsets  # positions s - slope ... s - 1
    ok = before >= 0
    weights = np.sqrt(1 - (slope - offsets) / buffer)
    np.add.at(soft, before[ok], np.broadcast_to(weights, before.shape)[ok])
    return np.clip(soft, 0.0, 1.0)


def range_pr_auc(y_true: np.ndarray, y_score: np.ndarray, buffer: int | None = None) -> float:
    """Range-based area under the PR curve at one buffer size (None: the median anomaly length)."""
    y, score = _check(y_true, y_score)
    if np.unique(score).shape[0] == 1:
        return 0.0
    if buffer is None:
        starts, ends = _bounds(y)
        buffer = int(np.median(ends - starts))
    return float(_range_pr_auc(y, score, int(buffer), *_sorted(score)))


def _sorted(score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(-score, kind="stable")
    desc = score[order]
    thresholds = desc[np.linspace(0, desc.shape[0] - 1, N_THRESHOLDS, dtype=np.int_)]
    # number of points with score >= t, for each threshold (scores sorted descending)
    counts = np.searchsorted(-desc, -thresholds, side="right")
    return order, thresholds, counts


def _range_pr_auc(
    y: np.ndarray,
    score: np.ndarray,
    buffer: int,
    order: np.ndarray,
    thresholds: np.ndarray,
    counts: np.ndarray,
) -> float:
    soft = soft_labels(y, buffer)
    starts, ends = _bounds(soft)
    p = 0.5 * (y.sum() + soft.sum())
    tp = np.concatenate([[0.0], np.cumsum(soft[order])])[counts]  # soft TP mass above each threshold
    # the highest score inside each extended range (a -inf sentinel closes a range ending at n)
    bounds = np.stack([starts, ends], axis=1).ravel()
    range_max = np.maximum.reduceat(np.r_[score, -np.inf], bounds)[::2]
    existence = (range_max[None, :] >= thresholds[:, None]).mean(1)
    recall = np.minimum(tp / p, 1.0) * existence
    precision = tp / counts
    recalls = np.r_[0.0, recall]
    precisions = np.r_[1.0, precision]
    return float(np.sum((recalls[1:] - recalls[:-1]) * (precisions[1:] + precisions[:-1]) / 2))


def range_pr_vus(y_true: np.ndarray, y_score: np.ndarray, max_buffer: int = 100) -> float:
    """VUS-PR: the range PR AUC averaged over buffer sizes 0..max_buffer.

    Parameters
    ----------
    y_true : (n,) labels, > 0 marks an anomalous step.
    y_score : (n,) finite anomaly scores, higher is more anomalous.
    max_buffer : the largest buffer (aeon's ``max_buffer_size``; its default is 500, we use about the
        longest injected anomaly, 100, for 10 k-step series).
    """
    if int(max_buffer) < 0:
        raise ValueError(f"max_buffer must be >= 0, got {max_buffer}")
    y, score = _check(y_true, y_score)
    if np.unique(score).shape[0] == 1:
        return 0.0
    sorted_parts = _sorted(score)
    return float(np.mean([_range_pr_auc(y, score, b, *sorted_parts) for b in range(int(max_buffer) + 1)]))


def point_adjusted_f1(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """Best point-adjusted F1 over all thresholds (Xu et al., WWW 2018; secondary metric only).

    Point adjustment marks a whole labelled segment detected as soon as one of its steps alarms; the F1
    of those adjusted alarms is maximised over every threshold (each distinct score). Caveat (Kim et al.,
    AAAI 2022): the adjustment rewards a single lucky alarm inside a long segment, so random scores
    already reach a high PA-F1 on data with long anomalies; it is reported next to VUS-PR, never alone.
    Vectorised: a segment is detected at threshold t iff its maximum score is >= t.
    """
    y, score = _check(y_true, y_score)
    starts, ends = _bounds(y)
    # each segment's maximum: reduceat over [s0, e0, s1, e1, ...] (a -inf sentinel lets e_last == n)
    padded = np.r_[score, -np.inf]
    seg_max = np.maximum.reduceat(padded, np.stack([starts, ends], 1).ravel())[::2]
    lengths = (ends - starts).astype(np.float64)
    positives = lengths.sum()
    normal = np.sort(score[y == 0])
    thresholds = np.unique(np.r_[seg_max, normal])
    order = np.argsort(seg_max)
    sorted_max, cum_len = seg_max[order], np.r_[0.0, np.cumsum(lengths[order])]
    # TP(t): lengths of segments whose maximum is >= t; FP(t): normal steps scoring >= t
    tp = positives - cum_len[np.searchsorted(sorted_max, thresholds, side="left")]
    fp = len(normal) - np.searchsorted(normal, thresholds, side="left")
    f1 = 2 * tp / np.maximum(2 * tp + fp + (positives - tp), 1e-12)
    return float(f1.max())
