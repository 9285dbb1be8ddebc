"""A compiled (numba) round of SP-CACW's bookkeeping, linear bias form: estimates, exact weights, update.

One call does for T targets what :mod:`neurips26.methods.spcacw.batched` does in a few dozen NumPy calls
(``BiasEstimators.variance``/``estimate``, ``batch_weights``, ``BiasEstimators.update``): on the digits
federation (16 clients) those calls cost more than the target's share of the gradient pass, and one
compiled call removes that fixed cost. The arithmetic is the NumPy path's, in the same order; tests compare
the two. Import fails without numba, and the engine then runs the NumPy path.
"""

from __future__ import annotations

import numba
import numpy as np

_FLOOR = 1e-12  # = core._VARIANCE_FLOOR (checked by the tests)


@numba.njit(cache=True, nogil=True)
def linear_round(
    distance: np.ndarray,
    noise: np.ndarray,
    weight: np.ndarray,
    spread: np.ndarray,
    spread_weight: np.ndarray,
    targets: np.ndarray,
    sq_distance: np.ndarray,
    variance: np.ndarray,
    has_variance: bool,
    valid: np.ndarray,
    decay: float,
    scale: float,
    warmup: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One round for T targets; the five (T, N) estimator states are updated in place.

    Parameters
    ----------
    distance, noise, weight, spread, spread_weight : the EMAs of ``BiasEstimators`` (T, N), float64.
    targets : (T,) each row's target. sq_distance : (T, N) ``||g_i - g_target||^2`` this round.
    variance : (T, N) this round's ``s_i`` (read only when ``has_variance``). valid : (T, N) valid replies.
    decay : EMA factor. scale : ``L eta``. warmup : a warm-up round (the target alone).

    Returns
    -------
    alpha, bias_sq, past_variance : (T, N) the weights, the squared biases they used (``inf`` excluded) and
    the variance EMAs before this round's update (what the weights used).
    """
    t_count, n = distance.shape
    alpha = np.zeros((t_count, n))
    bias_sq = np.empty((t_count, n))
    past = np.empty((t_count, n))
    rate = 1.0 - decay
    w = np.empty(n)
    lam = np.empty(n)
    for r in range(t_count):
        target = targets[r]
        top = -np.inf
        for i in range(n):
            past[r, i] = spread[r, i] / spread_weight[r, i] if spread_weight[r, i] > 0 else 1.0
            top = max(top, past[r, i])
            if weight[r, i] > 0:
                bias_sq[r, i] = max((distance[r, i] - noise[r, i]) / weight[r, i], 0.0)
            else:
                bias_sq[r, i] = np.inf
            if not valid[r, i]:
                bias_sq[r, i] = np.inf
        bias_sq[r, target] = 0.0  # also for a broken own update (the engine's step zeroes it)
        if warmup:
            bias_sq[r, :] = np.inf
            bias_sq[r, target] = 0.0
        floor = _FLOOR * max(top, 1e-300)
        for i in range(n):
            w[i] = 1.0 / (2.0 * scale * max(past[r, i], floor))
        # the exact solution (core.solve_exact, linear form): support = clients below their prefix multiplier
        order = np.argsort(bias_sq[r], kind="mergesort")
        cum_w, cum_wz, count = 0.0, 0.0, 0
        for j in range(n):
            i = order[j]
            cum_w += w[i]
            cum_wz += w[i] * bias_sq[r, i]
            lam[j] = (1.0 + cum_wz) / cum_w
            if bias_sq[r, i] < lam[j]:
                count += 1
        lam_k = lam[count - 1]
        total = 0.0
        for i in range(n):
            alpha[r, i] = w[i] * max(lam_k - bias_sq[r, i], 0.0)
            total += alpha[r, i]
        for i in range(n):
            alpha[r, i] /= total
        # the estimators' update (BiasEstimators.update)
        if not (valid[r, target] and np.isfinite(sq_distance[r, target])):
            continue  # no target gradient: this row keeps its state
        s_target = past[r, target]
        if has_variance and np.isfinite(variance[r, target]):
            s_target = variance[r, target]
        for i in range(n):
            if not (valid[r, i] and np.isfinite(sq_distance[r, i])):
                continue
            fresh_s = has_variance and np.isfinite(variance[r, i])
            s_i = variance[r, i] if fresh_s else past[r, i]
            noise_i = 0.0 if i == target else s_i + s_target
            distance[r, i] = decay * distance[r, i] + rate * sq_distance[r, i]
            noise[r, i] = decay * noise[r, i] + rate * noise_i
            weight[r, i] = decay * weight[r, i] + rate
            if fresh_s:
                spread[r, i] = decay * spread[r, i] + rate * s_i
                spread_weight[r, i] = decay * spread_weight[r, i] + rate
    return alpha, bias_sq, past


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def sq_distances(updates: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(T, N) ``||g[t, i] - g[t, targets[t]]||^2`` of (T, N, P) updates, accumulated in float64.

    One pass over the updates with no temporary (the torch expression needs the (T, N, P) difference).
    Reassociation lets the sum vectorise; NaN and inf still propagate (a broken reply stays non-finite).
    """
    t_count, n, p = updates.shape
    out = np.empty((t_count, n))
    for t in range(t_count):
        own = targets[t]
        for i in range(n):
            acc = 0.0
            for k in range(p):
                diff = np.float64(updates[t, i, k]) - np.float64(updates[t, own, k])
                acc += diff * diff
            out[t, i] = acc
    return out
