"""Compiled (numba) CPU kernels for the two sequential parts of SpectralKV's selection.

Greedy pivoting is one pick after another, and the near-duplicate search walks a sorted order: in torch
both are many small batched operations per step, so on CPU their cost is Python dispatch, not arithmetic
(README, "Speed"). These kernels run the same algorithms as :func:`core.pivoted_selection` (exact,
``block_size=1``) and :meth:`core.DuplicatePairs.find` row by row in compiled code, with the same results
(tests compare them); the torch versions remain the reference and the path for other devices.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

__all__ = ["duplicate_pairs", "mean_window_entropy", "pivot_segments"]


def mean_window_entropy(attention: torch.Tensor, logits: torch.Tensor, lo: int, hi: int) -> float:
    """Mean over rows of the entropy of ``attention``'s entries ``[lo, hi)``, renormalised (CPU).

    ``attention = softmax(logits)`` row-wise, both ``(..., n)``; ``log a = z - log Z`` with ``log Z`` from
    token 0 (or the row's largest entry where token 0 underflows), as :func:`core.attention_concentration`
    computes it in torch: one pass over both instead of a dozen full-size operations.
    """
    n = attention.shape[-1]
    return _mean_window_entropy(
        np.ascontiguousarray(attention.detach().float().cpu().numpy().reshape(-1, n)),
        np.ascontiguousarray(logits.detach().float().cpu().numpy().reshape(-1, n)),
        int(lo),
        int(hi),
    )


@numba.njit(cache=True, nogil=True)
def _mean_window_entropy(attention, logits, lo, hi):  # pragma: no cover
    total = 0.0
    for r in range(attention.shape[0]):
        a, z = attention[r], logits[r]
        mass, dot = 0.0, 0.0
        for j in range(lo, hi):
            mass += a[j]
            dot += a[j] * z[j]
        mass = max(mass, 1e-30)
        anchor = 0
        if a[0] < 1e-30:
            anchor = np.argmax(a)
        log_z = z[anchor] - np.log(a[anchor])
        total += np.log(mass) - dot / mass + log_z
    return total / attention.shape[0]


def pivot_segments(
    features: torch.Tensor,
    kept: torch.Tensor,
    open_: torch.Tensor,
    need: torch.Tensor,
    segment_budget: int,
    rank_tol: float,
    energy_tol: float,
) -> torch.Tensor:
    """Exact greedy pivoting within strided segments of each row's open tokens (CPU).

    The residuals start orthogonal to the ``kept`` tokens' features (a kept row adds a direction when its
    residual norm^2 exceeds ``rank_tol`` times the largest kept norm^2, as in
    :func:`core._orthonormal_basis`). Row ``r``'s open tokens, in order, are dealt into ``c =
    min(ceil(need[r] / segment_budget), open)`` segments (token ``j`` of them to segment ``j mod c``);
    segment ``t`` gets ``need * (t+1) // c - need * t // c`` picks of exact residual pivoting over
    ``features`` ``(R, P, D)``, stopping early when the best residual norm^2 is below ``rank_tol`` times
    the row's largest feature norm^2, or the segment's unpicked residual energy is at most ``energy_tol``
    of its initial value. Returns ``(R, P)`` bool picks.
    """
    picked = np.zeros(open_.shape, dtype=np.bool_)
    _pivot_segments(
        np.ascontiguousarray(features.detach().cpu().numpy()),
        kept.cpu().numpy(),
        open_.cpu().numpy(),
        need.cpu().numpy().astype(np.int64),
        int(segment_budget),
        float(rank_tol),
        float(energy_tol),
        picked,
    )
    return torch.from_numpy(picked).to(open_.device)


@numba.njit(cache=True, nogil=True)
def _pivot_segments(phi, kept, open_, need, segment_budget, rank_tol, energy_tol, picked):  # pragma: no cover
    for r in range(phi.shape[0]):
        members = np.nonzero(open_[r])[0]
        if need[r] <= 0 or len(members) == 0:
            continue
        x = phi[r].astype(np.float64)
        scale = 0.0
        for i in range(x.shape[0]):
            scale = max(scale, np.dot(x[i], x[i]))
        covered = _span_of(x[np.nonzero(kept[r])[0]], rank_tol)
        count = min((need[r] + segment_budget - 1) // segment_budget, len(members))
        for t in range(count):
            share = need[r] * (t + 1) // count - need[r] * t // count
            segment = members[t::count]
            rows = x[segment]
            if covered.shape[0]:
                rows = rows - (rows @ covered.T) @ covered
            chosen = _greedy(rows, share, rank_tol * scale, energy_tol)
            for i in range(len(segment)):
                if chosen[i]:
                    picked[r, segment[i]] = True


@numba.njit(cache=True, nogil=True)
def _span_of(rows, rank_tol):  # pragma: no cover
    """Orthonormal rows spanning ``rows`` (Gram-Schmidt with a relative rank test)."""
    largest = 0.0
    for i in range(rows.shape[0]):
        largest = max(largest, np.dot(rows[i], rows[i]))
    basis = np.zeros(rows.shape)
    size = 0
    for i in range(rows.shape[0]):
        v = _orthogonalised(rows[i], basis[:size])
        norm_sq = np.dot(v, v)
        if norm_sq > rank_tol * largest and norm_sq > 0.0:
            basis[size] = v / np.sqrt(norm_sq)
            size += 1
    return basis[:size].copy()


@numba.njit(cache=True, nogil=True)
def _orthogonalised(v, basis):  # pragma: no cover
    """``v`` minus its projection on the orthonormal rows ``basis``: classical Gram-Schmidt twice
    ("CGS2", as accurate as modified Gram-Schmidt), as two matrix-vector products per pass instead of
    one small vector operation per basis row."""
    out = v.copy()
    if basis.shape[0]:
        for _ in range(2):
            out -= (basis @ out) @ basis
    return out


@numba.njit(cache=True, nogil=True)
def _greedy(x, k, floor, energy_tol):  # pragma: no cover
    """Businger-Golub pivoting on the rows of ``x`` (m, D): ``k`` picks at most, norm downdates.

    Two equivalent factorizations: pivoted Cholesky of the Gram matrix when the segment is small next
    to its picks (one BLAS ``x x^T``, then ``O(m k^2)`` updates), Gram-Schmidt on the rows otherwise
    (``O(m k D)`` without the ``O(m^2 D)`` Gram). The crossover was measured at m between 4k and 8k."""
    if x.shape[0] <= 6 * k:
        return _greedy_gram(x, k, floor, energy_tol)
    return _greedy_rows(x, k, floor, energy_tol)


@numba.njit(cache=True, nogil=True)
def _next_pivot(residual, taken, initial, floor, energy_tol):  # pragma: no cover
    """The unpicked row of largest residual, or -1 once it is below ``floor`` or the unpicked residual
    energy is at most ``energy_tol`` of ``initial``."""
    if energy_tol > 0.0:
        left = 0.0
        for i in range(residual.shape[0]):
            if not taken[i]:
                left += residual[i]
        if left <= energy_tol * initial:
            return -1
    best, best_sq = -1, -1.0
    for i in range(residual.shape[0]):
        if not taken[i] and residual[i] > best_sq:
            best, best_sq = i, residual[i]
    return best if best_sq > floor else -1


@numba.njit(cache=True, nogil=True)
def _greedy_gram(x, k, floor, energy_tol):  # pragma: no cover
    m = x.shape[0]
    gram = x @ x.T
    residual = np.diag(gram).copy()
    taken = np.zeros(m, dtype=np.bool_)
    steps = min(k, x.shape[1], m)
    factor = np.zeros((steps, m))  # row t: the t-th Cholesky column, L[:, t]
    initial = residual.sum()
    for t in range(steps):
        best = _next_pivot(residual, taken, initial, floor, energy_tol)
        if best < 0:
            break
        # explicit loops: numba array expressions would allocate a temporary per update
        column = factor[t]
        column[:] = gram[best]
        for j in range(t):
            weight, previous = factor[j, best], factor[j]
            for i in range(m):
                column[i] -= weight * previous[i]
        inverse = 1.0 / np.sqrt(residual[best])
        for i in range(m):
            column[i] *= inverse
            residual[i] -= column[i] * column[i]
        taken[best] = True
    return taken


@numba.njit(cache=True, nogil=True)
def _greedy_rows(x, k, floor, energy_tol):  # pragma: no cover
    m, dim = x.shape
    residual = np.empty(m)
    for i in range(m):
        residual[i] = np.dot(x[i], x[i])
    taken = np.zeros(m, dtype=np.bool_)
    basis = np.zeros((min(k, dim), dim))
    initial = residual.sum()
    for t in range(min(k, dim)):
        best = _next_pivot(residual, taken, initial, floor, energy_tol)
        if best < 0:
            break
        v = _orthogonalised(x[best], basis[:t])
        norm = np.sqrt(np.dot(v, v))
        if norm <= 0.0:
            break
        basis[t] = v / norm
        taken[best] = True
        coefficient = x @ basis[t]
        for i in range(m):
            residual[i] -= coefficient[i] * coefficient[i]
    return taken


def duplicate_pairs(
    unit: torch.Tensor, valid: torch.Tensor, threshold: float, radius: float, directions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every ordered-once pair ``(row, a, b)`` of valid tokens with cosine >= ``threshold`` (CPU).

    ``unit`` ``(R, n, D)`` unit rows. Per row, the tokens are projected on orthonormal directions (the
    first from the valid rows' mean to the row farthest from it, then ``directions`` ``(D, k - 1)``,
    orthonormalised), screened by ``|coords_a - coords_b| <= radius`` (implied by the cosine) in one
    sweep along the first coordinate, and compared in full: the same pairs as
    :meth:`core.DuplicatePairs.find`'s torch path, whatever the directions.
    """
    out = _sweep_rows(
        np.ascontiguousarray(unit.detach().cpu().numpy(), dtype=np.float32),
        valid.cpu().numpy(),
        float(threshold),
        float(radius),
        np.ascontiguousarray(directions.detach().cpu().numpy().T, dtype=np.float64),
    )
    row, a, b = torch.from_numpy(out).to(unit.device)
    return row, a, b


@numba.njit(cache=True, nogil=True)
def _sweep_rows(unit, valid, threshold, radius, fixed):  # pragma: no cover
    out = np.empty((3, 64), dtype=np.int64)
    found = 0
    for r in range(unit.shape[0]):
        members = np.nonzero(valid[r])[0]
        if len(members) < 2:
            continue
        rows = unit[r][members]
        coords = rows @ _row_directions(rows, fixed).T
        order = np.argsort(coords[:, 0], kind="mergesort")
        coords, rows, members = coords[order], rows[order], members[order]  # contiguous in sweep order
        for p in range(len(members)):
            for q in range(p + 1, len(members)):
                if coords[q, 0] - coords[p, 0] > radius:
                    break
                if _farther(coords[p], coords[q], radius * radius) or np.dot(rows[p], rows[q]) < threshold:
                    continue
                if found == out.shape[1]:  # grow by doubling: one sweep, no counting pass
                    grown = np.empty((3, 2 * found), dtype=np.int64)
                    grown[:, :found] = out
                    out = grown
                out[0, found] = r
                out[1, found] = min(members[p], members[q])
                out[2, found] = max(members[p], members[q])
                found += 1
    return out[:, :found].copy()


@numba.njit(cache=True, nogil=True)
def _farther(a, b, limit):  # pragma: no cover
    """``||a - b||^2 > limit``, stopping as soon as the partial sum exceeds it."""
    total = 0.0
    for c in range(a.shape[0]):
        diff = a[c] - b[c]
        total += diff * diff
        if total > limit:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _row_directions(rows, fixed):  # pragma: no cover
    """Orthonormal ``(k, D)`` float32 directions: mean-to-farthest first, then the fixed ones (Gram-Schmidt
    in float64; a direction with nothing left after the earlier ones is dropped)."""
    m, dim = rows.shape
    mean = np.zeros(dim)
    for i in range(m):
        mean += rows[i]
    mean /= m
    farthest = np.argmin(rows @ mean.astype(rows.dtype))
    candidates = np.empty((fixed.shape[0] + 1, dim))
    candidates[0] = rows[farthest] - mean
    candidates[1:] = fixed
    basis = np.zeros(candidates.shape)
    size = 0
    for i in range(candidates.shape[0]):
        v = candidates[i].copy()
        for j in range(size):
            v -= np.dot(basis[j], v) * basis[j]
        norm = np.sqrt(np.dot(v, v))
        if norm > 1e-6 * np.sqrt(np.dot(candidates[i], candidates[i])) and norm > 0.0:
            basis[size] = v / norm
            size += 1
    return basis[:size].astype(np.float32)
