"""SP-CACW on plain arrays: the bound-minimising client weights, the on-the-fly estimators, the round log.

SP-CACW: Convergence-Aware Client Weighting for Selfish Personalized Learning (Kiselman and Levy, 2026).
A target client (index ``target``) steps along ``g = sum_i alpha_i g_i``, where ``g_i`` is client ``i``'s
stochastic gradient (or local-step pseudo-gradient) at the target's model. The weights minimise, over the
simplex, an upper bound on the target's convergence error. The abstract does not state the bound; the
one below is OURS (a standard non-convex SGD bound for an L-smooth target, as in Chayti et al. 2021's
weighted gradient averaging), until the paper's text is read::

    E||grad f_0||^2 <~ (f_0(x_0) - f*) / (eta T) + Phi(alpha),
    Phi(alpha) = L eta sum_i alpha_i^2 sigma_i^2 / b_i + B(alpha),                    (variance + bias)
    B(alpha)   = (sum_i alpha_i zeta_i)^2        (bias_form="squared")
               | sum_i alpha_i zeta_i^2          (bias_form="linear", Jensen's looser form),

with ``zeta_i >= ||grad f_i - grad f_0||`` (``zeta_0 = 0``). Both forms have an exact sort-based solution
(the KKT active set is the clients below a bias threshold), implemented here and cross-checked by OSQP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurips26.core.validation import check_choice, check_int, check_positive

BIAS_FORMS = ("squared", "linear")
SOLVERS = ("exact", "osqp")
_VARIANCE_FLOOR = 1e-12  # relative to the largest variance: a zero-variance client keeps a finite weight


@dataclass(frozen=True)
class WeightSolution:
    """The weights chosen for one target, with the bound's terms (the per-round certificate).

    Attributes
    ----------
    alpha : (N,) weights on the simplex; ``alpha[target]`` is the target's own.
    threshold : a client whose ``zeta_i^2 >= threshold`` gets exactly zero weight (in zeta^2 units).
    variance_terms : (N,) ``L eta alpha_i^2 s_i``.
    bias : float, ``B(alpha)``.
    bound : ``Phi(alpha)``, the bound at the chosen weights.
    local_bound : ``Phi(e_target) = L eta s_target``, the bound of training alone.
    """

    alpha: np.ndarray
    threshold: float
    variance_terms: np.ndarray
    bias: float
    bound: float
    local_bound: float
    target: int

    @property
    def better_off_alone(self) -> bool:
        """The certificate: True when no mixture of peers lowers the target's bound below local-only."""
        peers = np.delete(self.alpha, self.target)
        return bool((peers == 0.0).all())

    @property
    def gain(self) -> float:
        """``local_bound - bound`` (>= 0): how much the peers lower the target's bound."""
        return self.local_bound - self.bound


def bound_value(
    alpha: np.ndarray, variance: np.ndarray, bias_sq: np.ndarray, scale: float, bias_form: str
) -> float:
    """``Phi(alpha)`` for weights ``alpha`` (N,), per-client minibatch variances ``s_i = sigma_i^2/b_i`` and
    squared biases ``zeta_i^2``; ``scale = L * eta``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    variance_part = scale * float(np.sum(alpha**2 * np.asarray(variance, dtype=np.float64)))
    return variance_part + _bias_term(alpha, np.asarray(bias_sq, dtype=np.float64), bias_form)


def _bias_term(alpha: np.ndarray, bias_sq: np.ndarray, bias_form: str) -> float:
    if bias_form == "squared":
        return float(np.dot(alpha, np.sqrt(bias_sq)) ** 2)
    return float(np.dot(alpha, bias_sq))


def _validate(variance: Any, bias_sq: Any, scale: float, target: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(variance, dtype=np.float64)
    z = np.asarray(bias_sq, dtype=np.float64)
    if s.ndim != 1 or s.shape != z.shape:
        raise ValueError(
            f"variance and bias_sq must be 1-D of equal length, got shapes {s.shape} and {z.shape}"
        )
    if s.size < 2:
        raise ValueError(f"need the target and at least one peer, got {s.size} client(s) (zero peers)")
    if not (np.isfinite(s).all() and (s >= 0).all()):
        raise ValueError("variance must be finite and >= 0 for every client")
    if np.isnan(z).any() or (z < 0).any():
        raise ValueError("bias_sq must be >= 0 (or +inf for a client to exclude) for every client")
    check_positive("scale (smoothness * lr)", scale)
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or not 0 <= target < s.size:
        raise ValueError(f"target={target!r} is not among the {s.size} clients (allowed 0..{s.size - 1})")
    if z[target] != 0.0:
        raise ValueError(f"bias_sq[target] must be 0 (the target's bias to itself), got {z[target]!r}")
    floor = _VARIANCE_FLOOR * max(float(s.max()), 1e-300)
    return np.maximum(s, floor), z


def choose_weights(
    variance: Any,
    bias_sq: Any,
    *,
    scale: float,
    bias_form: str = "linear",
    solver: str = "exact",
    target: int = 0,
) -> WeightSolution:
    """Minimise the target's bound ``Phi(alpha)`` over the simplex.

    Parameters
    ----------
    variance : (N,) ``s_i = sigma_i^2 / b_i``, the variance of client i's minibatch gradient.
    bias_sq : (N,) ``zeta_i^2``, the squared bias of client i against the target (``bias_sq[target] = 0``).
    scale : ``L * eta`` (> 0).
    bias_form : ``"squared"`` for ``(sum alpha_i zeta_i)^2`` or ``"linear"`` for ``sum alpha_i zeta_i^2``.
    solver : ``"exact"`` (sort-based KKT solution) or ``"osqp"`` (the QP by OSQP, a cross-check).
    target : index of the target client.

    Returns
    -------
    WeightSolution
        Weights, zero-weight threshold and the bound's terms, including the local-only bound.
    """
    check_choice("bias_form", bias_form, BIAS_FORMS)
    check_choice("solver", solver, SOLVERS)
    s, z = _validate(variance, bias_sq, scale, target)
    finite = np.isfinite(z)  # zeta = inf (e.g. a peer never observed) excludes the client
    alpha = np.zeros_like(s)
    if solver == "exact":
        sub, threshold_arr = solve_exact(s[finite][None], z[finite][None], scale, bias_form)
        alpha[finite], threshold = sub[0], float(threshold_arr[0])
    else:
        alpha[finite], threshold = _solve_osqp(s[finite], z[finite], scale, bias_form)
    z = np.where(finite, z, 0.0)  # excluded clients carry no weight, so no bias
    variance_terms = scale * alpha**2 * s
    bias = _bias_term(alpha, z, bias_form)
    return WeightSolution(
        alpha=alpha,
        threshold=threshold,
        variance_terms=variance_terms,
        bias=bias,
        bound=float(variance_terms.sum()) + bias,
        local_bound=float(scale * s[target]),
        target=int(target),
    )


def solve_exact(
    variance: np.ndarray, bias_sq: np.ndarray, scale: float, bias_form: str
) -> tuple[np.ndarray, np.ndarray]:
    """The exact minimiser for a batch of problems, vectorised over rows (no Python loop over clients).

    KKT: with ``w_i = 1 / (2 L eta s_i)``, the optimum is ``alpha_i = w_i (lam - zeta_i^2)_+`` (linear form)
    or ``alpha_i = w_i lam (1 - zeta_i / tau)_+`` (squared form), so the support is the clients whose bias
    lies below a threshold: a prefix of the clients sorted by bias. For each prefix k the multiplier follows
    in closed form from ``sum alpha = 1``; the valid prefix is the one whose threshold separates client k
    from client k+1 (linear form: the last prefix whose client lies below its own multiplier). The weights
    are formed in the clients' own order from the multiplier, so only the bias and variance are permuted.

    Parameters
    ----------
    variance, bias_sq : (R, N) positive variances and non-negative squared biases, one problem per row.
    scale : ``L * eta``.
    bias_form : ``"squared"`` or ``"linear"``.

    Returns
    -------
    alpha : (R, N) weights; threshold : (R,) zero-weight threshold in zeta^2 units (inf when all are active).
    """
    rows = np.arange(variance.shape[0])[:, None]
    order = np.argsort(bias_sq, axis=1, kind="stable")
    w_all = 1.0 / (2.0 * scale * variance)
    w = w_all[rows, order]
    zsq = bias_sq[rows, order]
    last = zsq.shape[1] - 1
    if bias_form == "linear":
        # lam_k = (1 + sum_{j<=k} w_j zeta_j^2) / sum_{j<=k} w_j. The optimum's lam solves
        # f(lam) = sum_i w_i (lam - zeta_i^2)_+ = 1 (f increasing), and zeta_k^2 < lam_k iff f(zeta_k^2) < 1
        # iff zeta_k^2 < lam: the prefixes with zeta_k^2 < lam_k are exactly the support, so k = count - 1
        lam = (1.0 + np.cumsum(w * zsq, axis=1)) / np.cumsum(w, axis=1)
        k = np.count_nonzero(zsq < lam, axis=1) - 1  # >= 0: zeta_target^2 = 0 < lam_0
        lam_k = lam[rows[:, 0], k]
        alpha = w_all * np.maximum(lam_k[:, None] - bias_sq, 0.0)  # in the clients' own order
        threshold = np.where(k == last, np.inf, lam_k)
    else:
        cum_w = np.cumsum(w, axis=1)
        next_z = np.concatenate([zsq[:, 1:], np.full((zsq.shape[0], 1), np.inf)], axis=1)
        zeta = np.sqrt(zsq)
        next_zeta = np.sqrt(next_z)
        cum_b = np.cumsum(w * zeta, axis=1)
        one_plus = 1.0 + 2.0 * np.cumsum(w * zsq, axis=1)
        # tau_k = (1 + 2 C_k) / (2 B_k): valid when zeta_k < tau_k <= zeta_{k+1} (written without division)
        with np.errstate(invalid="ignore"):  # 0 * inf past the last client: that prefix is always closed
            upper = np.where(np.isinf(next_zeta), np.inf, 2.0 * cum_b * next_zeta)
        valid = (2.0 * cum_b * zeta < one_plus) & (one_plus <= upper)
        k = _first_true(valid)
        r = rows[:, 0]
        a_k, b_k, c_k = cum_w[r, k], cum_b[r, k], one_plus[r, k]
        lam_k = c_k / (a_k * c_k - 2.0 * b_k**2)  # A(1+2C) - 2B^2 >= A > 0 by Cauchy-Schwarz
        with np.errstate(divide="ignore"):
            tau = np.where(b_k > 0, c_k / (2.0 * b_k), np.inf)
        finite_tau = np.isfinite(tau)
        ratio = np.where(finite_tau[:, None], np.sqrt(bias_sq) / np.where(finite_tau, tau, 1.0)[:, None], 0.0)
        alpha = w_all * lam_k[:, None] * np.maximum(1.0 - ratio, 0.0)  # in the clients' own order
        with np.errstate(over="ignore"):  # a denormal bias gives tau^2 = inf: no client is cut off
            threshold = np.where(k == last, np.inf, tau**2)
    alpha /= alpha.sum(axis=1, keepdims=True)  # removes the last ulp of rounding
    return alpha, threshold


def _first_true(valid: np.ndarray) -> np.ndarray:
    """Index of the first True per row; rows with none (rounding at a tie) fall back to the best prefix."""
    has = valid.any(axis=1)
    first = np.argmax(valid, axis=1)
    return np.where(has, first, valid.shape[1] - 1)


def _solve_osqp(s: np.ndarray, z: np.ndarray, scale: float, bias_form: str) -> tuple[np.ndarray, float]:
    """The same QP by OSQP: ``min 1/2 a^T P a + q^T a`` s.t. ``1^T a = 1, a >= 0``."""
    import osqp
    from scipy import sparse

    n = s.size
    p_dense = 2.0 * scale * np.diag(s)
    q = np.zeros(n)
    if bias_form == "squared":
        zeta = np.sqrt(z)
        p_dense = p_dense + 2.0 * np.outer(zeta, zeta)
    else:
        q = z.copy()
    constraints = sparse.vstack(
        [sparse.csc_matrix(np.ones((1, n))), sparse.identity(n, format="csc")], format="csc"
    )
    lower = np.concatenate([[1.0], np.zeros(n)])
    upper = np.concatenate([[1.0], np.full(n, np.inf)])
    problem = osqp.OSQP()
    problem.setup(
        sparse.csc_matrix(np.triu(p_dense)), q, constraints, lower, upper,
        eps_abs=1e-10, eps_rel=1e-10, max_iter=200_000, polishing=True, verbose=False,
    )  # fmt: skip
    result = problem.solve(raise_error=False)
    if "solved" not in str(result.info.status).lower():
        raise RuntimeError(f"OSQP did not solve the weight QP: status {result.info.status!r}")
    alpha = np.clip(np.asarray(result.x, dtype=np.float64), 0.0, None)
    alpha[alpha < 1e-9] = 0.0
    alpha /= alpha.sum()
    # the threshold from the KKT conditions of the support
    support = alpha > 0
    w = 1.0 / (2.0 * scale * s)
    if bias_form == "linear":
        lam = (1.0 + np.sum((w * z)[support])) / np.sum(w[support])
        threshold = lam if not support.all() else np.inf
    else:
        zeta = np.sqrt(z)
        b = np.sum((w * zeta)[support])
        c = 1.0 + 2.0 * np.sum((w * z)[support])
        threshold = (c / (2.0 * b)) ** 2 if (b > 0 and not support.all()) else np.inf
    return alpha, float(threshold)


# ----------------------------------------------------------------------------------------- estimators


def within_client_variance(group_gradients: Any) -> tuple[Any, Any]:
    """Minibatch gradient and its variance from ``m`` equal micro-batch gradients of the same minibatch.

    With micro-batch means ``G_1..G_m`` (each over b/m samples) and their mean ``g``, the unbiased estimate of
    the variance of ``g`` (trace of its covariance, ``sigma^2 / b``) is ``sum_j ||G_j - g||^2 / (m (m - 1))``.

    Parameters
    ----------
    group_gradients : (..., m, P) array or tensor, ``m >= 2``.

    Returns
    -------
    gradient : (..., P) the minibatch gradient ``g``; variance : (...) the estimate of ``sigma^2 / b``.
    """
    m = group_gradients.shape[-2]
    if m < 2:
        raise ValueError(f"group_gradients needs at least 2 micro-batches on axis -2, got {m}")
    gradient = group_gradients.mean(-2)
    deviation = group_gradients - gradient[..., None, :]
    variance = (deviation**2).sum(-1).sum(-1) / (m * (m - 1))
    return gradient, variance


@dataclass
class BiasEstimator:
    """Debiased EMA of the squared bias ``zeta_i^2`` of every client against the target.

    It also keeps the EMA of every client's minibatch variance ``s_i`` (:meth:`variance`). Each round,
    ``D_i = ||g_i - g_0||^2`` has expectation ``zeta_i^2 + s_i + s_0`` for independent unbiased
    gradients, so ``zeta_i^2 ~ EMA(D_i) - EMA(s_i + s_0)``, floored at 0. Both EMAs are bias-corrected
    (divided by ``1 - decay^t_i``, ``t_i`` = rounds client i was observed), so the estimate is unbiased from
    the first observation on. A client not observed in a round (dropped) keeps its state.
    """

    n_clients: int
    target: int = 0
    decay: float = 0.9
    distance: np.ndarray = field(init=False)
    noise: np.ndarray = field(init=False)
    spread: np.ndarray = field(init=False)
    weight: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        check_int("n_clients", self.n_clients, minimum=2)
        if not 0 <= self.target < self.n_clients:
            raise ValueError(f"target={self.target!r} is not among the {self.n_clients} clients")
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must lie in [0, 1), got {self.decay!r}")
        self.distance = np.zeros(self.n_clients)
        self.noise = np.zeros(self.n_clients)
        self.spread = np.zeros(self.n_clients)
        self.weight = np.zeros(self.n_clients)

    def update(self, sq_distance: Any, variance: Any, observed: Any = None) -> None:
        """Add one round: ``sq_distance`` (N,) ``||g_i - g_0||^2``, ``variance`` (N,) ``s_i``;
        ``observed`` (N,) bool marks the clients whose reply was valid this round."""
        d = np.asarray(sq_distance, dtype=np.float64)
        s = np.asarray(variance, dtype=np.float64)
        mask = np.ones(self.n_clients, bool) if observed is None else np.asarray(observed, bool).copy()
        if d.shape != (self.n_clients,) or s.shape != (self.n_clients,) or mask.shape != (self.n_clients,):
            raise ValueError(f"sq_distance, variance and observed must have shape ({self.n_clients},)")
        mask &= np.isfinite(d) & np.isfinite(s)
        if not mask[self.target]:
            return  # without the target's own gradient no distance is defined this round
        noise = np.where(mask, s + s[self.target], 0.0)
        noise[self.target] = 0.0
        keep = np.where(mask, self.decay, 1.0)
        self.distance = keep * self.distance + np.where(mask, (1 - self.decay) * np.nan_to_num(d), 0.0)
        self.noise = keep * self.noise + np.where(mask, (1 - self.decay) * noise, 0.0)
        self.spread = keep * self.spread + np.where(mask, (1 - self.decay) * np.nan_to_num(s), 0.0)
        self.weight = keep * self.weight + np.where(mask, 1 - self.decay, 0.0)

    @property
    def observed(self) -> np.ndarray:
        """(N,) bool: clients with at least one observation."""
        return self.weight > 0

    def raw(self) -> np.ndarray:
        """(N,) the bias-corrected ``EMA(D) - EMA(s_i + s_0)`` before flooring (unbiased; may be < 0)."""
        safe = np.where(self.weight > 0, self.weight, 1.0)
        return np.where(self.weight > 0, (self.distance - self.noise) / safe, np.inf)

    def variance(self) -> np.ndarray:
        """(N,) bias-corrected EMA of client's ``s_i = sigma_i^2 / b_i``; 1.0 for a client never observed.

        The weights use these past-round estimates, never the current round's: a weight computed from the
        same minibatch as the gradient it multiplies (``alpha_i ~ 1 / s_i``) would correlate with that
        gradient's noise and bias the step.
        """
        safe = np.where(self.weight > 0, self.weight, 1.0)
        return np.where(self.weight > 0, self.spread / safe, 1.0)

    def estimate(self) -> np.ndarray:
        """(N,) ``zeta_i^2`` estimates floored at 0; ``inf`` for a client never observed; 0 for the target."""
        out = np.maximum(self.raw(), 0.0)
        out[self.target] = 0.0
        return out

    def state_dict(self) -> dict[str, Any]:
        """The estimator's state as plain lists (JSON-able; a Flower ``ConfigRecord`` holds it)."""
        return {
            "n_clients": self.n_clients,
            "target": self.target,
            "decay": self.decay,
            "distance": self.distance.tolist(),
            "noise": self.noise.tolist(),
            "spread": self.spread.tolist(),
            "weight": self.weight.tolist(),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> BiasEstimator:
        """Rebuild an estimator from :meth:`state_dict`."""
        out = cls(int(state["n_clients"]), int(state["target"]), float(state["decay"]))
        out.distance = np.asarray(state["distance"], dtype=np.float64)
        out.noise = np.asarray(state["noise"], dtype=np.float64)
        out.spread = np.asarray(state["spread"], dtype=np.float64)
        out.weight = np.asarray(state["weight"], dtype=np.float64)
        return out


@dataclass(frozen=True)
class RoundRecord:
    """One round of one target's log: every client's weight, bias and variance term, and the certificate."""

    round: int
    alpha: list[float]
    bias_sq: list[float]
    variance: list[float]
    variance_terms: list[float]
    bias: float
    bound: float
    local_bound: float
    better_off_alone: bool
    dropped: list[int]

    @classmethod
    def from_solution(
        cls,
        round_index: int,
        solution: WeightSolution,
        bias_sq: np.ndarray,
        variance: np.ndarray,
        dropped: list[int],
    ) -> RoundRecord:
        return cls(
            round=round_index,
            alpha=solution.alpha.tolist(),
            bias_sq=[float(v) for v in bias_sq],
            variance=[float(v) for v in variance],
            variance_terms=solution.variance_terms.tolist(),
            bias=solution.bias,
            bound=solution.bound,
            local_bound=solution.local_bound,
            better_off_alone=solution.better_off_alone,
            dropped=list(dropped),
        )
