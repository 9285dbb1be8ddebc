"""HAWQ-V2/V3: Hessian-aware layer-wise mixed precision (Dong et al., 2020; Yao et al., 2021).

**Re-implemented here.**

The ScaleBITS issue's layer-wise mixed-precision baseline. Per layer ``l``:

* sensitivity: the average Hessian trace ``Tr(H_l) / n_l`` estimated with Hutchinson's method,
  ``Tr(H) = E_v[v^T H v]`` for Rademacher ``v`` (HAWQ-V2, Sec. 3.1), with ``Hv`` a Hessian-vector product
  by double back-propagation of the calibration loss;
* the cost of bit-width ``b``: ``Omega_l(b) = Tr(H_l) / n_l * ||Q_b(W_l) - W_l||^2`` (HAWQ-V2, Eq. 6);
* allocation: the multiple-choice knapsack ``min sum_l Omega_l(b_l)`` subject to ``sum_l bits_l(b_l) <=
  budget`` solved exactly as an integer linear program (HAWQ-V3, Sec. 3.4, with ``scipy.optimize.milp``),
  where ``bits_l(b)`` is the layer's exact packed ledger (codes, zeros, scales; no tile ids).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def hutchinson_traces(
    model: nn.Module,
    layers: dict[str, nn.Linear],
    calibration: torch.Tensor,
    micro_batch: int,
    samples: int,
    generator: torch.Generator,
) -> dict[str, float]:
    """``Tr(H_l) ~ mean_s v_s^T H_l v_s`` of the mean next-token loss for every layer's weight.

    One Rademacher probe per sample, cycling over the calibration micro-batches; the layers' Hessian
    blocks come from one Hessian-vector product of the whole model per sample (the diagonal blocks are the
    per-layer traces because each probe is independent across layers).
    """
    if samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    saved = {name: p.requires_grad for name, p in model.named_parameters()}
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    weights = [layer.weight for layer in layers.values()]
    for weight in weights:
        weight.requires_grad_(True)
    batches = calibration.split(micro_batch)
    totals = dict.fromkeys(layers, 0.0)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        for sample in range(samples):
            batch = batches[sample % len(batches)]
            with sdpa_kernel(SDPBackend.MATH):  # the fused CPU kernel has no double backward
                logits = model(input_ids=batch).logits[:, :-1]
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
            grads = torch.autograd.grad(loss, weights, create_graph=True)
            probes = [torch.randint(0, 2, w.shape, generator=generator).float() * 2 - 1 for w in weights]
            products = torch.autograd.grad(grads, weights, grad_outputs=probes)
            for name, probe, product in zip(layers, probes, products, strict=True):
                totals[name] += float((probe * product).sum())
    finally:
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(saved[name])
    return {name: total / samples for name, total in totals.items()}


def layer_costs(
    traces: dict[str, float], errors: dict[str, dict[int, float]], sizes: dict[str, int]
) -> dict[str, dict[int, float]]:
    """``Omega_l(b) = Tr(H_l) / n_l * ||Q_b(W_l) - W_l||^2`` (HAWQ-V2, Eq. 6).

    ``errors`` are the squared quantization-error norms, ``sizes`` the weight counts ``n_l``.
    """
    return {
        name: {bits: traces[name] / sizes[name] * error for bits, error in errors[name].items()}
        for name in traces
    }


def knapsack_allocation(
    costs: dict[str, dict[int, float]], layer_bits: dict[str, dict[int, int]], budget_bits: int
) -> dict[str, int]:
    """The exact multiple-choice knapsack: one bit-width per layer, total ledger bits within the budget.

    ``min sum_{l,b} Omega_l(b) x_lb`` s.t. ``sum_b x_lb = 1``, ``sum_{l,b} bits_l(b) x_lb <= budget``,
    ``x_lb`` binary (HAWQ-V3's integer linear program).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    names = list(costs)
    choices = [(name, bits) for name in names for bits in sorted(costs[name])]
    cost = np.array([costs[name][bits] for name, bits in choices])
    size = np.array([layer_bits[name][bits] for name, bits in choices], dtype=float)
    if sum(min(layer_bits[n].values()) for n in names) > budget_bits:
        raise ValueError(f"budget of {budget_bits} bits is below the smallest layer-wise allocation")
    one_per_layer = np.array([[1.0 if choice[0] == name else 0.0 for choice in choices] for name in names])
    constraints = [
        LinearConstraint(one_per_layer, np.ones(len(names)), np.ones(len(names))),
        LinearConstraint(size[None, :], -np.inf, float(budget_bits)),
    ]
    scale = max(float(np.abs(cost).max()), 1e-30)  # the solver's tolerances are absolute
    result = milp(
        cost / scale,
        constraints=constraints,
        integrality=np.ones(len(choices)),
        bounds=Bounds(0, 1),
    )
    if not result.success:
        raise RuntimeError(f"the layer-wise knapsack found no solution: {result.message}")
    picked = np.round(result.x).astype(bool)
    return {name: bits for (name, bits), chosen in zip(choices, picked, strict=True) if chosen}


def squared_errors(
    weights: dict[str, torch.Tensor], bit_set: Sequence[int], quantize
) -> dict[str, dict[int, float]]:
    """``||Q_b(W) - W||^2`` of every layer at every width, with ``quantize(weight, bits) -> W_hat``."""
    return {
        name: {bits: float(((quantize(weight, bits) - weight) ** 2).sum()) for bits in bit_set}
        for name, weight in weights.items()
    }
