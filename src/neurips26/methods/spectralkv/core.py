"""SpectralKV on plain tensors: layer budgets by attention concentration, and a spectral coreset.

SpectralKV: entropy-guided layer budgets and spectral-coreset KV-cache compression (NeurIPS 2026).

Two independent steps, both training-free and batched over (batch, KV head):

* **Across layers** -- :func:`attention_concentration` turns observation-window attention into
  ``c_l = 1 - H_l / log(m)`` (mean row entropy, normalised by the number of candidate keys) and
  :func:`allocate_layer_budgets` water-fills a fixed global budget with weights ``c_l ** gamma`` between a
  floor (sinks + window) and a cap (the context), then rounds so the integers sum *exactly* to the total.
* **Within a layer** -- :func:`metric_features` embeds every token in a joint key-value space whose key
  part is aligned with the metric of the observation queries (``|| M^1/2 k ||^2`` is the mean squared
  logit), and :func:`select_coreset` keeps the forced tokens (sinks, window) and picks the rest by
  residual pivoting (:func:`pivoted_selection`, a batched greedy pivoted QR): each pick is the token whose
  feature is farthest from the span of what is already kept, so a near-duplicate of a kept token has a
  near-zero residual and is not picked.

Shapes: ``B`` batch, ``H`` KV heads, ``n`` tokens, ``d`` head dim, ``D = 2 d`` feature dim, ``L`` layers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "RANK_STRATEGIES",
    "Candidates",
    "DuplicatePairs",
    "allocate_layer_budgets",
    "attention_concentration",
    "coreset_candidates",
    "forced_token_mask",
    "metric_candidates",
    "metric_features",
    "near_duplicate_share",
    "pivoted_selection",
    "select_coreset",
    "select_from_candidates",
    "select_topk",
    "stack_candidates",
]

RANK_STRATEGIES = ("hybrid", "restart", "segments")
_RANK_TOL = 1e-6  # pivoted_selection's default: a residual below it is in the span already
_SWEEP_DIRECTIONS = 8  # DuplicatePairs.find screens pairs on this many orthonormal coordinates


# ---------------------------------------------------------------------------------------------------------
# Across layers
# ---------------------------------------------------------------------------------------------------------
def attention_concentration(
    window_attention: torch.Tensor, candidate_mask: torch.Tensor, *, logits: torch.Tensor | None = None
) -> float:
    """Concentration ``c = 1 - mean_rows H(row) / log(m)`` of observation-window attention.

    Parameters
    ----------
    window_attention:
        ``(B, H_q, w, n)`` softmax rows of the last ``w`` queries over all ``n`` keys.
    candidate_mask:
        ``(n,)`` bool, the keys a budget decision is about (not sinks, not the window). Rows are
        renormalised over them, so a layer that parks its mass on the sink is judged by the rest.
    logits:
        optional ``(B, H_q, w, n)`` pre-softmax logits of ``window_attention`` (any value where it is
        masked): the entropy then needs no logarithm per entry, ``log a = z - log Z``.

    Returns
    -------
    float in ``[0, 1]``: 1 when each row puts all its mass on one candidate key, 0 when uniform.
    """
    m = int(candidate_mask.sum())
    if m <= 1:
        return 0.0
    attention = window_attention.float()
    mask = candidate_mask.to(attention.device)
    where = torch.nonzero(mask).squeeze(-1)
    lo, hi = int(where[0]), int(where[-1]) + 1
    if hi - lo == m:  # the usual case (sinks, candidates, window): a view instead of a masked copy
        rows = attention[..., lo:hi]
        z = None if logits is None else logits.float()[..., lo:hi]
    else:
        rows = attention * mask.float()
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


# ---------------------------------------------------------------------------------------------------------
# Within a layer
# ---------------------------------------------------------------------------------------------------------
def metric_features(
    keys: torch.Tensor,
    values: torch.Tensor,
    window_queries: torch.Tensor,
    *,
    value_weight: float = 1.0,
    scores: torch.Tensor | None = None,
    score_power: float = 1.0,
    window_logits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Joint feature ``phi_i = s_i^(beta/2) [M^1/2 k_i ; lambda v_i]`` per KV head.

    ``M = Q^T Q / |Q|`` is the second moment of the observation queries of the head's GQA group, so
    ``||M^1/2 k||^2 = mean_q (q . k)^2``: distances in the key part are distances in logit space.
    ``lambda = value_weight * ||K M^1/2||_F / ||V||_F`` gives the value part the same energy.

    Parameters
    ----------
    keys, values:
        ``(B, H, n, d)`` cached (post-RoPE) keys and values.
    window_queries:
        ``(B, H, g*w, d)`` post-RoPE observation queries grouped by KV head.
    scores:
        optional ``(B, H, n)`` non-negative importance (observed attention); weights the features.
    window_logits:
        optional ``(B, H*g, w, n)`` pre-softmax logits ``q . k / sqrt(d)`` of the same queries (the press
        has them from the window attention); the key part is then read off them instead of recomputed.

    Returns
    -------
    ``(B, H, n, 2d)`` float32 features.
    """
    key_part = _KeyPart(keys, window_queries, window_logits)
    everything = torch.arange(keys.shape[2], device=keys.device).expand(keys.shape[:3])
    value_scale = _value_scale(key_part, values.float().pow(2).sum(-1), value_weight)
    return _assemble_features(key_part, values, everything, value_scale, _score_weight(scores, score_power))


class _KeyPart:
    """The metric-aligned key part ``M^1/2 k`` (up to a rotation): its per-token energy, and its rows.

    ``Q k / sqrt(|Q|)`` has the same Gram matrix as ``M^1/2 k`` (``k_i^T Q^T Q k_j / |Q|``) in ``g*w``
    dims without an eigendecomposition, and pivoting depends on the Gram matrix only. The window logits
    are ``Q k / sqrt(d)``: when given they *are* the key part up to a scale, so nothing is recomputed and
    only the rows of the candidate pool are ever materialised.
    """

    def __init__(
        self, keys: torch.Tensor, window_queries: torch.Tensor, window_logits: torch.Tensor | None
    ) -> None:
        q = window_queries.float()
        batch, heads, n, d = keys.shape
        self._logits = None
        if window_logits is not None and q.shape[-2] <= d:
            queries_per_head = q.shape[-2]
            self._logits = window_logits.float().reshape(batch, heads, queries_per_head, n)
            self._scale = math.sqrt(d / queries_per_head)
            self.energy = self._logits.pow(2).sum(-2) * self._scale**2  # (B, H, n)
            return
        if q.shape[-2] <= d:
            self._full = keys.float() @ q.transpose(-1, -2) / math.sqrt(q.shape[-2])
        else:  # more queries than dims: M^1/2 itself keeps the key part in d dims
            metric = q.transpose(-1, -2) @ q / q.shape[-2]  # (B, H, d, d)
            eigval, eigvec = torch.linalg.eigh(metric)
            root = eigvec @ torch.diag_embed(eigval.clamp_min(0.0).sqrt()) @ eigvec.transpose(-1, -2)
            self._full = keys.float() @ root
        self.energy = self._full.pow(2).sum(-1)

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """``(B, H, P, dims)`` key-part rows of the tokens ``index`` ``(B, H, P)``."""
        if self._logits is None:
            return self._full.gather(-2, index.unsqueeze(-1).expand(*index.shape, self._full.shape[-1]))
        picked = self._logits.gather(
            -1, index.unsqueeze(-2).expand(*self._logits.shape[:-1], index.shape[-1])
        )
        return picked.transpose(-1, -2) * self._scale


def _score_weight(scores: torch.Tensor | None, score_power: float) -> torch.Tensor | None:
    """Per-token feature weight ``s^(beta/2)``, or None for unweighted features."""
    if scores is None or score_power == 0.0:
        return None
    return scores.float().clamp_min(0.0).pow(score_power / 2)


def _value_scale(key_part: _KeyPart, value_energy: torch.Tensor, value_weight: float) -> torch.Tensor:
    """``lambda`` ``(B, H, 1, 1)``: the value part gets ``value_weight`` times the key part's energy
    (``value_energy`` ``(B, H, n)``: ``||v_i||^2``)."""
    energy_k = key_part.energy.sum(-1).sqrt()
    energy_v = value_energy.sum(-1).sqrt().clamp_min(1e-12)
    return (value_weight * energy_k / energy_v)[..., None, None]


def _assemble_features(
    key_part: _KeyPart,
    values: torch.Tensor,
    index: torch.Tensor,
    value_scale: torch.Tensor,
    weight: torch.Tensor | None,
) -> torch.Tensor:
    """Features ``(B, H, P, dims + d)`` of the tokens ``index`` ``(B, H, P)``."""
    v = values.float().gather(-2, index.unsqueeze(-1).expand(*index.shape, values.shape[-1]))
    features = torch.cat([key_part.rows(index), value_scale * v], dim=-1)
    if weight is not None:
        features = features * weight.gather(-1, index).unsqueeze(-1)
    return features


def forced_token_mask(n: int, n_sink: int, window: int, device: torch.device | None = None) -> torch.Tensor:
    """``(n,)`` bool: the first ``n_sink`` and the last ``window`` tokens, which every budget keeps."""
    mask = torch.zeros(n, dtype=torch.bool, device=device)
    mask[: min(n_sink, n)] = True
    if window > 0:
        mask[max(0, n - window) :] = True
    return mask


def pivoted_selection(
    features: torch.Tensor,
    k: int | torch.Tensor,
    *,
    chosen: torch.Tensor | None = None,
    excluded: torch.Tensor | None = None,
    block_size: int = 1,
    block_cosine: float = 0.5,
    rank_tol: float = 1e-6,
    energy_tol: float = 0.0,
    scale_sq: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy residual pivoting (pivoted QR, Businger-Golub) batched over the leading dims.

    Residuals start orthogonal to the features of the ``chosen`` tokens; each step picks
    ``argmax_i ||r_i||^2`` among tokens neither chosen nor ``excluded``, appends it, and removes its
    residual direction ``q`` from every residual (``||r_i||^2 -= (phi_i . q)^2``, valid because ``q`` is
    orthogonal to all earlier directions). With ``block_size=1`` and no ``chosen``/``excluded`` tokens the
    pivot order equals LAPACK ``geqp3``'s (``scipy.linalg.qr(phi.T, pivoting=True)``).

    ``block_size=b > 1`` is the blocked variant (ours, for speed): each round ranks the ``2b`` largest
    residuals, drops a candidate whose residual has ``|cos| >= block_cosine`` with a higher-ranked one
    (it would have lost most of its residual to that pick), takes the first ``b`` survivors and deflates
    them together -- ``k / b`` passes over the ``n`` tokens instead of ``k``.

    Parameters
    ----------
    features:
        ``(..., n, D)``.
    k:
        Pivots to pick per batch element (an int, or a tensor shaped like the leading dims).
    chosen, excluded:
        ``(..., n)`` bool masks, or None.
    rank_tol:
        A candidate whose residual norm^2 is below ``rank_tol * max_i ||phi_i||^2`` is never picked: it
        lies in the span of the picked tokens (rank exhausted).
    energy_tol:
        Stop (as exhausted) once the residual energy of the unpicked tokens is at most ``energy_tol`` times
        its value before the first pick: the span of the picks already holds the rest.
    scale_sq:
        Optional ``(...)`` squared norm that ``rank_tol`` is relative to; default ``max_i ||phi_i||^2``
        (a caller that passes a subset of the tokens passes the full set's scale to get the same picks).

    Returns
    -------
    picked:
        ``(..., n)`` bool, the newly picked tokens (``chosen`` not included).
    exhausted:
        ``(...)`` bool, True where the rank ran out before ``k`` picks.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    lead, (n, dim) = features.shape[:-2], features.shape[-2:]
    # float64 for the exact variant: the norm downdate loses ~1 digit per 10 steps
    phi = features.reshape(-1, n, dim).to(_pivot_dtype(block_size))
    batch = phi.shape[0]
    taken = torch.zeros(batch, n, dtype=torch.bool, device=phi.device)
    if chosen is not None:
        taken |= chosen.reshape(batch, n)
    blocked = taken.clone()
    if excluded is not None:
        blocked |= excluded.reshape(batch, n)
    basis = _orthonormal_basis(phi, taken, rank_tol)  # (batch, r0, D): directions already covered
    norms_sq = phi.pow(2).sum(-1)
    residual_sq = norms_sq - (phi @ basis.transpose(1, 2)).pow(2).sum(-1)
    scale = norms_sq.amax(-1) if scale_sq is None else scale_sq.reshape(batch).to(phi.dtype)
    floor = rank_tol * scale.unsqueeze(-1).clamp_min(1e-300)  # (batch, 1)
    initial_energy = residual_sq.masked_fill(blocked, 0.0).sum(-1)
    k = torch.as_tensor(k, device=phi.device).expand(lead).reshape(batch).clone()
    # a pick beyond the feature rank cannot have a residual
    rank_left = dim - (basis.abs().amax(-1) > 0).sum(-1)
    # per-row state; rows are independent, so a finished row is retired from the batch (same picks, no
    # work spent on it while the slowest row -- e.g. the layer with the largest budget -- goes on)
    live = _PivotRows(
        rows=torch.arange(batch, device=phi.device),
        phi=phi,
        blocked=blocked,
        basis=basis,
        residual_sq=residual_sq,
        floor=floor,
        initial_energy=initial_energy,
        k=k,
        rank_left=rank_left,
        picked=torch.zeros_like(taken),
        count=torch.zeros(batch, dtype=torch.long, device=phi.device),
        exhausted=torch.zeros(batch, dtype=torch.bool, device=phi.device),
    )
    picked = torch.zeros_like(taken)
    count = torch.zeros(batch, dtype=torch.long, device=phi.device)
    exhausted = torch.zeros(batch, dtype=torch.bool, device=phi.device)
    while True:
        s = live
        if energy_tol > 0:
            energy = s.residual_sq.masked_fill(s.blocked, 0.0).sum(-1)
            s.exhausted |= (energy <= energy_tol * s.initial_energy) & (s.count < s.k)
        want = torch.minimum(s.k - s.count, s.rank_left - s.count).clamp_min(0)
        running = (want > 0) & ~s.exhausted
        if not bool(running.all()):
            _retire(s, ~running, picked, count, exhausted)
            if not bool(running.any()):
                break
            live = s = s.subset(running)
            want = want[running]
        masked = s.residual_sq.masked_fill(s.blocked, -1.0)
        top_sq, top = masked.topk(min(2 * block_size if block_size > 1 else 1, n), dim=-1)
        residual = _residual_rows(s.phi, top, s.basis)  # (rows, m, D)
        valid = top_sq > s.floor
        if block_size > 1:
            valid &= ~_shadowed_by_higher_rank(residual, block_cosine)
        rank = valid.long().cumsum(-1)
        take = valid & (rank <= torch.minimum(want, torch.full_like(want, block_size)).unsqueeze(-1))
        s.exhausted |= ~valid.any(-1)
        if not bool(take.any()):
            continue  # every running row is exhausted now and retires on the next pass
        directions = _orthonormal_columns(residual * take.unsqueeze(-1), block_size)  # zero rows unused
        s.residual_sq = s.residual_sq - (s.phi @ directions.transpose(1, 2)).pow(2).sum(-1)
        s.basis = torch.cat([s.basis, directions], dim=1)
        at = torch.arange(len(s.rows), device=phi.device).unsqueeze(-1).expand_as(top)
        s.picked[at[take], top[take]] = True
        s.blocked[at[take], top[take]] = True
        s.count += take.sum(-1)
    exhausted |= (count < k) & (count >= rank_left)
    return picked.reshape(*lead, n), exhausted.reshape(lead)


def _pivot_dtype(block_size: int) -> torch.dtype:
    """float64 for the exact variant (the norm downdate loses ~1 digit per 10 steps), else float32."""
    return torch.float64 if block_size == 1 else torch.float32


@dataclass
class _PivotRows:
    """The pivoting state of the rows still running (``rows`` are their positions in the full batch)."""

    rows: torch.Tensor
    phi: torch.Tensor
    blocked: torch.Tensor
    basis: torch.Tensor
    residual_sq: torch.Tensor
    floor: torch.Tensor
    initial_energy: torch.Tensor
    k: torch.Tensor
    rank_left: torch.Tensor
    picked: torch.Tensor
    count: torch.Tensor
    exhausted: torch.Tensor

    def subset(self, keep: torch.Tensor) -> _PivotRows:
        return _PivotRows(**{name: value[keep] for name, value in vars(self).items()})


def _retire(
    state: _PivotRows, done: torch.Tensor, picked: torch.Tensor, count: torch.Tensor, exhausted: torch.Tensor
) -> None:
    """Copy the finished rows' results into the full-batch outputs."""
    rows = state.rows[done]
    picked[rows] = state.picked[done]
    count[rows] = state.count[done]
    exhausted[rows] = state.exhausted[done]


def _take_rows(phi: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``phi[b, index[b]]`` ``(batch, m, D)``; advanced indexing copies ~2x faster than an expanded gather."""
    return phi[torch.arange(phi.shape[0], device=phi.device).unsqueeze(-1), index]


def _residual_rows(phi: torch.Tensor, index: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` of ``phi`` with their component in the span of ``basis`` removed."""
    rows = _take_rows(phi, index)
    if basis.shape[1] == 0:
        return rows
    return rows - (rows @ basis.transpose(1, 2)) @ basis


def _shadowed_by_higher_rank(residual: torch.Tensor, threshold: float) -> torch.Tensor:
    """``(batch, m)`` bool: candidates nearly parallel (|cos| >= threshold) to a higher-ranked candidate."""
    unit = residual / residual.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    cos = (unit @ unit.transpose(1, 2)).abs()
    higher = torch.ones(cos.shape[-1], cos.shape[-1], dtype=torch.bool, device=cos.device).tril(-1)
    return ((cos >= threshold) & higher).any(-1)


def _orthonormal_columns(rows: torch.Tensor, at_most: int) -> torch.Tensor:
    """``(batch, at_most, D)`` orthonormal rows spanning the (at most ``at_most``) non-zero rows of
    ``rows`` (batch, m, D); unused rows are zero."""
    nonzero = rows.abs().amax(-1) > 0
    # compact the non-zero rows to the front: QR's column j is orthogonalised against columns < j, which
    # must all be real directions (a zero column would contribute an arbitrary q)
    order = torch.argsort(nonzero.to(torch.int8), dim=-1, descending=True, stable=True)
    order = order[:, : min(at_most, rows.shape[-1])]  # never more than D directions
    rows = rows.gather(1, order.unsqueeze(-1).expand(-1, -1, rows.shape[-1]))
    nonzero = nonzero.gather(1, order)
    q, r = torch.linalg.qr(rows.transpose(1, 2))  # (batch, D, m), (batch, m, m)
    keep = nonzero & (r.diagonal(dim1=-2, dim2=-1).abs() > 0)
    return (q * keep.unsqueeze(1)).transpose(1, 2)


def _orthonormal_basis(phi: torch.Tensor, mask: torch.Tensor, rank_tol: float) -> torch.Tensor:
    """An orthonormal basis (rows) of the span of the masked rows of ``phi``; zero rows pad the batch."""
    batch, _, dim = phi.shape
    count = int(mask.sum(-1).max()) if mask.any() else 0
    if count == 0:
        return phi.new_zeros(batch, 0, dim)
    order = torch.argsort(mask.to(torch.int8), dim=-1, descending=True, stable=True)[:, :count]
    rows = phi.gather(1, order.unsqueeze(-1).expand(-1, -1, dim))
    rows = rows * mask.gather(1, order).unsqueeze(-1)
    # the Gram matrix of the few rows, in float64, instead of an SVD of the (D x count) matrix (rows are
    # often rank-deficient -- sinks and window repeat directions -- where QR alone is not a basis)
    gram = rows.double() @ rows.double().transpose(1, 2)
    eigval, eigvec = torch.linalg.eigh(gram)  # (batch, count), (batch, count, count)
    scale_sq = rank_tol * rows.double().pow(2).sum(-1).amax(-1, keepdim=True).clamp_min(1e-300)
    real = eigval > scale_sq
    inverse_root = torch.where(real, eigval.clamp_min(1e-300).rsqrt(), torch.zeros_like(eigval))
    basis = (eigvec * inverse_root.unsqueeze(1)).transpose(1, 2) @ rows.double()  # orthonormal rows
    return basis.to(phi.dtype)


def select_topk(scores: torch.Tensor, budget: int, forced: torch.Tensor) -> torch.Tensor:
    """``(B, H, budget)`` sorted indices: the forced tokens plus the highest scores (SnapKV's rule)."""
    keyed = scores.float().masked_fill(forced, float("inf"))
    return keyed.topk(budget, dim=-1).indices.sort(-1).values


@dataclass
class Candidates:
    """The pool a coreset is chosen from, per (batch row, head); rows may be stacked layers.

    ``index`` ``(B, H, P)`` token positions (sorted), ``features`` ``(B, H, P, D)``, ``scores`` ``(B, H, P)``,
    ``forced`` / ``valid`` ``(B, H, P)`` bool (padding is invalid), ``budget`` ``(B, H)`` tokens to keep.
    """

    index: torch.Tensor
    features: torch.Tensor
    scores: torch.Tensor
    forced: torch.Tensor
    valid: torch.Tensor
    budget: torch.Tensor


def coreset_candidates(
    features: torch.Tensor,
    scores: torch.Tensor,
    budget: int,
    forced: torch.Tensor,
    pool_factor: float | None = None,
) -> Candidates:
    """The forced tokens plus the ``ceil(pool_factor * budget)`` largest score-weighted feature energies.

    Pivoting then costs ``O(P k D)`` whatever the context length; a token outside the pool has less
    weighted energy than ``P - budget`` unkept candidates, so the greedy would rarely reach it. With
    ``pool_factor=None`` every token is a candidate (exact).
    """
    batch, heads, n, dim = features.shape
    _check_budget(budget, n)
    forced = _forced_within_budget(forced, budget)
    index = _pool_index(features.float().pow(2).sum(-1), forced, budget, pool_factor)
    return Candidates(
        index=index,
        features=features.gather(-2, index.unsqueeze(-1).expand(-1, -1, -1, dim)),
        scores=scores.gather(-1, index),
        forced=forced[index],
        valid=torch.ones_like(index, dtype=torch.bool),
        budget=torch.full((batch, heads), budget, dtype=torch.long, device=features.device),
    )


def metric_candidates(
    keys: torch.Tensor,
    values: torch.Tensor,
    window_queries: torch.Tensor,
    scores: torch.Tensor,
    budget: int,
    forced: torch.Tensor,
    *,
    pool_factor: float | None = None,
    value_weight: float = 1.0,
    feature_scores: torch.Tensor | None = None,
    score_power: float = 1.0,
    window_logits: torch.Tensor | None = None,
    compiled: bool = True,
) -> Candidates:
    """``coreset_candidates(metric_features(...), ...)`` without the features of tokens outside the pool.

    The pool is ranked by feature energy, which is known per token without the features
    (``w_i^2 (||M^1/2 k_i||^2 + lambda^2 ||v_i||^2)``), so only the ``P`` pool rows are assembled: with
    the window logits given the key part costs no matmul at all. ``feature_scores`` weight the features
    (``metric_features``'s ``scores``), ``scores`` rank the hybrid fill (``coreset_candidates``'s). On
    CPU with the logits as key part (``compiled``) the pool is built by :func:`kernels.pool_from_logits`.
    """
    batch, heads, n, _ = keys.shape
    _check_budget(budget, n)
    forced = _forced_within_budget(forced, budget)
    weight = _score_weight(feature_scores, score_power)
    queries_per_head, d = window_queries.shape[-2:]
    kernels = _cpu_kernels(keys.device) if compiled and window_logits is not None else None
    if kernels is not None and queries_per_head <= d:
        index, features = kernels.pool_from_logits(
            window_logits.reshape(batch, heads, queries_per_head, n),
            values,
            weight,
            forced,
            _pool_size(budget, n, pool_factor),
            math.sqrt(d / queries_per_head),
            value_weight,
        )
    else:
        key_part = _KeyPart(keys, window_queries, window_logits)
        value_energy = values.float().pow(2).sum(-1)
        value_scale = _value_scale(key_part, value_energy, value_weight)
        energy = key_part.energy + value_scale[..., 0].pow(2) * value_energy
        if weight is not None:
            energy = energy * weight.pow(2)
        index = _pool_index(energy, forced, budget, pool_factor)
        features = _assemble_features(key_part, values, index, value_scale, weight)
    return Candidates(
        index=index,
        features=features,
        scores=scores.gather(-1, index),
        forced=forced[index],
        valid=torch.ones_like(index, dtype=torch.bool),
        budget=torch.full((batch, heads), budget, dtype=torch.long, device=keys.device),
    )


def _pool_index(
    energy: torch.Tensor, forced: torch.Tensor, budget: int, pool_factor: float | None
) -> torch.Tensor:
    """``(B, H, P)`` sorted positions of the forced tokens plus the largest ``energy``."""
    batch, heads, n = energy.shape
    size = _pool_size(budget, n, pool_factor)
    if size == n:
        return torch.arange(n, device=energy.device).expand(batch, heads, n).contiguous()
    return energy.masked_fill(forced, float("inf")).topk(size, dim=-1).indices.sort(-1).values


def _pool_size(budget: int, n: int, pool_factor: float | None) -> int:
    return n if pool_factor is None else min(n, max(budget, math.ceil(pool_factor * budget)))


def _check_budget(budget: int, n: int) -> None:
    if not 1 <= budget <= n:
        raise ValueError(f"budget must be in [1, n={n}], got {budget}")


def stack_candidates(parts: list[Candidates]) -> Candidates:
    """Concatenate candidate pools along the batch dim (e.g. all layers), padding pools to one size."""
    size = max(part.index.shape[-1] for part in parts)

    def pad(tensor: torch.Tensor, value: float | bool, dims: int) -> torch.Tensor:
        missing = size - tensor.shape[-dims]
        widths = [0, 0] * (dims - 1) + [0, missing]
        return torch.nn.functional.pad(tensor, widths, value=value) if missing else tensor

    return Candidates(
        index=torch.cat([pad(p.index, 0, 1) for p in parts]),
        features=torch.cat([pad(p.features, 0.0, 2) for p in parts]),
        scores=torch.cat([pad(p.scores, 0.0, 1) for p in parts]),
        forced=torch.cat([pad(p.forced, False, 1) for p in parts]),
        valid=torch.cat([pad(p.valid, False, 1) for p in parts]),
        budget=torch.cat([p.budget for p in parts]),
    )


def select_from_candidates(
    candidates: Candidates,
    *,
    strategy: str = "hybrid",
    duplicate_cosine: float = 0.999,
    block_size: int = 1,
    energy_tol: float = 0.0,
    segment_budget: int = 64,
) -> torch.Tensor:
    """Residual pivoting over each row's pool, then the rank fallback (see :func:`select_coreset`).

    Returns ``(B, H, max budget)`` sorted token positions; a row with a smaller budget is padded with -1.
    """
    if strategy not in RANK_STRATEGIES:
        raise ValueError(f"strategy must be one of {RANK_STRATEGIES}, got {strategy!r}")
    c = candidates
    kept = c.forced & c.valid
    unit = c.features / c.features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    duplicates = DuplicatePairs.find(unit, c.valid, duplicate_cosine)
    options = {"block_size": block_size, "energy_tol": energy_tol}
    if strategy == "segments":
        need = (c.budget - kept.sum(-1)).clamp_min(0)
        closed = kept | ~c.valid | _has_better_duplicate(c.features, kept, duplicates)
        kept |= _segment_picks(c.features, kept, closed, need, segment_budget, energy_tol)
    else:
        kept = _pivoting_rounds(c, kept, duplicates, strategy, options)
    kept = _fill_by_score(kept, c.scores, c.budget, duplicates, c.valid)
    width = int(c.budget.max())
    order = torch.argsort(kept.to(torch.int8), dim=-1, descending=True, stable=True)[..., :width]
    positions = c.index.gather(-1, order)
    real = torch.arange(width, device=positions.device) < c.budget.unsqueeze(-1)
    n_max = int(c.index.max()) + 1
    ordered = (
        torch.where(real, positions, n_max + torch.arange(width, device=positions.device)).sort(-1).values
    )
    return ordered.masked_fill(~real, -1)


def _pivoting_rounds(
    c: Candidates, kept: torch.Tensor, duplicates: DuplicatePairs, strategy: str, options: dict
) -> torch.Tensor:
    """Pivoting from the forced tokens until the span is covered; ``"restart"`` then pivots again over the
    tokens not kept yet, round after round, until the budget is full."""
    for round_ in range(c.index.shape[-1]):  # "hybrid" needs one round, "restart" one per ~D picks
        need = (c.budget - kept.sum(-1)).clamp_min(0)
        if not bool(need.any()):
            break
        if round_ == 0:  # complements the forced tokens (a duplicate of one has no residual)
            picked, _ = pivoted_selection(c.features, need, chosen=kept, excluded=kept | ~c.valid, **options)
        else:  # a restart resets residuals to the full features, so repeats of kept tokens are closed
            closed = kept | ~c.valid | duplicates.of_any(kept)
            picked = _restart_round(c.features, closed, need, options)
        kept = kept | picked
        if strategy == "hybrid" or not bool(picked.any()):
            break
    return kept


def _restart_round(
    features: torch.Tensor, closed: torch.Tensor, need: torch.Tensor, options: dict
) -> torch.Tensor:
    """One restart round of :func:`pivoted_selection` on the rows that still need picks and only the
    tokens still open in them (not ``closed``): the pool shrinks as the budget fills, with the same picks
    as pivoting over the whole pool with the closed ones excluded. Returns ``(B, H, P)`` bool."""
    batch, heads, size, dim = features.shape
    open_ = (~closed).reshape(batch * heads, size)
    rows = torch.nonzero(need.reshape(-1) > 0).squeeze(-1)
    picked = torch.zeros_like(open_)
    width = int(open_[rows].sum(-1).max()) if len(rows) else 0
    if width == 0:
        return picked.reshape(closed.shape)
    order = torch.argsort(open_[rows].to(torch.int8), dim=-1, descending=True, stable=True)[:, :width]
    flat = features.reshape(batch * heads, size, dim)[rows]
    sub = flat.gather(1, order.unsqueeze(-1).expand(-1, -1, dim))
    padding = ~open_[rows].gather(1, order)  # of rows with fewer open tokens
    chosen, _ = pivoted_selection(
        sub,
        need.reshape(-1)[rows],
        excluded=padding,
        scale_sq=flat.to(_pivot_dtype(options["block_size"])).pow(2).sum(-1).amax(-1),
        **options,
    )
    picked[rows] = torch.zeros_like(open_[rows]).scatter(1, order, chosen & ~padding)
    return picked.reshape(closed.shape)


def _has_better_duplicate(
    features: torch.Tensor, kept: torch.Tensor, duplicates: DuplicatePairs
) -> torch.Tensor:
    """``(B, H, P)`` bool: tokens with a near-duplicate that is kept or has more feature energy (ties: the
    earlier token wins), so each cluster of repeats keeps one representative open."""
    if duplicates.empty:
        return torch.zeros_like(kept)
    priority = features.pow(2).sum(-1).double().masked_fill(kept, float("inf"))
    return duplicates.of_any(torch.ones_like(kept), before=_rank_of(priority))


def _cpu_kernels(device: torch.device) -> Any:
    """The compiled kernels module for CPU tensors, or ``None`` (another device, or numba not installed:
    the batched torch path computes the same result)."""
    if device.type != "cpu":
        return None
    try:
        from neurips26.methods.spectralkv import kernels
    except ImportError:
        return None
    return kernels


def _segment_picks(
    features: torch.Tensor,
    kept: torch.Tensor,
    closed: torch.Tensor,
    need: torch.Tensor,
    segment_budget: int,
    energy_tol: float,
    *,
    compiled: bool = True,
) -> torch.Tensor:
    """The ``"segments"`` strategy: deal each row's open tokens, in context order, into
    ``ceil(need / segment_budget)`` strided segments (token ``j`` of them to segment ``j mod c``), give
    each an equal share of the row's ``need``, and pivot every segment exactly over the features'
    residuals orthogonal to the kept tokens. Every segment samples the whole context, and a share of at
    most ``segment_budget`` (below the feature rank) keeps every pick a real residual pivot. Returns
    ``(B, H, P)`` bool picks; on CPU (``compiled``) by :func:`kernels.pivot_segments`."""
    if segment_budget < 1:
        raise ValueError(f"segment_budget must be >= 1, got {segment_budget}")
    batch, heads, size, dim = features.shape
    rows = batch * heads
    flat, kept = features.reshape(rows, size, dim), kept.reshape(rows, size)
    need = need.reshape(rows)
    open_ = ~closed.reshape(rows, size) & (need > 0).unsqueeze(-1)
    kernels = _cpu_kernels(features.device) if compiled else None
    if kernels is not None:
        picked = kernels.pivot_segments(flat, kept, open_, need, segment_budget, _RANK_TOL, energy_tol)
    else:
        flat = flat.double()
        basis = _orthonormal_basis(flat, kept, rank_tol=_RANK_TOL)
        residual = flat - (flat @ basis.transpose(1, 2)) @ basis if basis.shape[1] else flat
        scale_sq = flat.pow(2).sum(-1).amax(-1)
        picked = _pivot_segments_batched(residual, open_, need, segment_budget, scale_sq, energy_tol)
    return picked.reshape(closed.shape)


def _pivot_segments_batched(
    residual: torch.Tensor,
    open_: torch.Tensor,
    need: torch.Tensor,
    segment_budget: int,
    scale_sq: torch.Tensor,
    energy_tol: float,
) -> torch.Tensor:
    """:func:`kernels.pivot_segments` in batched torch: the segments of all rows stacked on the batch dim."""
    rows, _, dim = residual.shape
    n_open = open_.sum(-1)
    count = torch.minimum((need + segment_budget - 1) // segment_budget, n_open).masked_fill(need <= 0, 0)
    if int(count.sum()) == 0:
        return torch.zeros_like(open_)
    open_ = open_ & (count > 0).unsqueeze(-1)
    first_segment = count.cumsum(0) - count
    row_of = torch.repeat_interleave(torch.arange(rows, device=residual.device), count)
    t = torch.arange(len(row_of), device=residual.device) - first_segment[row_of]
    share = (need[row_of] * (t + 1)) // count[row_of] - (need[row_of] * t) // count[row_of]
    token_row, token = torch.nonzero(open_, as_tuple=True)
    rank = (open_.long().cumsum(-1) - 1)[token_row, token]  # among the row's open tokens
    segment = first_segment[token_row] + rank % count[token_row]
    slot = rank // count[token_row]
    stacked = residual.new_zeros(len(row_of), int(slot.max()) + 1, dim)
    stacked[segment, slot] = residual[token_row, token]
    padding = torch.ones(stacked.shape[:2], dtype=torch.bool, device=residual.device)
    padding[segment, slot] = False
    chosen, _ = pivoted_selection(
        stacked, share, excluded=padding, scale_sq=scale_sq[row_of], rank_tol=_RANK_TOL, energy_tol=energy_tol
    )
    picked = torch.zeros_like(open_)
    picked[token_row, token] = chosen[segment, slot]
    return picked


def select_coreset(
    features: torch.Tensor,
    scores: torch.Tensor,
    budget: int,
    forced: torch.Tensor,
    *,
    strategy: str = "hybrid",
    duplicate_cosine: float = 0.999,
    block_size: int = 1,
    pool_factor: float | None = None,
    energy_tol: float = 0.0,
    segment_budget: int = 64,
) -> torch.Tensor:
    """Spectral coreset of ``budget`` tokens per (batch, head): forced tokens, then residual pivoting.

    The joint feature space has rank at most ``D``, while budgets often exceed it. Once pivoting has
    covered the span (every residual ~0):

    * ``"hybrid"`` fills the remaining slots by ``scores`` (heavy hitters), skipping tokens whose
      feature is a near-duplicate (cosine >= ``duplicate_cosine``) of a kept one while others remain;
    * ``"restart"`` starts a new pivoting round on the full features of the not-yet-kept, non-duplicate
      tokens (residuals reset), so every round again picks the most distinct directions left.

    Parameters
    ----------
    features:
        ``(B, H, n, D)`` from :func:`metric_features`.
    scores:
        ``(B, H, n)`` importance used by the hybrid fill and as the last-resort tie-break.
    budget:
        tokens kept per (batch, head), ``1 <= budget <= n``.
    forced:
        ``(n,)`` bool tokens always kept (sinks, window); trimmed to the newest ``budget`` if larger.
    block_size, pool_factor, energy_tol:
        speed knobs (see :func:`pivoted_selection` and :func:`coreset_candidates`); 1, None and 0 are exact.

    Returns
    -------
    ``(B, H, budget)`` sorted token indices.
    """
    if strategy not in RANK_STRATEGIES:
        raise ValueError(f"strategy must be one of {RANK_STRATEGIES}, got {strategy!r}")
    batch, heads, n, _ = features.shape
    if budget == n:
        return torch.arange(n, device=features.device).expand(batch, heads, n).contiguous()
    candidates = coreset_candidates(features, scores, budget, forced, pool_factor)
    return select_from_candidates(
        candidates,
        strategy=strategy,
        duplicate_cosine=duplicate_cosine,
        block_size=block_size,
        energy_tol=energy_tol,
        segment_budget=segment_budget,
    )


def _forced_within_budget(forced: torch.Tensor, budget: int) -> torch.Tensor:
    """The forced mask, trimmed from the oldest window tokens inward if it exceeds the budget."""
    if int(forced.sum()) <= budget:
        return forced.clone()
    idx = torch.nonzero(forced).squeeze(-1)
    trimmed = torch.zeros_like(forced)
    trimmed[idx[-budget:]] = True  # the most recent tokens win: the window matters most for decoding
    return trimmed


def _fill_by_score(
    kept: torch.Tensor,
    scores: torch.Tensor,
    budget: torch.Tensor,
    duplicates: DuplicatePairs,
    valid: torch.Tensor,
) -> torch.Tensor:
    """Top up every head to its ``budget`` by score; near-duplicates (of kept tokens or of a
    higher-scored filler) go last, so they are used only once distinct tokens run out."""
    need = (budget - kept.sum(-1)).clamp_min(0)
    if int(need.max()) <= 0:
        return kept
    key = scores.double().clamp_min(0.0) + 1.0  # > 0.5: ranks above the demoted near-duplicates
    key = key.masked_fill(kept, -1.0).masked_fill(~valid, -2.0)
    key = key.masked_fill(duplicates.of_any(kept) & (key > 0.5), 0.5)
    # each pass demotes the fillers that duplicate a better one; rarely more than one
    for _ in range(0 if duplicates.empty else 8):
        rank = _rank_of(key)
        filling = (rank < need.unsqueeze(-1)) & (key > 0.5)
        repeats = duplicates.of_any(filling, before=rank) & filling
        if not bool(repeats.any()):
            break
        key = key.masked_fill(repeats, 0.5)
    return kept | ((_rank_of(key) < need.unsqueeze(-1)) & valid)


def _rank_of(key: torch.Tensor) -> torch.Tensor:
    """Position of every entry in the descending (stable) order of ``key`` along the last dim."""
    order = torch.argsort(key, dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    return rank


@dataclass
class DuplicatePairs:
    """The near-duplicate relation of a candidate pool: every pair with cosine >= ``threshold``.

    Stored sparse, once per pool (both orders of each pair), so the restart rounds and the score fill
    look up a token's duplicates by index instead of comparing it with every kept token again.
    """

    shape: tuple[int, ...]
    row: torch.Tensor  # flat (batch, head) row of each ordered pair
    first: torch.Tensor
    second: torch.Tensor

    @classmethod
    def find(
        cls, unit: torch.Tensor, valid: torch.Tensor, threshold: float, *, compiled: bool = True
    ) -> DuplicatePairs:
        """All pairs of ``valid`` tokens of ``unit`` ``(..., P, D)`` (unit rows) with cosine >= threshold.

        Exact, and far below the ``O(P^2 D)`` of comparing all pairs when duplicates are rare: unit
        vectors with cosine >= t lie within ``r = sqrt(2 - 2t)`` of each other, so also after any
        orthonormal projection. The tokens are sorted by their coordinate on a direction they spread
        along (:func:`_spread_directions`); a token's candidates are the ones within ``r`` of it in that
        order whose projection on a few more directions is also within ``r``, and only those are
        compared in full. On CPU (``compiled``) the sweep runs in :func:`kernels.duplicate_pairs`.
        """
        shape = tuple(valid.shape)
        n, dim = shape[-1], unit.shape[-1]
        u = unit.reshape(-1, n, dim).float()
        ok = valid.reshape(-1, n)
        radius = math.sqrt(max(0.0, 2.0 - 2.0 * threshold)) + 1e-5  # slack for float32 rounding
        kernels = _cpu_kernels(u.device) if compiled else None
        if kernels is not None:
            directions = _fixed_directions(dim, min(_SWEEP_DIRECTIONS, dim) - 1)
            row, a, b = kernels.duplicate_pairs(u, ok, threshold, radius, directions)
            return cls(shape, torch.cat([row, row]), torch.cat([a, b]), torch.cat([b, a]))
        coords = u @ _spread_directions(u, ok).transpose(1, 2)  # (R, n, k)
        sorted_first, order = coords[..., 0].masked_fill(~ok, float("inf")).sort(-1)
        reach = torch.searchsorted(sorted_first, sorted_first + radius, right=True)
        steps = (reach - torch.arange(n, device=u.device) - 1).masked_fill(~ok.gather(1, order), 0)
        first, second = _within_steps(steps)  # flat sorted positions, every pair close in coordinate 0
        near = coords.gather(1, order.unsqueeze(-1).expand_as(coords)).reshape(-1, coords.shape[-1])
        first, second = _keep(first, second, (near[first] - near[second]).pow(2).sum(-1) <= radius**2)
        row, a, b = first // n, order.reshape(-1)[first], order.reshape(-1)[second]
        row, a, b = _keep(row, a, b, (u[row, a] * u[row, b]).sum(-1) >= threshold)
        return cls(shape, torch.cat([row, row]), torch.cat([a, b]), torch.cat([b, a]))

    @property
    def empty(self) -> bool:
        return self.row.numel() == 0

    def of_any(self, flag: torch.Tensor, before: torch.Tensor | None = None) -> torch.Tensor:
        """``(..., P)`` bool: tokens with a duplicate among the ``flag`` ones (earlier by ``before``)."""
        if self.empty:
            return torch.zeros_like(flag, dtype=torch.bool)
        hit = flag.reshape(-1, self.shape[-1])[self.row, self.first]
        if before is not None:
            rank = before.reshape(-1, self.shape[-1])
            hit &= rank[self.row, self.first] < rank[self.row, self.second]
        out = torch.zeros(flag.numel(), dtype=torch.bool, device=flag.device)
        out[(self.row * self.shape[-1] + self.second)[hit]] = True
        return out.reshape(flag.shape)


def _spread_directions(unit: torch.Tensor, valid: torch.Tensor, k: int = _SWEEP_DIRECTIONS) -> torch.Tensor:
    """``(R, k, D)`` orthonormal directions; the first runs from the mean of the valid rows to the row
    farthest from it (they spread along it nearly as much as along the principal direction, for one
    matrix-vector product), the others are fixed random ones. Any orthonormal directions keep
    :meth:`DuplicatePairs.find` exact; spread-out ones keep it fast."""
    count, _, dim = unit.shape
    weight = valid.unsqueeze(1).to(unit.dtype)  # (R, 1, n)
    mean = (weight @ unit).squeeze(1) / weight.sum(-1).clamp_min(1)  # (R, D)
    # ||u - mean||^2 = 1 - 2 u.mean + ||mean||^2 for unit rows: the farthest has the smallest u.mean
    farthest = (unit @ mean.unsqueeze(-1)).squeeze(-1).masked_fill(~valid, float("inf")).argmin(-1)
    first = unit[torch.arange(count, device=unit.device), farthest] - mean
    others = _fixed_directions(dim, min(k, dim) - 1).to(unit)
    columns = torch.cat([first.unsqueeze(-1), others.expand(count, -1, -1)], dim=-1)
    return torch.linalg.qr(columns).Q.transpose(1, 2)


@functools.lru_cache(maxsize=8)
def _fixed_directions(dim: int, k: int) -> torch.Tensor:
    """``(dim, k)`` random directions, the same on every call (seed 0)."""
    return torch.randn(dim, k, generator=torch.Generator().manual_seed(0))


def _within_steps(steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat pairs ``(i, i + s)``, ``1 <= s <= steps[i]``, over the rows of ``steps`` ``(R, m)``."""
    counts = steps.reshape(-1)
    first = torch.repeat_interleave(torch.arange(len(counts), device=steps.device), counts)
    starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    return first, first + torch.arange(len(first), device=steps.device) - starts + 1


def _keep(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The entries of every tensor but the last where the last (a bool mask) is True."""
    *values, mask = tensors
    return tuple(value[mask] for value in values)


def near_duplicate_share(
    keys: torch.Tensor, values: torch.Tensor, threshold: float = 0.95, mask: torch.Tensor | None = None
) -> float:
    """Share of kept tokens that are a near-duplicate of an earlier kept token.

    Tokens are compared by the cosine of ``[k / ||K||_F ; v / ||V||_F]`` per (batch, head); token ``j``
    counts when some kept ``i < j`` has cosine >= ``threshold``. Inputs are ``(B, H, m, d)`` cache entries;
    ``mask`` ``(B, H, m)`` marks the ones a head really keeps (head-wise presses mask instead of dropping).
    """
    k = keys.float() / keys.float().pow(2).sum((-1, -2), keepdim=True).sqrt().clamp_min(1e-12)
    v = values.float() / values.float().pow(2).sum((-1, -2), keepdim=True).sqrt().clamp_min(1e-12)
    joint = torch.cat([k, v], dim=-1)
    unit = joint / joint.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    cos = unit @ unit.transpose(-1, -2)
    m = cos.shape[-1]
    present = torch.ones(keys.shape[:3], dtype=torch.bool, device=keys.device) if mask is None else mask
    earlier = torch.ones(m, m, dtype=torch.bool, device=cos.device).tril(-1)
    pairs = (cos >= threshold) & earlier & present.unsqueeze(-1) & present.unsqueeze(-2)
    duplicate = pairs.any(-1) & present
    total = int(present.sum())
    return float(duplicate.sum()) / total if total else 0.0
