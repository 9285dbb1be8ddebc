"""Baselines of the ScaleBITS experiment, all re-implemented here on the same packed format.

* Uniform round-to-nearest (RTN) at 2/3/4 bits: ``quantize_(model, UniformRTNConfig(bits=3))``; ours,
  the standard asymmetric group RTN (as in GPTQ's and HQQ's RTN baselines), same tile/group layout.
* Static-sensitivity mixed precision: ScaleBITS with ``sensitivity="static"`` (gradient and Fisher
  measured once at full precision; HAWQ / SliM-LLM style estimate) -- the paper's ablation.
* Random allocation: tiles lowered uniformly at random down to the same budget.
Not done (time): uniform GPTQ (llm-compressor / GPTQModel adapter), HQQ, layer-wise HAWQ knapsack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from neurips26.methods.scalebits.config import default_filter
from neurips26.methods.scalebits.core import (
    SCALE_BITS,
    check_tiling,
    index_bits,
    padded_shape,
    random_allocation,
)
from neurips26.methods.scalebits.integration import (
    QuantizationReport,
    apply_allocation,
    packed_report,
    register_quantize_handler,
    select_linears,
    uniform_tile_bits,
)


@dataclass
class UniformRTNConfig:
    """Uniform asymmetric round-to-nearest at ``bits`` with ``group_size`` (ScaleBITS' packed layout)."""

    bits: int = 4
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            raise ValueError(f"bits must be an integer in [1, 8], got {self.bits!r}")


@register_quantize_handler(UniformRTNConfig)
def _quantize_rtn(model: nn.Module, config: UniformRTNConfig) -> QuantizationReport:
    linears = select_linears(model, config.filter_fn)
    allocation = {
        name: uniform_tile_bits(tuple(layer.weight.shape), config.tile, config.bits)
        for name, layer in linears.items()
    }
    packed = apply_allocation(model, allocation, (config.bits,), config.tile, config.group_size, config.pad)
    return packed_report(packed, [], None)


def quantize_random(
    model: nn.Module,
    avg_bits: float,
    bit_set: tuple[int, ...],
    tile: tuple[int, int],
    group_size: int,
    seed: int,
    pad: bool = False,
) -> QuantizationReport:
    """Random tile allocation hitting ``avg_bits`` (metadata included), then packing."""
    linears = select_linears(model, default_filter)
    names = list(linears)
    shapes = {n: padded_shape(tuple(linears[n].weight.shape), tile) for n in names}
    for name in names:
        check_tiling(name, tuple(linears[name].weight.shape), tile, group_size, pad)
    tile_counts = [math.prod(shapes[n]) // (tile[0] * tile[1]) for n in names]
    n_weights = sum(linears[n].weight.numel() for n in names)
    fixed = sum(
        SCALE_BITS * math.prod(shapes[n]) // group_size + c * index_bits(len(bit_set))
        for n, c in zip(names, tile_counts, strict=True)
    )
    generator = torch.Generator().manual_seed(seed)
    bits = random_allocation(
        tile_counts,
        bit_set,
        avg_bits,
        tile=tile,
        group_size=group_size,
        fixed_bits=fixed,
        n_weights=n_weights,
        generator=generator,
    )
    packed = apply_allocation(model, dict(zip(names, bits, strict=True)), bit_set, tile, group_size, pad)
    return packed_report(packed, [], None)
