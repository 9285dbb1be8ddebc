"""Test-only oracles for ScaleBITS' re-implemented baselines (moved out of the library, issue #34).

* :func:`gptq_reference` -- the unblocked Optimal Brain Quantization loop, the oracle for
  :func:`neurips26.methods.scalebits.gptq.gptq_quantize`;
* :func:`brute_force_knapsack` -- every allocation enumerated, the oracle for
  :func:`neurips26.methods.scalebits.hawq.knapsack_allocation`.
"""

from __future__ import annotations

import math

import torch

from neurips26.methods.scalebits.gptq import (
    _fit_static_groups,
    activation_order,
    check_act_order,
    fit_group,
    round_column,
)


def gptq_reference(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    group_bits: torch.Tensor,
    group_size: int,
    damp: float = 0.01,
    static_groups: bool = False,
    act_order: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The unblocked Optimal Brain Quantization loop (the oracle for :func:`gptq_quantize`).

    Quantize column ``j``, update the rest with ``W[:, k] -= (w_j - q_j) Hinv_jk / Hinv_jj`` and remove
    ``j`` from the inverse Hessian (``Hinv -= Hinv[:, j] Hinv[j, :] / Hinv_jj``); no Cholesky, no blocks.
    """
    rows, cols = weight.shape
    check_act_order(act_order, static_groups)
    order = activation_order(hessian) if act_order else torch.arange(cols)
    work = weight.detach().double()[:, order].clone()
    hessian = hessian.double()[order][:, order].clone()
    dead = torch.diag(hessian) == 0
    hessian[dead, dead] = 1.0
    work[:, dead] = 0.0
    hessian += damp * torch.diag(hessian).mean() * torch.eye(cols, dtype=torch.float64)
    inverse = torch.linalg.inv(hessian)
    n_groups = -(-cols // group_size)
    codes, scales, zeros = torch.zeros(rows, cols), torch.zeros(rows, n_groups), torch.zeros(rows, n_groups)
    if static_groups:
        _fit_static_groups(work.float()[:, torch.argsort(order)], group_bits, group_size, scales, zeros)
    for j in range(cols):
        group = int(order[j]) // group_size
        bits = group_bits[:, group]
        if j % group_size == 0 and not static_groups:
            scales[:, group], zeros[:, group] = fit_group(work[:, j : j + group_size].float(), bits)
        q = round_column(work[:, j].float(), scales[:, group], zeros[:, group], bits)
        codes[:, j] = q
        error = work[:, j] - ((q - zeros[:, group]) * scales[:, group]).double()
        work[:, j + 1 :] -= error[:, None] * (inverse[j, j + 1 :] / inverse[j, j])[None, :]
        inverse -= torch.outer(inverse[:, j], inverse[j, :]) / inverse[j, j]
    return codes[:, torch.argsort(order)].long(), scales, zeros.long()


def brute_force_knapsack(
    costs: dict[str, dict[int, float]], layer_bits: dict[str, dict[int, int]], budget_bits: int
) -> tuple[float, dict[str, int]]:
    """Enumerate every allocation (the test oracle for :func:`knapsack_allocation`; tiny inputs only)."""
    import itertools

    names = list(costs)
    best: tuple[float, dict[str, int]] = (math.inf, {})
    for combo in itertools.product(*(sorted(costs[n]) for n in names)):
        if sum(layer_bits[n][b] for n, b in zip(names, combo, strict=True)) <= budget_bits:
            total = sum(costs[n][b] for n, b in zip(names, combo, strict=True))
            if total < best[0]:
                best = (total, dict(zip(names, combo, strict=True)))
    return best
