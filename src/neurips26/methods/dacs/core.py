"""DACS's pieces on plain tensors: gradient reversal, the ratio QP, feature-conditional edge ratios.

Paper: "Dual Alignment for Covariate Shift" (DACS, NeurIPS 2026). The abstract names three stages; the
estimators below are our design (see the README's "paper says / we chose / why").

* :class:`GradientReversal` -- DANN's layer (Ganin & Lempitsky 2015): identity forward, ``-alpha * grad``
  backward.
* :func:`solve_ratio_qp` -- Pair-Align's regularised constrained least squares (Liu et al., ICML 2024):
  ``min_w ||C w - mu_T||^2 + lam ||w - 1||^2  s.t.  mu_S . w = 1, w >= 0`` (cvxpy, OSQP), with
  :func:`ratio_qp_closed_form` for the case where ``w >= 0`` is inactive.
* :func:`conditional_ratio` -- ``gamma_ab = (P_T(b | a) + delta) / (P_S(b | a) + delta)`` from the joint
  ratio ``w``.
* :func:`prototype_edge_ratio` -- DACS stage 2: k-means prototypes on the joint layer representation,
  edge-pair histograms per domain, the QP, and one weight per source edge.
* :func:`density_ratio_edge_weights` -- the continuous variant: a logistic edge-domain classifier on
  ``(h_i, h_j)`` features, normalised per receiving node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

# ---------------------------------------------------------------------------------------------------------
# Stage 1 and 3: adversarial alignment


class _ReverseGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: float) -> torch.Tensor:  # type: ignore[override]
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return -ctx.alpha * grad, None


def reverse_gradient(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Identity in the forward pass; multiplies the gradient by ``-alpha`` in the backward pass."""
    return _ReverseGradient.apply(x, float(alpha))


class GradientReversal(torch.nn.Module):
    """DANN's gradient-reversal layer (Ganin & Lempitsky, ICML 2015) as a module; ``alpha`` is settable."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reverse_gradient(x, self.alpha)


def dann_schedule(progress: float, gamma: float = 10.0) -> float:
    """DANN's ramp of the reversal coefficient, ``2 / (1 + exp(-gamma p)) - 1`` for ``p`` in [0, 1]."""
    return 2.0 / (1.0 + math.exp(-gamma * min(max(progress, 0.0), 1.0))) - 1.0


def domain_adversarial_loss(
    discriminator: torch.nn.Module, source: torch.Tensor, target: torch.Tensor, alpha: float
) -> torch.Tensor:
    """Binary cross-entropy of a domain discriminator behind a GRL (source label 0, target label 1).

    The two domains are averaged separately, so a size imbalance does not tilt the loss.
    """
    logit_s = discriminator(reverse_gradient(source, alpha)).squeeze(-1)
    logit_t = discriminator(reverse_gradient(target, alpha)).squeeze(-1)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    return 0.5 * (bce(logit_s, torch.zeros_like(logit_s)) + bce(logit_t, torch.ones_like(logit_t)))


# ---------------------------------------------------------------------------------------------------------
# Stage 2: the ratio QP (Pair-Align style)


def _check_qp_inputs(
    confusion: np.ndarray, target_mean: np.ndarray, source_mean: np.ndarray, lam: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    confusion = np.asarray(confusion, dtype=np.float64)
    target_mean = np.asarray(target_mean, dtype=np.float64).ravel()
    source_mean = np.asarray(source_mean, dtype=np.float64).ravel()
    m = source_mean.shape[0]
    if confusion.shape != (target_mean.shape[0], m):
        raise ValueError(
            f"confusion must have shape (len(target_mean), len(source_mean)) = "
            f"({target_mean.shape[0]}, {m}), got {confusion.shape}"
        )
    if (source_mean < 0).any() or source_mean.sum() <= 0:
        raise ValueError("source_mean must be non-negative with a positive sum")
    if lam < 0 or not math.isfinite(lam):
        raise ValueError(f"lam must be finite and >= 0, got {lam}")
    return confusion, target_mean, source_mean


@lru_cache(maxsize=32)
def _ratio_problem(rows: int, cols: int) -> tuple[object, ...]:
    """A DPP-parametrised cvxpy problem, compiled once per shape and reused (solves take milliseconds)."""
    import cvxpy as cp

    w = cp.Variable(cols)
    confusion = cp.Parameter((rows, cols))
    target = cp.Parameter(rows)
    source = cp.Parameter(cols, nonneg=True)
    sqrt_lam = cp.Parameter(nonneg=True)
    objective = cp.sum_squares(confusion @ w - target) + cp.sum_squares(sqrt_lam * (w - 1))
    problem = cp.Problem(cp.Minimize(objective), [source @ w == 1, w >= 0])
    return problem, w, confusion, target, source, sqrt_lam


def solve_ratio_qp(
    confusion: np.ndarray, target_mean: np.ndarray, source_mean: np.ndarray, lam: float
) -> np.ndarray:
    """Pair-Align's constrained least squares for a distribution ratio ``w`` (cvxpy with OSQP).

    ``min_w ||C w - mu_T||^2 + lam ||w - 1||^2``  s.t.  ``mu_S . w = 1``, ``w >= 0``.

    Parameters
    ----------
    confusion: ``C`` of shape ``(r, m)``: ``C[k, l] = P_S(observed k, latent l)``. For DACS's prototypes the
        latent pair is observed, so ``C = diag(mu_S)``.
    target_mean: ``mu_T`` of shape ``(r,)``: the target's distribution of the observed quantity.
    source_mean: ``mu_S`` of shape ``(m,)``: the source's distribution of the latent quantity.
    lam: the pull towards ``w = 1`` (Pair-Align's ``lambda``), ``>= 0``.

    Returns
    -------
    ``w`` of shape ``(m,)``, ``w >= 0`` and ``mu_S . w = 1`` up to the solver's tolerance.
    """
    import cvxpy as cp

    confusion, target_mean, source_mean = _check_qp_inputs(confusion, target_mean, source_mean, lam)
    problem, w, c_par, t_par, s_par, l_par = _ratio_problem(*confusion.shape)
    c_par.value = confusion
    t_par.value = target_mean
    s_par.value = source_mean
    l_par.value = math.sqrt(lam)
    try:
        problem.solve(solver=cp.OSQP, eps_abs=1e-9, eps_rel=1e-9, max_iter=20000, polishing=True)
    except cp.error.SolverError:
        problem.solve(solver=cp.CLARABEL)
    if w.value is None:
        raise RuntimeError(f"the ratio QP did not solve (status {problem.status})")
    return np.clip(np.asarray(w.value, dtype=np.float64), 0.0, None)


def ratio_qp_closed_form(
    confusion: np.ndarray, target_mean: np.ndarray, source_mean: np.ndarray, lam: float
) -> np.ndarray:
    """The QP's minimiser without ``w >= 0`` (KKT of the equality-constrained least squares).

    ``(C^T C + lam I) w = C^T mu_T + lam 1 - nu/2 mu_S`` with ``nu`` set by ``mu_S . w = 1``. It equals
    :func:`solve_ratio_qp` whenever the result is non-negative.
    """
    confusion, target_mean, source_mean = _check_qp_inputs(confusion, target_mean, source_mean, lam)
    m = source_mean.shape[0]
    hessian = confusion.T @ confusion + lam * np.eye(m)
    rhs = confusion.T @ target_mean + lam * np.ones(m)
    base = np.linalg.solve(hessian, rhs)
    direction = np.linalg.solve(hessian, source_mean)
    half_nu = (source_mean @ base - 1.0) / (source_mean @ direction)
    return base - half_nu * direction


def conditional_ratio(joint_ratio: np.ndarray, source_joint: np.ndarray, delta: float) -> np.ndarray:
    """``gamma[a, b] = (P_T(b | a) + delta) / (P_S(b | a) + delta)`` from the joint ratio ``w``.

    ``P_T(a, b) = w[a, b] P_S(a, b)``; ``delta >= 0`` is Pair-Align's additive regulariser, which pulls
    ratios built from few edges towards 1.
    """
    source_joint = np.asarray(source_joint, dtype=np.float64)
    target_joint = joint_ratio * source_joint
    eps = 1e-12
    p_s = source_joint / np.maximum(source_joint.sum(axis=1, keepdims=True), eps)
    p_t = target_joint / np.maximum(target_joint.sum(axis=1, keepdims=True), eps)
    return (p_t + delta) / (p_s + delta)


# ---------------------------------------------------------------------------------------------------------
# Stage 2: feature-conditional edge ratio from prototypes


@dataclass
class EdgeRatioEstimate:
    """One layer's estimate: ``weights`` per source edge and the pieces they come from."""

    weights: torch.Tensor  # (E_S,) one weight per source edge (j -> i)
    gamma: np.ndarray  # (K, K) conditional ratio gamma[a, b], a = receiving node's prototype
    joint_ratio: np.ndarray  # (K, K) the QP's w
    source_joint: np.ndarray  # (K, K) P_S(a, b) over edges
    target_joint: np.ndarray  # (K, K) P_T(a, b) over edges
    source_assign: np.ndarray  # (N_S,) prototype of each source node
    target_assign: np.ndarray  # (N_T,) prototype of each target node
    centers: np.ndarray  # (K, d) k-means centres (standardised space), the next estimate's warm start


def edge_pair_histogram(assign: np.ndarray, edge_index: np.ndarray, k: int) -> np.ndarray:
    """``P(a, b)`` over edges ``(j -> i)`` with ``a`` the prototype of ``i`` and ``b`` of ``j``."""
    receiving = assign[edge_index[1]]
    sending = assign[edge_index[0]]
    counts = np.bincount(receiving * k + sending, minlength=k * k).astype(np.float64).reshape(k, k)
    total = counts.sum()
    return counts / total if total > 0 else counts


def cluster_prototypes(
    source_repr: torch.Tensor,
    target_repr: torch.Tensor,
    k: int,
    seed: int,
    init: np.ndarray | None = None,
    max_fit: int = 4000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K-means (scikit-learn) on the joint, standardised representations of both domains.

    Fitted on at most ``max_fit`` nodes drawn evenly from both domains, then every node is assigned to
    its nearest centre (linear in the node count). ``init`` (``(k, d)``, e.g. the previous estimate's
    centres) warm-starts one k-means run; otherwise k-means++ with one restart. Returns the source
    labels, the target labels and the centres (in the standardised space).
    """
    from sklearn.cluster import KMeans

    joint = torch.cat([source_repr, target_repr]).detach().cpu().double().numpy()
    n_total = joint.shape[0]
    if k > n_total:
        raise ValueError(f"n_prototypes={k} exceeds the number of nodes in both domains ({n_total})")
    joint = (joint - joint.mean(axis=0)) / (joint.std(axis=0) + 1e-8)
    rng = np.random.default_rng(seed)
    fit_rows = rng.permutation(n_total)[:max_fit] if n_total > max_fit else np.arange(n_total)
    usable_init = init is not None and init.shape == (k, joint.shape[1])
    kmeans = KMeans(
        n_clusters=k, init=init if usable_init else "k-means++", n_init=1, random_state=seed, max_iter=100
    ).fit(joint[fit_rows])
    labels = kmeans.predict(joint).astype(np.int64)
    n_source = source_repr.shape[0]
    return labels[:n_source], labels[n_source:], kmeans.cluster_centers_


def prototype_edge_ratio(
    source_repr: torch.Tensor,
    target_repr: torch.Tensor,
    source_edge_index: torch.Tensor,
    target_edge_index: torch.Tensor,
    k: int,
    lam: float,
    delta: float,
    seed: int = 0,
    max_weight: float = 10.0,
    init: np.ndarray | None = None,
) -> EdgeRatioEstimate:
    """DACS stage 2 at one layer: the feature-conditional edge ratio on source edges.

    1. prototypes ``a(i)`` by k-means on the joint layer representations (never the generator's latents);
    2. edge-pair distributions ``P_S(a, b)``, ``P_T(a, b)`` (``a`` receiving, ``b`` sending);
    3. ``w`` from :func:`solve_ratio_qp` with ``C = K^2 diag(P_S)`` and ``mu_T = K^2 P_T`` (prototypes are
       observed in both domains, so the confusion is diagonal; the ``K^2`` scale makes ``lam`` a pull
       towards 1 relative to O(1) residuals whatever K is);
    4. ``gamma = conditional_ratio(w, P_S, delta)`` and the weight of source edge ``(j -> i)`` is
       ``gamma[a(i), a(j)]``, clipped to ``max_weight``.

    ``init`` warm-starts k-means from earlier centres (the trainer passes the previous estimate's).
    """
    src_assign, tgt_assign, centers = cluster_prototypes(source_repr, target_repr, k, seed, init)
    src_edges = source_edge_index.detach().cpu().numpy()
    tgt_edges = target_edge_index.detach().cpu().numpy()
    p_s = edge_pair_histogram(src_assign, src_edges, k)
    p_t = edge_pair_histogram(tgt_assign, tgt_edges, k)
    flat_s = p_s.ravel()
    # scale C and mu_T by K^2 (1 / the mean pair mass) so that lam weighs against O(1) residuals at any K
    scale = float(k * k)
    w = solve_ratio_qp(np.diag(flat_s) * scale, p_t.ravel() * scale, flat_s, lam).reshape(k, k)
    gamma = np.minimum(conditional_ratio(w, p_s, delta), max_weight)
    weights = gamma[src_assign[src_edges[1]], src_assign[src_edges[0]]]
    return EdgeRatioEstimate(
        weights=torch.as_tensor(weights, dtype=source_repr.dtype, device=source_repr.device),
        gamma=gamma,
        joint_ratio=w,
        source_joint=p_s,
        target_joint=p_t,
        source_assign=src_assign,
        target_assign=tgt_assign,
        centers=centers,
    )


def _pair_features(h: np.ndarray, edges: np.ndarray) -> np.ndarray:
    receiving, sending = h[edges[1]], h[edges[0]]
    return np.concatenate([receiving, sending, receiving * sending], axis=1)


def density_ratio_edge_weights(
    source_repr: torch.Tensor,
    target_repr: torch.Tensor,
    source_edge_index: torch.Tensor,
    target_edge_index: torch.Tensor,
    seed: int = 0,
    shrink: float = 0.0,
    max_weight: float = 10.0,
    max_edges: int = 4000,
) -> torch.Tensor:
    """The continuous variant of stage 2: an edge density-ratio classifier on ``(h_i, h_j)``.

    A logistic regression separates target edges from source edges on ``[h_i, h_j, h_i * h_j]``
    (standardised over both domains); ``r_ij = (p / (1 - p)) * (E_S / E_T)`` estimates the joint ratio
    ``P_T(i, j) / P_S(i, j)``. The conditional ratio divides by the node-level ratio, estimated by the
    mean of ``r`` over ``i``'s source neighbours: ``gamma_ij = r_ij / mean_{j'} r_ij'``. ``shrink`` in
    [0, 1] pulls ``gamma`` towards 1 (the continuous analogue of ``delta``).
    """
    from sklearn.linear_model import LogisticRegression

    h_s = source_repr.detach().cpu().double().numpy()
    h_t = target_repr.detach().cpu().double().numpy()
    mean = np.concatenate([h_s, h_t]).mean(axis=0)
    std = np.concatenate([h_s, h_t]).std(axis=0) + 1e-8
    h_s, h_t = (h_s - mean) / std, (h_t - mean) / std
    src_edges = source_edge_index.detach().cpu().numpy()
    tgt_edges = target_edge_index.detach().cpu().numpy()
    rng = np.random.default_rng(seed)
    fit_s = src_edges[:, rng.permutation(src_edges.shape[1])[:max_edges]]
    fit_t = tgt_edges[:, rng.permutation(tgt_edges.shape[1])[:max_edges]]
    features = np.concatenate([_pair_features(h_s, fit_s), _pair_features(h_t, fit_t)])
    labels = np.concatenate([np.zeros(fit_s.shape[1]), np.ones(fit_t.shape[1])])
    classifier = LogisticRegression(C=1.0, max_iter=300).fit(features, labels)
    log_odds = classifier.decision_function(_pair_features(h_s, src_edges))
    ratio = np.exp(np.clip(log_odds, -10, 10)) * (fit_s.shape[1] / fit_t.shape[1])
    n_source = h_s.shape[0]
    receiving = src_edges[1]
    node_sum = np.bincount(receiving, weights=ratio, minlength=n_source)
    node_count = np.bincount(receiving, minlength=n_source)
    node_mean = node_sum / np.maximum(node_count, 1)
    gamma = ratio / np.maximum(node_mean[receiving], 1e-12)
    gamma = np.minimum((1.0 - shrink) * gamma + shrink, max_weight)
    return torch.as_tensor(gamma, dtype=source_repr.dtype, device=source_repr.device)
