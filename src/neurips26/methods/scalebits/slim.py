"""SliM-LLM-style salience-determined group-wise bit allocation (Huang et al., 2024) -- **re-implemented**.

SliM-LLM (arXiv 2405.14917, "SBA") keeps every layer's average bit-width fixed and mixes bit-widths
between *column groups* (all output rows x a run of input channels) of one layer:

1. group salience ``S_G = sum_{i, j in G} w_ij^2 / U_jj^2`` with ``U = chol(H^-1)^T`` the upper Cholesky
   factor of the damped inverse layer-input Hessian ``H = 2 X X^T / n`` (the OBS / GPTQ salience);
2. candidates: the ``k`` most salient groups one width up and the ``k`` least salient one width down
   (``{b-1, b, b+1}``, so the layer average stays ``b``), ``k`` searched by the layer-output error of the
   round-to-nearest candidate;
3. rounding with GPTQ at the chosen per-group widths (SliM-LLM is built on GPTQ).

Ours, to run at the experiment's fractional, metadata-inclusive budgets on the packed tile format:

* a group is one *tile column* (``tile[1]`` input channels, every tile row), so the allocation is an
  ordinary per-tile allocation, stored and counted by the same ledger as every other system (tile ids,
  scales and zeros included);
* generalised candidates for a fractional layer budget ``floor(avg_bits x n_l)`` (metadata included):
  for each ``k``, the ``k`` most salient groups at the top width, the next ``m`` at the second-highest width
  with ``m`` the most that fit, the rest at the lowest width. For the bit set ``{b-1, b, b+1}`` at the
  budget of uniform ``b`` this is exactly SliM-LLM's family (``m = G - 2k``: ``k`` up, ``k`` down);
* the search criterion is the Hessian-weighted output error ``tr((W - W_hat) H (W - W_hat)^T) =
  ||(W - W_hat) X||^2`` (SliM-LLM's code offers an output KL and plain errors);
* Hessians are measured once on the full-precision model (SliM-LLM measures them inside its sequential
  GPTQ); ``carry_over`` passes the budget a layer cannot use (one group is ``1 / G`` of a layer: a
  256-column layer has 4 groups of 64) on to the next layer, so the model average can reach the target.
  ``carry_over=False`` keeps SliM-LLM's strict per-layer budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from neurips26.core.validation import check_choice
from neurips26.methods.scalebits.baselines import GPTQConfig, quantize_gptq_allocation
from neurips26.methods.scalebits.config import check_tile_layout, default_filter
from neurips26.methods.scalebits.core import (
    check_tiling,
    fake_quantize,
    layer_ledger,
    pad_to_tiles,
    padded_shape,
    select_fake,
)
from neurips26.methods.scalebits.gptq import accumulate_hessians, inverse_hessian_factor
from neurips26.methods.scalebits.integration import (
    QuantizationReport,
    apply_allocation,
    packed_report,
    register_quantize_handler,
    select_linears,
)

QUANTIZERS = ("gptq", "rtn")


@dataclass
class SliMLLMConfig:
    """SliM-LLM-style group-wise salience allocation at ``avg_bits`` (metadata included);
    ``quantize_and_report`` needs ``calibration``."""

    avg_bits: float = 3.0
    bits: tuple[int, ...] = (2, 3, 4)
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    quantizer: str = "gptq"  # SliM-LLM rounds with GPTQ; "rtn" isolates the allocation
    damp: float = 0.01  # GPTQ / SliM-LLM: 1% of the mean Hessian diagonal
    carry_over: bool = True
    act_order: bool = False  # GPTQ rounding by descending Hessian diagonal, with static groups
    micro_batch: int = 4
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        check_tile_layout(self)
        check_choice("quantizer", self.quantizer, QUANTIZERS)
        if not isinstance(self.act_order, bool):
            raise TypeError(f"act_order must be a bool, got {self.act_order!r}")
        if not self.damp >= 0:
            raise ValueError(f"damp must be >= 0, got {self.damp!r}")


def group_salience(
    weight: torch.Tensor, hessian: torch.Tensor, group_cols: int, damp: float = 0.01
) -> torch.Tensor:
    """``S_G = sum_{i, j in G} w_ij^2 / U_jj^2`` per run of ``group_cols`` input channels, ``(ceil(C/gc),)``.

    ``U`` is the upper Cholesky factor of the damped inverse Hessian (dead inputs count as zero weight).
    """
    cols = weight.shape[1]
    if tuple(hessian.shape) != (cols, cols):
        raise ValueError(f"hessian must be ({cols}, {cols}), got {tuple(hessian.shape)}")
    work = weight.detach().float().clone()
    factor = inverse_hessian_factor(hessian, work, damp)
    element = work**2 / torch.diag(factor)[None, :] ** 2
    column = element.sum(0)
    n_groups = -(-cols // group_cols)
    return torch.zeros(n_groups).index_add_(0, torch.arange(cols) // group_cols, column)


def group_tile_bits(group_bits: torch.Tensor, tile_rows: int) -> torch.Tensor:
    """Per-tile widths (row-major tile grid) from per-tile-column widths: every tile row alike."""
    return group_bits[None, :].expand(tile_rows, -1).reshape(-1).clone()


def sba_candidates(
    salience: torch.Tensor, bit_set: tuple[int, ...], tile_rows: int, cost: Any, budget: int
) -> list[torch.Tensor]:
    """SliM-LLM's candidate group widths, generalised to a fractional budget (see the module docstring).

    ``cost(tile_bits) -> stored bits`` of the layer; ``budget`` in bits. Candidates are budget-feasible,
    ordered by ``k`` (groups at the top width); the most salient groups always get the widest widths.
    """
    n_groups = salience.numel()
    order = torch.argsort(salience, descending=True, stable=True)
    low, top = bit_set[0], bit_set[-1]
    middle = bit_set[-2] if len(bit_set) >= 3 else None

    def widths(k: int, m: int) -> torch.Tensor:
        ranked = torch.full((n_groups,), low, dtype=torch.long)
        ranked[:k] = top
        if middle is not None:
            ranked[k : k + m] = middle
        bits = torch.empty_like(ranked)
        bits[order] = ranked
        return bits

    def fits(bits: torch.Tensor) -> bool:
        return cost(group_tile_bits(bits, tile_rows)) <= budget

    if len(bit_set) == 1:
        return [widths(0, 0)] if fits(widths(0, 0)) else []
    if len(bit_set) == 2:  # one mix of two widths uses the budget: the most top-width groups that fit
        feasible = [k for k in range(n_groups + 1) if fits(widths(k, 0))]
        return [widths(max(feasible), 0)] if feasible else []
    candidates = []
    for k in range(n_groups + 1):
        if not fits(widths(k, 0)):
            break  # more top-width groups only cost more
        m = max(m for m in range(n_groups - k + 1) if fits(widths(k, m)))
        candidates.append(widths(k, m))
    return candidates


def output_error(weight: torch.Tensor, dequantized: torch.Tensor, hessian: torch.Tensor) -> float:
    """``tr(E H E^T)`` with ``E = W - W_hat``: the layer-output squared error over the calibration inputs."""
    error = (weight - dequantized).double()
    return float(((error @ hessian.double()) * error).sum())


def slim_layer_allocation(
    weight: torch.Tensor, hessian: torch.Tensor, config: SliMLLMConfig, budget: int, name: str = "layer"
) -> torch.Tensor:
    """The chosen per-tile widths of one layer: the SBA candidate with the least output error."""
    rows, cols = weight.shape
    stored = padded_shape((rows, cols), config.tile)
    tile_rows = stored[0] // config.tile[0]
    salience = group_salience(weight, hessian, config.tile[1], config.damp)

    def cost(tile_bits: torch.Tensor) -> int:
        return layer_ledger(
            stored, config.tile, config.group_size, config.bits, tile_bits, n_weights=rows * cols
        ).total_bits

    candidates = sba_candidates(salience, config.bits, tile_rows, cost, budget)
    if not candidates:
        raise ValueError(
            f"avg_bits={config.avg_bits} is below the representable range of {name!r} ({rows}x{cols}) for "
            f"bits={config.bits}, tile={config.tile}, group_size={config.group_size} (metadata included)"
        )
    padded = pad_to_tiles(weight.detach().float(), config.tile)
    fake = {b: fake_quantize(padded, b, config.group_size) for b in config.bits}
    errors = [
        output_error(
            weight, select_fake(fake, group_tile_bits(bits, tile_rows), config.tile)[:rows, :cols], hessian
        )
        for bits in candidates
    ]
    return group_tile_bits(candidates[min(range(len(errors)), key=errors.__getitem__)], tile_rows)


def slim_allocation(
    linears: dict[str, nn.Linear], hessians: dict[str, torch.Tensor], config: SliMLLMConfig
) -> dict[str, torch.Tensor]:
    """Per-layer SBA at ``config.avg_bits``; with ``carry_over`` unused budget passes to the next layer."""
    allocation = {}
    carry = 0
    for name, layer in linears.items():
        check_tiling(name, tuple(layer.weight.shape), config.tile, config.group_size, config.pad)
        n_weights = layer.weight.numel()
        budget = math.floor(config.avg_bits * n_weights + 1e-6) + (carry if config.carry_over else 0)
        allocation[name] = slim_layer_allocation(layer.weight.detach(), hessians[name], config, budget, name)
        stored = padded_shape(tuple(layer.weight.shape), config.tile)
        used = layer_ledger(
            stored, config.tile, config.group_size, config.bits, allocation[name], n_weights=n_weights
        ).total_bits
        carry = budget - used
    return allocation


@register_quantize_handler(SliMLLMConfig)
def _quantize_slim(
    model: nn.Module, config: SliMLLMConfig, *, calibration: torch.Tensor
) -> QuantizationReport:
    linears = select_linears(model, config.filter_fn)
    hessians, _ = accumulate_hessians(model, linears, calibration, config.micro_batch)
    allocation = slim_allocation(linears, hessians, config)
    layout = (config.bits, config.tile, config.group_size, config.pad)
    if config.quantizer == "gptq":
        rounding = GPTQConfig(
            bits=max(config.bits),
            tile=config.tile,
            group_size=config.group_size,
            pad=config.pad,
            damp=config.damp,
            static_groups=config.act_order,
            act_order=config.act_order,
            micro_batch=config.micro_batch,
        )
        return quantize_gptq_allocation(model, calibration, allocation, *layout, rounding)
    return packed_report(apply_allocation(model, allocation, *layout), [], None)
