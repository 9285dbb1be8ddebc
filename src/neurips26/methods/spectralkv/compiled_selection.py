"""The ``"segments"`` selection of :func:`core.select_from_candidates`, compiled whole for CPU tensors.

In torch, the steps around the two compiled kernels (:func:`kernels.duplicate_pairs`,
:func:`kernels.pivot_segments`) -- the repeats that stay closed, the score fill with its near-duplicate
demotion, the ordering of the kept positions -- are five dozen small tensor operations per prefill: at 1k
tokens their dispatch cost ~0.4 ms, a third of the pivoting itself (issue #47). Here every (layer, KV
head) row goes through all of them in one call: near-duplicate pairs (:func:`kernels._sweep_row`),
closing each repeat with a better partner, segment pivoting (:func:`kernels._pivot_row_segments`), the
score fill and the sorted positions, with the same arithmetic and tie-breaking as the torch path (tests
compare them), which remains the reference and the path for other devices and rank strategies.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from neurips26.methods.spectralkv.kernels import _pivot_row_segments, _sweep_row, as_array

__all__ = ["select_segments"]

_FILL_PASSES = 8  # core._fill_by_score: passes that demote a filler duplicating a better one


def select_segments(
    features: torch.Tensor,
    unit: torch.Tensor,
    energy: torch.Tensor,
    scores: torch.Tensor,
    forced: torch.Tensor,
    valid: torch.Tensor,
    budget: torch.Tensor,
    index: torch.Tensor,
    *,
    threshold: float,
    radius: float,
    directions: torch.Tensor,
    segment_budget: int,
    rank_tol: float,
    energy_tol: float,
) -> torch.Tensor:
    """``(B, H, max budget)`` sorted kept positions per row of a candidate pool, -1 padded.

    ``features``/``unit`` ``(B, H, P, D)`` (``unit``: rows divided by their norm), ``energy`` ``(B, H, P)``
    their squared norms, ``scores``/``forced``/``valid``/``index`` ``(B, H, P)`` and ``budget`` ``(B, H)`` as
    in :class:`features.Candidates`; ``threshold``, ``radius`` and ``directions`` as in
    :func:`kernels.duplicate_pairs`, the rest as in :func:`kernels.pivot_segments`. ``unit`` and ``energy``
    come from the caller's torch operations, so the pairs and tie-breaks are the torch path's own.
    """
    batch, heads = features.shape[:2]
    rows = batch * heads
    width = int(budget.max())
    if features.dtype not in (torch.float32, torch.float64):  # half precisions: numpy has no bfloat16
        features = features.float()

    def flat(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> np.ndarray:
        array = as_array(tensor, dtype)
        return array.reshape(rows, *array.shape[2:])

    positions = _select_rows(
        flat(features),
        flat(unit, torch.float32),
        flat(energy, torch.float64),
        flat(scores, torch.float64),
        flat(forced),
        flat(valid),
        flat(budget, torch.int64),
        flat(index, torch.int64),
        float(threshold),
        float(radius),
        as_array(directions.T, torch.float64),
        int(segment_budget),
        float(rank_tol),
        float(energy_tol),
        width,
    )
    return torch.from_numpy(positions).reshape(batch, heads, width)


@numba.njit(cache=True, nogil=True)
def _select_rows(
    features,
    unit,
    energy,
    scores,
    forced,
    valid,
    budget,
    index,
    threshold,
    radius,
    fixed,
    segment_budget,
    rank_tol,
    energy_tol,
    width,
):  # pragma: no cover
    positions = np.empty((features.shape[0], width), dtype=np.int64)
    for r in range(features.shape[0]):
        pairs = _sweep_row(unit[r], valid[r], threshold, radius, fixed)
        kept = forced[r] & valid[r]
        closed = kept | ~valid[r]
        if pairs.shape[1]:  # core._has_better_duplicate: the later-ranked token of each pair
            priority = np.where(kept, np.inf, energy[r])
            closed |= _with_flagged_partner(pairs, np.ones_like(kept), _rank_of(priority), True)
        need = max(budget[r] - kept.sum(), 0)
        picked = np.zeros_like(kept)
        open_ = ~closed & (need > 0)
        _pivot_row_segments(features[r], kept, open_, need, segment_budget, rank_tol, energy_tol, picked)
        kept = _fill_by_score(kept | picked, scores[r], budget[r], pairs, valid[r])
        positions[r] = _ordered_positions(kept, index[r], budget[r], width)
    return positions


@numba.njit(cache=True, nogil=True)
def _rank_of(key):  # pragma: no cover
    """:func:`duplicates.rank_of`: each entry's place in the stable descending order of ``key``."""
    order = np.argsort(-key, kind="mergesort")  # stable ascending of -key: ties keep their order
    rank = np.empty(len(key), dtype=np.int64)
    rank[order] = np.arange(len(key))
    return rank


@numba.njit(cache=True, nogil=True)
def _with_flagged_partner(pairs, flag, rank, ranked):  # pragma: no cover
    """:meth:`duplicates.DuplicatePairs.of_any`: tokens with a ``flag``-ed near-duplicate (``ranked``: one
    placed before them by ``rank``, its ``before``)."""
    hit = np.zeros(len(flag), dtype=np.bool_)
    for e in range(pairs.shape[1]):
        a, b = pairs[0, e], pairs[1, e]
        if flag[a] and (not ranked or rank[a] < rank[b]):
            hit[b] = True
        if flag[b] and (not ranked or rank[b] < rank[a]):
            hit[a] = True
    return hit


@numba.njit(cache=True, nogil=True)
def _fill_by_score(kept, scores, budget, pairs, valid):  # pragma: no cover
    """:func:`core._fill_by_score` for one row: top up to ``budget`` by score, near-duplicates last."""
    need = budget - kept.sum()
    if need <= 0:
        return kept
    key = np.maximum(scores, 0.0) + 1.0  # > 0.5: ranks above the demoted near-duplicates
    key = np.where(kept, -1.0, key)
    key = np.where(valid, key, -2.0)
    if pairs.shape[1]:
        unranked = np.empty(0, dtype=np.int64)
        key = np.where(_with_flagged_partner(pairs, kept, unranked, False) & (key > 0.5), 0.5, key)
        for _ in range(_FILL_PASSES):  # each pass demotes the fillers that repeat a better one
            rank = _rank_of(key)
            filling = (rank < need) & (key > 0.5)
            repeats = _with_flagged_partner(pairs, filling, rank, True) & filling
            if not repeats.any():
                break
            key = np.where(repeats, 0.5, key)
    return kept | ((_rank_of(key) < need) & valid)


@numba.njit(cache=True, nogil=True)
def _ordered_positions(kept, index, budget, width):  # pragma: no cover
    """The end of :func:`core.select_from_candidates`: the first ``budget`` of the kept tokens then the
    others (pool order), their positions sorted, -1 up to ``width``."""
    order = np.concatenate((np.nonzero(kept)[0], np.nonzero(~kept)[0]))[:budget]
    out = np.full(width, -1, dtype=np.int64)
    out[: len(order)] = np.sort(index[order])
    return out
