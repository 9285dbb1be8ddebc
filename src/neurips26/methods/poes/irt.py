"""Online 1PL (Rasch) item response theory by MAP, warm-started, on a sparse prompt x item log."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit


@dataclass(frozen=True)
class IRTFit:
    """A 1PL MAP fit: ``theta`` (n_prompts,), ``difficulty`` (n_items,), Laplace sd of each ability."""

    theta: np.ndarray
    difficulty: np.ndarray
    theta_sd: np.ndarray
    n_iterations: int


def _check_log(
    prompt_idx: np.ndarray, item_idx: np.ndarray, scores: np.ndarray, n_prompts: int, n_items: int
):
    prompt_idx = np.asarray(prompt_idx, dtype=np.int64)
    item_idx = np.asarray(item_idx, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if not (prompt_idx.shape == item_idx.shape == scores.shape) or prompt_idx.ndim != 1:
        raise ValueError(
            "prompt_idx, item_idx and scores must be 1-D of one length, got shapes "
            f"{prompt_idx.shape}, {item_idx.shape}, {scores.shape}"
        )
    if scores.size and (not np.all(np.isfinite(scores)) or scores.min() < 0 or scores.max() > 1):
        raise ValueError("scores must lie in [0, 1] and be finite (no NaN)")
    if prompt_idx.size and (prompt_idx.min() < 0 or prompt_idx.max() >= n_prompts):
        raise ValueError(
            f"prompt_idx must lie in [0, {n_prompts}), got range [{prompt_idx.min()}, {prompt_idx.max()}]"
        )
    if item_idx.size and (item_idx.min() < 0 or item_idx.max() >= n_items):
        raise ValueError(
            f"item_idx must lie in [0, {n_items}), got range [{item_idx.min()}, {item_idx.max()}]"
        )
    return prompt_idx, item_idx, scores


def fit_1pl_map(
    prompt_idx: np.ndarray,
    item_idx: np.ndarray,
    scores: np.ndarray,
    n_prompts: int,
    n_items: int,
    *,
    theta0: np.ndarray | None = None,
    difficulty0: np.ndarray | None = None,
    prior_theta_sd: float = 1.0,
    prior_difficulty_sd: float = 1.5,
    max_iter: int = 200,
) -> IRTFit:
    """Fit the 1PL model P(correct) = sigmoid(theta_p - b_i) by maximum a posteriori.

    Log posterior (scores y in [0, 1] act as soft Bernoulli labels)::

        sum_(p,i) [y log s(theta_p - b_i) + (1 - y) log s(b_i - theta_p)]
          - sum_p theta_p^2 / (2 sd_theta^2) - sum_i b_i^2 / (2 sd_b^2)

    maximised with L-BFGS-B and its analytic gradient (two ``bincount`` calls: linear in the number
    of logged responses). Prompts or items without a response stay at their prior mean 0.

    Parameters
    ----------
    prompt_idx, item_idx, scores:
        The sparse response log, one entry per (prompt, item) evaluation, shape (n_responses,).
    n_prompts, n_items:
        Sizes of the ability and difficulty vectors.
    theta0, difficulty0:
        Warm start (the previous round's fit, padded with zeros for new prompts).
    prior_theta_sd, prior_difficulty_sd:
        Gaussian prior scales.
    max_iter:
        L-BFGS iteration cap.

    Returns
    -------
    IRTFit
        Abilities, difficulties and the Laplace (diagonal Hessian) sd of each ability.
    """
    prompt_idx, item_idx, scores = _check_log(prompt_idx, item_idx, scores, n_prompts, n_items)
    x0 = np.zeros(n_prompts + n_items)
    if theta0 is not None:
        x0[: len(theta0)] = np.asarray(theta0, dtype=np.float64)[:n_prompts]
    if difficulty0 is not None:
        x0[n_prompts : n_prompts + len(difficulty0)] = np.asarray(difficulty0, dtype=np.float64)[:n_items]
    inv_vt, inv_vb = 1.0 / prior_theta_sd**2, 1.0 / prior_difficulty_sd**2

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, b = x[:n_prompts], x[n_prompts:]
        z = theta[prompt_idx] - b[item_idx]
        nll = -np.sum(scores * log_expit(z) + (1.0 - scores) * log_expit(-z))
        nll += 0.5 * inv_vt * theta @ theta + 0.5 * inv_vb * b @ b
        residual = expit(z) - scores  # d nll / d z
        grad_theta = np.bincount(prompt_idx, residual, minlength=n_prompts) + inv_vt * theta
        grad_b = -np.bincount(item_idx, residual, minlength=n_items) + inv_vb * b
        return float(nll), np.concatenate([grad_theta, grad_b])

    result = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-6})
    theta, b = result.x[:n_prompts].copy(), result.x[n_prompts:].copy()
    p = expit(theta[prompt_idx] - b[item_idx])
    information = np.bincount(prompt_idx, p * (1.0 - p), minlength=n_prompts) + inv_vt
    return IRTFit(theta, b, 1.0 / np.sqrt(information), int(result.nit))
