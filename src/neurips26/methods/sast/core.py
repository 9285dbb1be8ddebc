"""SAST's steps on plain tensors: stability weights, SWIP prototypes, fusion, pseudo-labels, refinement.

Paper: *Stability-Aware Self-Training for CLIP* (SAST). The abstract names SWIP (stability-weighted image
prototypes), a light text-side refinement and an adaptive fusion rule; the formulas here are ours (issue
#27 and ``research/vision.md`` Sec. 3), each next to its line. Shapes: N samples, C classes, D features.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

__all__ = [
    "class_balanced_top_k",
    "entropy",
    "fusion_weight",
    "growing_k",
    "pair_margin_loss",
    "stability_weights",
    "swip_prototypes",
    "update_prototypes",
    "weighted_cross_entropy",
]


def stability_weights(
    stability: torch.Tensor, confidence: torch.Tensor, kappa: float, s_min: float
) -> torch.Tensor:
    """SWIP sample weights w(x) = s(x)^kappa * p(y_hat|x) * [s(x) >= s_min]  (issue #27, step 2).

    ``stability`` and ``confidence`` are (N,) in [0, 1]; returns (N,) non-negative weights.
    """
    return stability.pow(kappa) * confidence * (stability >= s_min).to(confidence.dtype)


def swip_prototypes(
    features: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, n_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stability-weighted image prototypes mu_c = normalise(sum_{y_hat(x)=c} w(x) f(x)).

    features (N, D) (L2-normalised), labels (N,) int, weights (N,) -> (prototypes (C, D), mass (C,)).
    A class with zero total weight gets a zero row and mass 0 (the caller keeps its previous prototype).
    One ``index_add_`` over the samples: O(N D).
    """
    sums = torch.zeros(n_classes, features.shape[1], dtype=features.dtype, device=features.device)
    sums.index_add_(0, labels, features * weights[:, None])
    mass = torch.zeros(n_classes, dtype=features.dtype, device=features.device).index_add_(0, labels, weights)
    return F.normalize(sums, dim=1), mass


def update_prototypes(
    previous: torch.Tensor | None, new: torch.Tensor, mass: torch.Tensor, momentum: float
) -> torch.Tensor:
    """EMA across epochs: mu <- normalise(m * mu_prev + (1 - m) * mu_new) for classes with mass > 0;
    the first update (``previous`` None) takes ``new`` as is."""
    if previous is None:
        return new
    mixed = F.normalize(momentum * previous + (1.0 - momentum) * new, dim=1)
    return torch.where((mass > 0)[:, None], mixed, previous)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of softmax(logits) along the last axis, normalised by log C to [0, 1]."""
    log_p = F.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1) / math.log(logits.shape[-1])


def fusion_weight(
    text_logits: torch.Tensor,
    image_logits: torch.Tensor,
    class_stability: torch.Tensor,
    a: float,
    b: float,
    bias: float,
) -> torch.Tensor:
    """Per-sample alpha = sigmoid(a (H_text - H_img) + b s_bar_c + bias)  (issue #27, step 4).

    H are normalised entropies of the two streams; s_bar_c is the mean stability of the class the image
    stream predicts. Returns (N, 1), ready to mix ``(1 - alpha) z_text + alpha z_img``.
    """
    c_img = image_logits.argmax(dim=1)
    score = a * (entropy(text_logits) - entropy(image_logits)) + b * class_stability[c_img] + bias
    return torch.sigmoid(score)[:, None]


def growing_k(epoch: int, epochs: int, per_class: int, start: float, end: float) -> int:
    """GRIP's growing pseudo-label budget: K_e = ceil(frac_e * per_class), frac linear from start to end."""
    frac = start + (end - start) * (epoch / max(epochs - 1, 1))
    return max(1, math.ceil(frac * per_class))


def class_balanced_top_k(
    probs: torch.Tensor, k: int, allowed: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Class-balanced top-K pseudo-labels (Menghini et al. 2023's GRIP selection).

    For each class c among ``allowed`` (default all), the K samples predicted as c with the highest
    p(c|x). probs (N, C) -> (index (M,), labels (M,)), sorted by class then confidence; vectorised with one
    sort (no Python loop over classes).
    """
    n, c = probs.shape
    conf, pred = probs.max(dim=1)
    keep = torch.ones(n, dtype=torch.bool, device=probs.device)
    if allowed is not None:
        mask = torch.zeros(c, dtype=torch.bool, device=probs.device)
        mask[allowed] = True
        keep = mask[pred]
    # sort by (class, -confidence): confidence in [0, 1], so class + (1 - conf) orders both at once
    key = pred.to(probs.dtype) * 2.0 + (1.0 - conf)
    key = torch.where(keep, key, torch.full_like(key, float("inf")))
    order = torch.argsort(key, stable=True)
    sorted_pred = pred[order]
    valid = keep[order]
    # rank of each sample within its class block
    starts = torch.searchsorted(sorted_pred[valid].contiguous(), torch.arange(c, device=probs.device))
    positions = torch.arange(n, device=probs.device)
    rank = positions - starts[sorted_pred.clamp(max=c - 1)]
    chosen = valid & (rank < k)
    index = order[chosen]
    return index, pred[index]


def weighted_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None
) -> torch.Tensor:
    """sum_i w_i CE(logits_i, y_i) / sum_i w_i (the plain mean when ``weights`` is None)."""
    losses = F.cross_entropy(logits, labels, reduction="none")
    if weights is None:  # one code path for both cases: unit weights give bit-identical updates
        weights = torch.ones_like(losses)
    return (losses * weights).sum() / weights.sum().clamp_min(1e-12)


def pair_margin_loss(
    cosines: torch.Tensor, labels: torch.Tensor, pairs: torch.Tensor, margin: float
) -> torch.Tensor:
    """Margin between confusable text anchors (issue #27, step 3).

    For each most-flipped pair (c, c') and each sample labelled c (or c'), hinge on
    ``margin - (cos(f, t'_y) - cos(f, t'_other))``. cosines (N, C); labels (N,); pairs (P, 2).
    Returns the mean hinge over the involved samples (0 when none).
    """
    if pairs.numel() == 0:
        return cosines.new_zeros(())
    first, second = pairs[:, 0], pairs[:, 1]
    # (N, P): is the sample's label the first or second class of pair p
    is_first = labels[:, None] == first[None, :]
    is_second = labels[:, None] == second[None, :]
    involved = is_first | is_second
    if not bool(involved.any()):
        return cosines.new_zeros(())
    own = torch.where(is_first, cosines[:, first], cosines[:, second])
    other = torch.where(is_first, cosines[:, second], cosines[:, first])
    hinge = F.relu(margin - (own - other))
    return hinge[involved].mean()
