"""SpectralKV across layers: attention concentration and exact-sum layer budgets.

:func:`attention_concentration` turns observation-window attention into ``c_l = 1 - H_l / log(m)`` (mean
row entropy, normalised by the number of candidate keys) and :func:`allocate_layer_budgets` water-fills a
fixed global budget with weights ``c_l ** gamma`` between a floor (sinks + window) and a cap (the context),
then rounds so the integers sum *exactly* to the total.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from neurips26.methods.spectralkv.features import cpu_kernels

__all__ = ["allocate_layer_budgets", "attention_concentration"]


def attention_concentration(
    window_attention: torch.Tensor,
    candidate_mask: torch.Tensor | slice,
    *,
    logits: torch.Tensor | None = None,
    compiled: bool = True,
) -> float:
    """Concentration ``c = 1 - mean_rows H(row) / log(m)`` of observation-window attention.

    Parameters
    ----------
    window_attention:
        ``(B, H_q, w, n)`` softmax rows of the last ``w`` queries over all ``n`` keys.
    candidate_mask:
        ``(n,)`` bool, the keys a budget decision is about (not sinks, not the window). Rows are
        renormalised over them, so a layer that parks its mass on the sink is judged by the rest. A
        ``slice(lo, hi)`` names the contiguous range ``[lo, hi)`` directly (the press's case: no mask to
        search, layer after layer).
    logits:
        optional ``(B, H_q, w, n)`` pre-softmax logits of ``window_attention`` (any value where it is
        masked): the entropy then needs no logarithm per entry, ``log a = z - log Z``.
    compiled:
        on CPU with ``logits`` and one contiguous range of candidates, sum each row in one compiled pass
        (:func:`kernels.mean_row_entropy`, float64 sums: equal to the torch path up to float32 rounding).

    Returns
    -------
    float in ``[0, 1]``: 1 when each row puts all its mass on one candidate key, 0 when uniform.
    """
    if isinstance(candidate_mask, slice):
        lo, hi = candidate_mask.start, candidate_mask.stop
        m = max(hi - lo, 0)
    else:
        m = int(candidate_mask.sum())
        where = torch.nonzero(candidate_mask).squeeze(-1)
        lo, hi = (int(where[0]), int(where[-1]) + 1) if m else (0, 0)
    if m <= 1:
        return 0.0
    kernels = (
        cpu_kernels(window_attention.device) if compiled and logits is not None and hi - lo == m else None
    )
    if kernels is not None:  # one compiled pass instead of a dozen full-size tensor operations
        entropy = kernels.mean_row_entropy(window_attention, logits, lo, hi)
        return min(max(1.0 - entropy / math.log(m), 0.0), 1.0)
    attention = window_attention.float()
    if hi - lo == m:  # the usual case (sinks, candidates, window): a view instead of a masked copy
        rows = attention[..., lo:hi]
        z = None if logits is None else logits.float()[..., lo:hi]
    else:
        rows = attention * candidate_mask.to(attention.device).float()
        z = None if logits is None else logits.float()
    mass = rows.sum(-1).clamp_min(1e-30)
    # H(a / S) = log S - sum(a log a) / S, without renormalising the rows; log a = z - log Z when the
    # logits are known (no logarithm per entry), else log on clamped entries (~2x faster than xlogy)
    if z is None:
        entropy = mass.log() - (rows * rows.clamp_min(1e-30).log()).sum(-1) / mass  # (B, H_q, w)
    else:
        entropy = mass.log() - torch.linalg.vecdot(rows, z) / mass + _log_normaliser(attention, logits)
    return float((1.0 - entropy.mean() / math.log(m)).clamp(0.0, 1.0))


def _log_normaliser(attention: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``log Z`` per row of ``attention = softmax(logits)``, from one entry: ``z_j - log a_j``. Token 0 is
    never masked by a causal window and is rarely tiny; a row where it underflows uses its largest entry."""
    log_z = logits[..., 0].float() - attention[..., 0].log()
    tiny = attention[..., 0] < 1e-30
    if bool(tiny.any()):  # only those rows are searched: an argmax over all rows costs more than the rest
        rows = attention[tiny]
        top = rows.argmax(-1, keepdim=True)
        log_z[tiny] = (logits[tiny].float().gather(-1, top) - rows.gather(-1, top).log()).squeeze(-1)
    return log_z


def allocate_layer_budgets(
    weights: torch.Tensor | list[float],
    total: int,
    floors: torch.Tensor | list[int],
    caps: torch.Tensor | list[int],
) -> torch.Tensor:
    """Water-fill ``total`` slots over layers in proportion to ``weights``, within ``[floor, cap]``.

    Finds ``t`` with ``sum_l clip(t * w_l, f_l, c_l) = total`` exactly, then rounds by largest
    remainder so the integer budgets sum exactly to ``total`` and stay within their bounds.

    Raises ``ValueError`` when ``total`` lies outside ``[sum(floors), sum(caps)]``.
    """
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    lo = np.asarray(floors, dtype=np.float64)
    hi = np.asarray(caps, dtype=np.float64)
    if not (w.shape == lo.shape == hi.shape) or w.ndim != 1 or len(w) == 0:
        raise ValueError(
            f"weights, floors and caps must be 1-D of one length, got {w.shape}, {lo.shape}, {hi.shape}"
        )
    if bool((lo > hi).any()):
        raise ValueError(f"every floor must be <= its cap, got floors={lo.tolist()} caps={hi.tolist()}")
    if not lo.sum() <= total <= hi.sum():
        raise ValueError(
            f"total budget {total} must lie in [sum(floors)={int(lo.sum())}, sum(caps)={int(hi.sum())}]"
        )
    if w.sum() == 0.0:
        w = np.ones_like(w)  # no signal: uniform weights
    w = w / w.max()  # the water level absorbs the scale
    return _round_to_total(np.clip(_water_level(w, lo, hi, total) * w, lo, hi), total, lo, hi)


def _water_level(w: np.ndarray, lo: np.ndarray, hi: np.ndarray, total: float) -> float:
    """The ``t`` where ``sum_l clip(t * w_l, lo_l, hi_l)`` reaches ``total``. The sum is piecewise linear
    in ``t`` with kinks where a layer meets its floor or cap, so it is evaluated at every kink and
    interpolated on the piece that crosses ``total``: exact, without iterating. Weights below 1e-12 of
    the largest count as zero (their kinks would overflow); rounding gives any rest to layers with room."""
    positive = w > 1e-12
    kinks = np.unique(np.concatenate([[0.0], lo[positive] / w[positive], hi[positive] / w[positive]]))
    filled = np.clip(kinks[:, None] * w, lo, hi).sum(-1)  # nondecreasing in t
    k = int(np.searchsorted(filled, total))
    if k == 0:
        return 0.0
    if k == len(kinks):  # zero-weight layers hold the rest; rounding gives it to those with room
        return float(kinks[-1])
    t0, t1, f0, f1 = kinks[k - 1], kinks[k], filled[k - 1], filled[k]
    return float(t0 + (total - f0) * (t1 - t0) / (f1 - f0))


def _round_to_total(real: np.ndarray, total: int, lo: np.ndarray, hi: np.ndarray) -> torch.Tensor:
    """Largest-remainder rounding of ``real`` to integers in ``[lo, hi]`` summing to ``total`` (numpy:
    a handful of layers, where torch's per-call overhead would dominate)."""
    budgets = np.clip(np.floor(real), lo, hi)
    remainder = real - budgets
    short = int(total - budgets.sum())
    while short != 0:  # at most two passes: the water level leaves |short| < number of layers
        if short > 0:
            room = budgets < hi
            order = np.argsort(-np.where(room, remainder, -1.0), kind="stable")
            take = order[: min(short, int(room.sum()))]
            budgets[take] += 1
        else:
            room = budgets > lo
            order = np.argsort(np.where(room, remainder, 2.0), kind="stable")
            take = order[: min(-short, int(room.sum()))]
            budgets[take] -= 1
        remainder[take] = 0.0
        short = int(total - budgets.sum())
    return torch.from_numpy(budgets.astype(np.int64))
