"""POES's subset objective and its optimisers: lazy greedy (cold start) and bounded swaps (warm start).

Objective over a subset S of the item pool (all terms non-negative, so F is monotone submodular)::

    F(S) = lam * sum_{i in S} u_i  +  (1 - lam) * c * sum_j max_{i in S} sim(i, j)

u_i is the discrimination utility (normalised to max 1), sim an RBF similarity in [0, 1] and
c = k / n_items puts coverage on the same scale as k utilities. A modular term plus a facility
location is monotone submodular, so greedy attains (1 - 1/e) of the optimum (Nemhauser et al. 1978).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit


def rbf_similarity(embeddings: np.ndarray, bandwidth: float | None = None) -> np.ndarray:
    """RBF similarity exp(-||x_i - x_j||^2 / (2 h^2)) in [0, 1], shape (n, n); h = median distance.

    Parameters
    ----------
    embeddings:
        Item features, shape (n_items, dim).
    bandwidth:
        h; None uses the median pairwise distance (the usual heuristic).
    """
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"embeddings must have shape (n_items >= 1, dim), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("embeddings must be finite")
    sq = np.einsum("ij,ij->i", x, x)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
    if bandwidth is None:
        off = d2[np.triu_indices(len(x), 1)]
        med = float(np.median(off)) if off.size else 1.0
        h2 = med / 2.0 if med > 0 else 1.0  # 2 h^2 = median squared distance
    else:
        if bandwidth <= 0:
            raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
        h2 = bandwidth**2
    return np.exp(-d2 / (2.0 * h2)).astype(np.float32)


def discrimination_utility(
    leader_theta: np.ndarray, leader_weight: np.ndarray, difficulty: np.ndarray
) -> np.ndarray:
    """u_i = sum_{p in leaders} w_p P_pi (1 - P_pi), P_pi = sigmoid(theta_p - b_i): 1PL Fisher information.

    Shapes: leader_theta (K,), leader_weight (K,), difficulty (n_items,) -> (n_items,).
    """
    p = expit(np.asarray(leader_theta)[:, None] - np.asarray(difficulty)[None, :])
    return np.asarray(leader_weight) @ (p * (1.0 - p))


@dataclass
class SubsetObjective:
    """F(S) = lam * sum u_S + (1 - lam) * scale * facility_location(S); see the module docstring."""

    utility: np.ndarray  # (n,) >= 0
    similarity: np.ndarray  # (n, n) in [0, 1]
    lam: float
    coverage_scale: float

    def value(self, subset: list[int] | np.ndarray) -> float:
        """F(S); F(empty) = 0."""
        s = np.asarray(subset, dtype=np.int64)
        if s.size == 0:
            return 0.0
        cover = float(self.similarity[s].max(axis=0).sum(dtype=np.float64))
        return self.lam * float(self.utility[s].sum()) + (1.0 - self.lam) * self.coverage_scale * cover

    def gains(self, coverage: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Marginal gains of items ``rows`` (default: all) given the best-coverage vector (n,)."""
        sim = self.similarity if rows is None else self.similarity[rows]
        utility = self.utility if rows is None else self.utility[rows]
        # sum_j max(sim_ij - c_j, 0) = sum_j max(sim_ij, c_j) - sum_j c_j: one pass, no temporary
        fl = np.maximum(sim, coverage[None, :]).sum(axis=1, dtype=np.float64) - coverage.sum(dtype=np.float64)
        return self.lam * utility + (1.0 - self.lam) * self.coverage_scale * fl


def _float32_upper_bounds(
    sums: np.ndarray, lam_utility: np.ndarray, scale: float, covered: float, n: int
) -> np.ndarray:
    """Upper bounds on the exact (float64) gains from float32 row sums of max(sim, coverage) >= 0.

    A float32 sum of n non-negative terms, in any order, is within gamma_n = n u / (1 - n u) (relative)
    of the true sum (u = 2^-24; Higham, *Accuracy and Stability of Numerical Algorithms*, sec. 4.2), so
    the true sum is at most sums / (1 - gamma_n); the 1e-9 relative term covers float64 rounding in
    :meth:`SubsetObjective.gains`.
    """
    u = float(np.finfo(np.float32).eps) / 2.0
    gamma = n * u / (1.0 - n * u)
    total = sums.astype(np.float64) / (1.0 - gamma)
    slack = 1e-9 * (np.abs(lam_utility) + scale * (total + covered))
    return lam_utility + scale * (total - covered) + slack


def lazy_greedy(
    objective: SubsetObjective, k: int, batch: int = 32, float32_bounds: bool = True
) -> list[int]:
    """Greedy maximisation of F with lazy (Minoux 1978) marginal-gain bounds; returns k item indices.

    Every item keeps an upper bound on its current marginal gain: an exact gain from an earlier step
    (submodularity: gains only fall), or a float32 estimate widened by its rounding bound. Each step
    evaluates exactly, in one vectorised call, the ``batch`` items with the largest bounds, then every
    item whose bound still reaches the best exact gain (more than twice the batch: only the largest, the
    batch doubled), until no bound reaches it: that item is the greedy choice. Two full passes cannot be
    avoided on a dense facility location (at the first step every gain is unknown; the first pick raises
    the coverage of almost every column, so nearly every bound is too high at the second); those two
    passes compute float32 bounds (no float64 accumulation) and only their contenders get exact gains.
    Exact gains use the float operations of :meth:`SubsetObjective.gains` and ties break to the lowest
    index, as ``argmax`` does in plain greedy, so the subset equals plain greedy's. Bounds live in one
    array (no Python heap). Float32 bounds need a float32 similarity; other dtypes, or
    ``float32_bounds=False``, take exact full passes (same subset, slower).
    """
    n = len(objective.utility)
    if not 1 <= k <= n:
        raise ValueError(f"k must lie in [1, {n}], got {k}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    sim = objective.similarity
    lam_utility = objective.lam * objective.utility  # the terms of SubsetObjective.gains, same floats
    scale = (1.0 - objective.lam) * objective.coverage_scale
    screen = float32_bounds and sim.dtype == np.float32
    coverage = np.zeros(n, dtype=sim.dtype)
    covered = 0.0
    if screen:  # step 0: sum_j max(sim_ij, 0); a non-negative similarity needs no max
        sums = sim.sum(axis=1) if float(sim.min()) >= 0.0 else np.maximum(sim, 0).sum(axis=1)
        bound = _float32_upper_bounds(sums, lam_utility, scale, 0.0, n)
        stale = np.ones(n, dtype=bool)
    else:
        bound = objective.gains(coverage)
        stale = np.zeros(n, dtype=bool)
    alive = np.ones(n, dtype=bool)
    chosen: list[int] = []
    while True:
        live = n - len(chosen)
        size = min(batch, live)
        rows = np.argpartition(bound, n - size)[n - size :]
        rows = rows[stale[rows]]  # empty only at an exact step 0 (every bound fresh)
        best, full_done = -np.inf, False
        while rows.size:
            fl = np.maximum(sim[rows], coverage).sum(axis=1, dtype=np.float64) - covered
            values = lam_utility[rows] + scale * fl
            bound[rows] = values
            stale[rows] = False
            best = max(best, float(values.max()))
            rows = np.flatnonzero((bound >= best) & stale)  # may still match or beat the best exact gain
            if 4 * rows.size >= live and not full_done and (len(chosen) == 1 or 4 * size >= live):
                full_done = True  # most bounds are stale and too high: one full pass
                if screen:
                    sums = np.maximum(sim, coverage).sum(axis=1)
                    upper = _float32_upper_bounds(sums, lam_utility, scale, covered, n)
                    np.copyto(bound, upper, where=stale)
                    rows = np.flatnonzero((bound >= best) & stale)  # the contenders
                else:
                    rows = np.flatnonzero(stale)
            elif rows.size > 2 * size:
                size *= 2
                rows = rows[np.argpartition(bound[rows], rows.size - size)[rows.size - size :]]
        top = int(np.argmax(bound))  # no stale bound reaches the max: first index among exact ties
        chosen.append(top)
        if len(chosen) == k:
            return chosen
        bound[top] = -np.inf
        alive[top] = False
        np.maximum(coverage, sim[top], out=coverage)
        covered = coverage.sum(dtype=np.float64)
        stale = alive.copy()


def bounded_swaps(
    objective: SubsetObjective,
    previous: list[int],
    max_swaps: int,
    switching_cost: float,
    candidates: int = 64,
) -> tuple[list[int], int]:
    """Warm start: from ``previous`` make at most ``max_swaps`` single swaps, each only if it raises F by
    more than ``switching_cost``.

    Each swap takes the best exact (out, in) pair among the ``candidates`` outside items with the largest
    add-gain F(S + i) - F(S) (an upper bound on any swap's gain, so a good swap must come from them).
    Returns the new subset (same length) and the number of swaps made.
    """
    subset = list(previous)
    n = len(objective.utility)
    sim = objective.similarity
    scale = (1.0 - objective.lam) * objective.coverage_scale
    columns = np.arange(n)
    swaps = 0
    for _ in range(max_swaps):
        s = np.asarray(subset, dtype=np.int64)
        rows = sim[s]  # (k, n)
        owner = rows.argmax(axis=0)  # position in S of the item covering column j best
        best = rows[owner, columns]
        if len(s) > 1:
            masked = rows.copy()
            masked[owner, columns] = -np.inf
            second = masked.max(axis=0)
        else:
            second = np.zeros(n, dtype=rows.dtype)
        add_gain = objective.gains(best)
        add_gain[s] = -np.inf
        pool = np.argpartition(-add_gain, min(candidates, n - len(s)) - 1)[: min(candidates, n - len(s))]
        cand = sim[pool]  # (M, n)
        # FL after swapping out s_a, in i: sum_j max(base_a_j, sim_ij), base_a_j = second_j on a's columns
        with_best = np.maximum(cand, best[None, :])
        correction = (
            np.clip(cand, second[None, :], best[None, :]) - best[None, :]
        )  # <= 0, on a's columns only
        per_owner = np.zeros((len(pool), len(s)))
        for a in range(len(s)):
            cols = owner == a
            if cols.any():
                per_owner[:, a] = correction[:, cols].sum(axis=1, dtype=np.float64)
        delta_fl = (with_best.sum(axis=1, dtype=np.float64) - best.sum(dtype=np.float64))[:, None] + per_owner
        delta = (
            objective.lam * (objective.utility[pool][:, None] - objective.utility[s][None, :])
            + scale * delta_fl
        )
        flat = int(np.argmax(delta))
        row, a_out = divmod(flat, len(s))
        if not delta[row, a_out] > switching_cost:
            break
        subset[a_out] = int(pool[row])
        swaps += 1
    return subset, swaps


@dataclass
class WeightController:
    """Adaptive lam: more discrimination as the top prompt's lead grows, back to coverage on a stall.

    lam_t = min + (max - min) * sigmoid(z - z0), z = (theta_1 - theta_2) / sqrt(sd_1^2 + sd_2^2);
    if the best ability has not risen for ``patience`` rounds, lam_t *= stall_factor.
    """

    min_weight: float
    max_weight: float
    margin_midpoint: float
    patience: int
    stall_factor: float
    best_so_far: float = -np.inf
    rounds_since_improvement: int = 0

    def update(self, theta: np.ndarray, theta_sd: np.ndarray) -> float:
        """The new lam from the current abilities (n_prompts,) and their sds."""
        if theta.size == 0:
            return self.min_weight
        order = np.argsort(-theta, kind="stable")
        top = order[0]
        if theta.size > 1:
            runner = order[1]
            z = (theta[top] - theta[runner]) / np.hypot(theta_sd[top], theta_sd[runner])
        else:
            z = 0.0
        lam = self.min_weight + (self.max_weight - self.min_weight) * float(expit(z - self.margin_midpoint))
        if theta[top] > self.best_so_far + 1e-3:
            self.best_so_far = float(theta[top])
            self.rounds_since_improvement = 0
        else:
            self.rounds_since_improvement += 1
        if self.rounds_since_improvement >= self.patience:
            lam *= self.stall_factor
        return lam
