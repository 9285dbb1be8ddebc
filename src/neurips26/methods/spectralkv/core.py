"""SpectralKV within a layer, part 2: the spectral coreset by residual pivoting.

:func:`select_coreset` keeps the forced tokens (sinks, window) and picks the rest by residual pivoting
(:func:`pivoted_selection`, a batched greedy pivoted QR) over the features of
:mod:`~neurips26.methods.spectralkv.features`: each pick is the token whose feature is farthest from the
span of what is already kept, so a near-duplicate of a kept token has a near-zero residual and is not
picked (:mod:`~neurips26.methods.spectralkv.duplicates` finds the exact repeats once per pool).
The layer budgets are in :mod:`~neurips26.methods.spectralkv.budgets`.

Shapes: ``B`` batch, ``H`` KV heads, ``n`` tokens, ``d`` head dim, ``D = 2 d`` feature dim, ``L`` layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neurips26.methods.spectralkv.config import RANK_STRATEGIES
from neurips26.methods.spectralkv.duplicates import DuplicatePairs, rank_of, sweep_settings
from neurips26.methods.spectralkv.features import (
    Candidates,
    coreset_candidates,
    cpu_kernels,
)

__all__ = [
    "RANK_STRATEGIES",
    "pivoted_selection",
    "select_coreset",
    "select_from_candidates",
    "select_topk",
]

_RANK_TOL = 1e-6  # pivoted_selection's default: a residual below it is in the span already


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


def select_from_candidates(
    candidates: Candidates,
    *,
    strategy: str = "hybrid",
    duplicate_cosine: float = 0.999,
    block_size: int = 1,
    energy_tol: float = 0.0,
    segment_budget: int = 64,
    compiled: bool = True,
) -> torch.Tensor:
    """Residual pivoting over each row's pool, then the rank fallback (see :func:`select_coreset`).

    Returns ``(B, H, max budget)`` sorted token positions; a row with a smaller budget is padded with -1.
    On CPU (``compiled``) the ``"segments"`` strategy runs whole in
    :func:`compiled_selection.select_segments`, with the same result.
    """
    if strategy not in RANK_STRATEGIES:
        raise ValueError(f"strategy must be one of {RANK_STRATEGIES}, got {strategy!r}")
    c = candidates
    unit = c.features / c.features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    if strategy == "segments" and compiled and cpu_kernels(c.features.device) is not None:
        return _compiled_segments(c, unit, duplicate_cosine, segment_budget, energy_tol)
    kept = c.forced & c.valid
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


def _compiled_segments(
    c: Candidates, unit: torch.Tensor, duplicate_cosine: float, segment_budget: int, energy_tol: float
) -> torch.Tensor:
    """The ``"segments"`` branch of :func:`select_from_candidates` in one compiled call (CPU)."""
    from neurips26.methods.spectralkv.compiled_selection import select_segments

    if segment_budget < 1:
        raise ValueError(f"segment_budget must be >= 1, got {segment_budget}")
    radius, directions = sweep_settings(duplicate_cosine, c.features.shape[-1])
    return select_segments(
        c.features,
        unit,
        c.features.pow(2).sum(-1),  # _has_better_duplicate's priority, in the features' own dtype
        c.scores,
        c.forced,
        c.valid,
        c.budget,
        c.index,
        threshold=duplicate_cosine,
        radius=radius,
        directions=directions,
        segment_budget=segment_budget,
        rank_tol=_RANK_TOL,
        energy_tol=energy_tol,
    )


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
    return duplicates.of_any(torch.ones_like(kept), before=rank_of(priority))


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
    kernels = cpu_kernels(features.device) if compiled else None
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
        rank = rank_of(key)
        filling = (rank < need.unsqueeze(-1)) & (key > 0.5)
        repeats = duplicates.of_any(filling, before=rank) & filling
        if not bool(repeats.any()):
            break
        key = key.masked_fill(repeats, 0.5)
    return kept | ((rank_of(key) < need.unsqueeze(-1)) & valid)
