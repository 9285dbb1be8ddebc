"""Compiled (numba) CPU kernels for the sequential parts of SpectralKV's selection.

Greedy pivoting is one pick after another and the near-duplicate search walks a sorted order: in torch
they are many small batched operations per step, so on CPU their cost is Python dispatch, not
arithmetic (README, "Speed and memory"). These kernels run the same algorithms as the ``"segments"``
strategy's torch path (:func:`core.pivoted_selection` exact, ``block_size=1``) and
:meth:`core.DuplicatePairs.find` row by row in compiled code, with the same results (tests compare
them), and the layer concentration in one pass; the torch versions remain the reference and the path
for other devices. The candidate pool's kernels are in :mod:`pool_kernels`, the whole segments
selection in :mod:`compiled_selection`. The first call compiles them (tens of seconds); ``cache=True``
keeps the machine code for later processes.

The kernels call no BLAS: their matrix products are small (tens to hundreds of rows), and numba's ``@``
goes to scipy's OpenBLAS, whose thread pool splits products above ~2.6e5 multiply-adds over all cores.
On a loaded machine a call then waits for a worker that has no core: one selection took 0.9 ms at the
median and 340 ms at the 90th percentile (issue #47; 1 ms with the pool limited to one thread). The
explicit loops below (:func:`_times_transposed`, :func:`_subtract_projection`) run in the calling thread.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

__all__ = ["as_array", "duplicate_pairs", "mean_row_entropy", "pivot_segments"]

# Sums may be reassociated (and so vectorised): strict left-to-right order makes every running sum wait
# for the previous addition. No other fast-math liberty: infinities and NaNs keep their meaning.
_REDUCE = {"reassoc", "contract"}


def as_array(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> np.ndarray:
    """A C-contiguous numpy view of a CPU ``tensor`` (a copy only where the dtype or the layout must
    change). Every tensor method call costs microseconds of dispatch even when it changes nothing (a
    ``.detach().float().cpu().numpy()`` chain is six), and one selection converts dozens of tensors, so
    only the calls that do something are made."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    if dtype is not None and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return np.ascontiguousarray(tensor.numpy())


def mean_row_entropy(attention: torch.Tensor, logits: torch.Tensor, lo: int, hi: int) -> float:
    """Mean entropy of the rows of ``attention`` ``(..., n)`` renormalised over the keys ``[lo, hi)`` (CPU).

    ``logits`` are the rows' pre-softmax logits, so ``log a_j = z_j - log Z`` and the entropy
    ``log S - sum_j a_j log a_j / S`` (``S = sum_j a_j``) needs no logarithm per entry:
    ``log S - sum_j a_j z_j / S + log Z``, with ``log Z = z_0 - log a_0`` (token 0 is visible to every
    causal query; a row where ``a_0`` underflows uses its largest entry). One pass over each row, sums
    in float64, instead of the dozen full-size tensor operations of
    :func:`budgets.attention_concentration`'s torch path.
    """
    n = attention.shape[-1]
    return float(
        _mean_row_entropy(
            as_array(attention, torch.float32).reshape(-1, n),
            as_array(logits, torch.float32).reshape(-1, n),
            int(lo),
            int(hi),
        )
    )


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _mean_row_entropy(attention, logits, lo, hi):  # pragma: no cover
    total = 0.0
    for r in range(attention.shape[0]):
        # slices indexed from 0: a loop over range(lo, hi) is not vectorised (numba cannot prove the
        # index non-negative, so every access keeps its negative-index wraparound branch; 5x slower)
        a, z = attention[r, lo:hi], logits[r, lo:hi]
        mass = dot = 0.0
        for j in range(a.shape[0]):
            mass += a[j]
            dot += a[j] * np.float64(z[j])
        top = 0 if attention[r, 0] >= 1e-30 else np.argmax(attention[r])
        log_normaliser = logits[r, top] - np.log(np.float64(attention[r, top]))
        mass = max(mass, 1e-30)
        total += np.log(mass) - dot / mass + log_normaliser
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
    if features.dtype not in (torch.float32, torch.float64):  # half precisions: numpy has no bfloat16
        features = features.float()
    _pivot_segments(
        as_array(features),
        as_array(kept),
        as_array(open_),
        as_array(need, torch.int64),
        int(segment_budget),
        float(rank_tol),
        float(energy_tol),
        picked,
    )
    return torch.from_numpy(picked)


@numba.njit(cache=True, nogil=True)
def _largest(values, size):  # pragma: no cover
    """Positions of the ``size`` largest ``values``, in increasing order (ties: the earlier first). A
    partition finds the threshold in ``O(n)`` instead of sorting."""
    n = values.shape[0]
    threshold = np.partition(values, n - size)[n - size]
    above = 0
    for j in range(n):
        if values[j] > threshold:
            above += 1
    ties = size - above
    chosen = np.empty(size, dtype=np.int64)
    count = 0
    for j in range(n):
        if values[j] > threshold or (values[j] == threshold and ties > 0):
            if values[j] == threshold:
                ties -= 1
            chosen[count] = j
            count += 1
    return chosen


@numba.njit(cache=True, nogil=True)
def _pivot_segments(phi, kept, open_, need, segment_budget, rank_tol, energy_tol, picked):  # pragma: no cover
    for r in range(phi.shape[0]):
        _pivot_row_segments(
            phi[r], kept[r], open_[r], need[r], segment_budget, rank_tol, energy_tol, picked[r]
        )


@numba.njit(cache=True, nogil=True)
def _pivot_row_segments(
    phi, kept, open_, need, segment_budget, rank_tol, energy_tol, picked
):  # pragma: no cover
    """One row of :func:`pivot_segments`: ``phi`` ``(P, D)``, the rest ``(P,)``; sets ``picked``."""
    members = np.nonzero(open_)[0]
    if need <= 0 or len(members) == 0:
        return
    x = phi.astype(np.float64)
    scale = 0.0
    for i in range(x.shape[0]):
        scale = max(scale, np.dot(x[i], x[i]))
    covered = _span_of(x[np.nonzero(kept)[0]], rank_tol)
    count = min((need + segment_budget - 1) // segment_budget, len(members))
    for t in range(count):
        share = need * (t + 1) // count - need * t // count
        segment = members[t::count]
        chosen = _greedy(x[segment], covered, share, rank_tol * scale, energy_tol)
        for i in range(len(segment)):
            if chosen[i]:
                picked[segment[i]] = True


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
    ("CGS2", as accurate as modified Gram-Schmidt)."""
    out = v.copy().reshape(1, -1)
    if basis.shape[0]:
        for _ in range(2):
            _subtract_projection(out, basis)
    return out[0]


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _times_transposed(a, b):  # pragma: no cover
    """``a @ b.T`` ``(m, n)`` in ``a``'s dtype, accumulated in float64, without BLAS (module docstring)."""
    return _products(a, b, False)


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _gram(a):  # pragma: no cover
    """``a @ a.T``: the upper half computed, the lower half mirrored (the same numbers, half the work)."""
    return _products(a, a, True)


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _products(a, b, symmetric):  # pragma: no cover
    """The dot products of :func:`_times_transposed` (``symmetric``: ``b`` is ``a``, entries with ``j >= i``
    computed and mirrored). A 4 x 2 block of entries shares each pass over the depth: the six rows'
    loads feed eight multiply-adds (one row at a time, a load fed one: this is ~3x faster); every entry
    is still summed on its own."""
    m, n, depth = a.shape[0], b.shape[0], a.shape[1]
    out = np.empty((m, n), dtype=a.dtype)
    i = 0
    while i + 4 <= m:
        j = i if symmetric else 0
        while j + 2 <= n:
            t0 = t1 = t2 = t3 = u0 = u1 = u2 = u3 = 0.0
            for c in range(depth):
                v, w = b[j, c], b[j + 1, c]
                t0 += a[i, c] * v
                t1 += a[i + 1, c] * v
                t2 += a[i + 2, c] * v
                t3 += a[i + 3, c] * v
                u0 += a[i, c] * w
                u1 += a[i + 1, c] * w
                u2 += a[i + 2, c] * w
                u3 += a[i + 3, c] * w
            out[i, j], out[i + 1, j], out[i + 2, j], out[i + 3, j] = t0, t1, t2, t3
            out[i, j + 1], out[i + 1, j + 1], out[i + 2, j + 1], out[i + 3, j + 1] = u0, u1, u2, u3
            j += 2
        if j < n:  # an odd last column
            t0 = t1 = t2 = t3 = 0.0
            for c in range(depth):
                v = b[j, c]
                t0 += a[i, c] * v
                t1 += a[i + 1, c] * v
                t2 += a[i + 2, c] * v
                t3 += a[i + 3, c] * v
            out[i, j], out[i + 1, j], out[i + 2, j], out[i + 3, j] = t0, t1, t2, t3
        i += 4
    for row in range(i, m):  # the last m mod 4 rows
        for j in range(row if symmetric else 0, n):
            total = 0.0
            for c in range(depth):
                total += a[row, c] * b[j, c]
            out[row, j] = total
    if symmetric:
        for row in range(m):
            for j in range(row):
                out[row, j] = out[j, row]
    return out


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _subtract_projection(rows, basis):  # pragma: no cover
    """``rows -= (rows @ basis.T) @ basis`` in place, without BLAS (module docstring)."""
    coefficients = _times_transposed(rows, basis)
    for i in range(rows.shape[0]):
        _subtract_combination(rows[i], coefficients[i], basis, basis.shape[0])


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _subtract_combination(target, weights, rows, count):  # pragma: no cover
    """``target -= weights[b] * rows[b]`` for ``b < count``, one ``b`` after another as a plain loop would
    (the same numbers), but four ``b`` per load and store of ``target``."""
    b = 0
    while b + 4 <= count:
        w0, w1, w2, w3 = weights[b], weights[b + 1], weights[b + 2], weights[b + 3]
        r0, r1, r2, r3 = rows[b], rows[b + 1], rows[b + 2], rows[b + 3]
        for c in range(target.shape[0]):
            target[c] = (((target[c] - w0 * r0[c]) - w1 * r1[c]) - w2 * r2[c]) - w3 * r3[c]
        b += 4
    for last in range(b, count):
        weight, row = weights[last], rows[last]
        for c in range(target.shape[0]):
            target[c] -= weight * row[c]


@numba.njit(cache=True, nogil=True)
def _greedy(x, covered, k, floor, energy_tol):  # pragma: no cover
    """Businger-Golub pivoting on the residuals of the rows of ``x`` (m, D) orthogonal to the orthonormal
    rows ``covered``: ``k`` picks at most, norm downdates (``x`` is overwritten).

    Two equivalent factorizations: pivoted Cholesky of the residuals' Gram matrix when the segment is
    small next to its picks (``O(m^2 D)`` for the Gram, then ``O(m k^2)`` updates), Gram-Schmidt on the
    rows otherwise (``O(m k D)`` without the Gram). The crossover was measured at m between 4k and 8k."""
    if x.shape[0] <= 6 * k:
        return _greedy_gram(_residual_gram(x, covered), min(k, x.shape[1]), floor, energy_tol)
    if covered.shape[0]:
        _subtract_projection(x, covered)
    return _greedy_rows(x, k, floor, energy_tol)


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _residual_gram(x, covered):  # pragma: no cover
    """``R R^T`` for the residuals ``R = x - (x B^T) B`` off the orthonormal rows ``B = covered``, as
    ``x x^T - C C^T`` with ``C = x B^T`` (``m x r``): ``R`` itself is never formed, which saves ``m r D``
    multiply-adds (a third of the segment's work; the sum differs from the residuals' own Gram by
    rounding only, ~1e-16 of ``||x||^2``, far below the rank floor ``1e-6`` of it)."""
    gram = _gram(x)
    if covered.shape[0]:
        gram -= _gram(_times_transposed(x, covered))
    return gram


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
def _greedy_gram(gram, k, floor, energy_tol):  # pragma: no cover
    """Pivoted Cholesky of ``gram`` (m, m): at most ``k`` pivots (the caller bounds ``k`` by the rank)."""
    m = gram.shape[0]
    residual = np.diag(gram).copy()
    taken = np.zeros(m, dtype=np.bool_)
    steps = min(k, m)
    factor = np.zeros((steps, m))  # row t: the t-th Cholesky column, L[:, t]
    initial = residual.sum()
    for t in range(steps):
        best = _next_pivot(residual, taken, initial, floor, energy_tol)
        if best < 0:
            break
        # explicit loops: numba array expressions would allocate a temporary per update
        column = factor[t]
        column[:] = gram[best]
        _subtract_combination(column, factor[:t, best], factor, t)
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
        coefficient = _times_transposed(x, basis[t : t + 1])
        for i in range(m):
            residual[i] -= coefficient[i, 0] * coefficient[i, 0]
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
        as_array(unit, torch.float32),
        as_array(valid),
        float(threshold),
        float(radius),
        as_array(directions.T, torch.float64),
    )
    row, a, b = torch.from_numpy(out)
    return row, a, b


@numba.njit(cache=True, nogil=True)
def _sweep_rows(unit, valid, threshold, radius, fixed):  # pragma: no cover
    rows = [np.empty((3, 0), dtype=np.int64)]
    for r in range(unit.shape[0]):
        pairs = _sweep_row(unit[r], valid[r], threshold, radius, fixed)
        found = np.empty((3, pairs.shape[1]), dtype=np.int64)
        found[0], found[1:] = r, pairs
        rows.append(found)
    total = 0
    for found in rows:
        total += found.shape[1]
    out = np.empty((3, total), dtype=np.int64)
    start = 0
    for found in rows:
        out[:, start : start + found.shape[1]] = found
        start += found.shape[1]
    return out


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _sweep_row(unit, valid, threshold, radius, fixed):  # pragma: no cover
    """One row of :func:`duplicate_pairs`: ``unit`` ``(P, D)``, ``valid`` ``(P,)``; ``(2, pairs)`` token
    positions, the smaller first."""
    out = np.empty((2, 16), dtype=np.int64)
    found = 0
    members = np.nonzero(valid)[0]
    if len(members) < 2:
        return out[:, :0].copy()
    rows = unit[members]
    coords = _times_transposed(rows, _row_directions(rows, fixed))
    order = np.argsort(coords[:, 0], kind="mergesort")
    rows, members = rows[order], members[order]  # contiguous in sweep order
    columns = coords[order].T.copy()  # (k, tokens): one coordinate of every token is contiguous
    distance = np.empty(len(members))  # one buffer for every token's squared distances
    reach = 0
    for p in range(len(members)):
        reach = _within_radius(columns[0], p, max(reach, p + 1), radius)
        _distances_after(columns, p, reach, distance)
        for q in range(p + 1, reach):
            if distance[q - p - 1] > radius * radius or np.dot(rows[p], rows[q]) < threshold:
                continue
            if found == out.shape[1]:  # grow by doubling: one sweep, no counting pass
                grown = np.empty((2, 2 * found), dtype=np.int64)
                grown[:, :found] = out
                out = grown
            out[0, found] = min(members[p], members[q])
            out[1, found] = max(members[p], members[q])
            found += 1
    return out[:, :found].copy()


@numba.njit(cache=True, nogil=True, inline="always")
def _within_radius(first, p, start, radius):  # pragma: no cover
    """The end of the run of sorted ``first`` coordinates within ``radius`` after token ``p``. The end
    never moves back as ``p`` advances, so the search resumes from the previous one (``start``)."""
    end = start
    while end < first.shape[0] and first[end] - first[p] <= radius:
        end += 1
    return end


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE, inline="always")
def _distances_after(columns, p, end, distance):  # pragma: no cover
    """``distance[q - p - 1] = ||coords_p - coords_q||^2`` for every ``q`` in ``(p, end)``: summed one
    coordinate after another over all ``q`` at once (contiguous, vectorised), not pair by pair (a call
    per pair cost ~10 ns, most of the sweep)."""
    width = end - p - 1
    distance[:width] = 0.0
    for c in range(columns.shape[0]):
        after, at = columns[c, p + 1 : end], columns[c, p]  # a slice from 0: vectorised (_mean_row_entropy)
        for q in range(width):
            diff = after[q] - at
            distance[q] += diff * diff


@numba.njit(cache=True, nogil=True)
def _row_directions(rows, fixed):  # pragma: no cover
    """Orthonormal ``(k, D)`` float32 directions: mean-to-farthest first, then the fixed ones (a direction
    with nothing left after the earlier ones is dropped)."""
    mean = np.zeros(rows.shape[1])
    for i in range(rows.shape[0]):
        mean += rows[i]
    mean /= rows.shape[0]
    farthest = np.argmin(_times_transposed(rows, mean.astype(rows.dtype).reshape(1, -1))[:, 0])
    candidates = np.empty((fixed.shape[0] + 1, rows.shape[1]))
    candidates[0] = rows[farthest] - mean
    candidates[1:] = fixed
    return _span_of(candidates, 1e-12).astype(np.float32)
