"""SFMP-style search-free static block allocation with channel reordering -- **re-implemented**.

SFMP (arXiv 2602.01027, code ``Nkniexin/SFMP``) allocates bit-widths to hardware blocks without a search:

1. a per-weight sensitivity map measured once on the full-precision model (the released code reads it
   from a model-shaped file; we use the diagonal empirical Fisher ``F_ij`` of :func:`calibration_statistics`,
   the squared-gradient sensitivity of SqueezeLLM-style maps);
2. rows and columns reordered by decreasing sensitivity sums, so sensitive weights share blocks;
3. block importance = the sum of the sensitivity inside the block;
4. one global threshold: with target ``b + p`` bits, the fraction ``p`` of all blocks (every layer
   together) with the highest importance get ``b + 1`` bits, the rest ``b`` -- no loss evaluation at all.

Ours, on the packed tile format and its ledger:

* blocks are the ScaleBITS tiles; the budget includes metadata (float16 scales, zeros, tile ids), so the
  base width ``b`` is the widest whose all-tiles ledger fits and the number of raised tiles is the most
  the remaining budget pays for (the exact-ledger form of SFMP's quantile ``1 - p``);
* ``reorder="folded"`` (the experiment's ``sfmp``) uses only the *exact folds* (MLP intermediate channels,
  v/o head dims; see :func:`fold_reordering`) with SFMP's score (row sums of the producers' sensitivity +
  column sums of the consumer's), at no run-time cost; ``reorder="gather"`` also reorders every other row
  and column by its sensitivity sums and stores runtime gather indices (:mod:`.gather`, counted), which is
  SFMP's own setting (its kernel undoes the permutations at run time);
* rounding is round-to-nearest (SFMP ships GPTQ and AWQ front-ends; RTN isolates the allocation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from neurips26.core.validation import check_choice
from neurips26.methods.scalebits.config import (
    REORDERINGS,
    check_tile_layout,
    default_filter,
)
from neurips26.methods.scalebits.core import (
    check_tiling,
    layer_ledger,
    pad_to_tiles,
    padded_shape,
    tile_sum,
    tile_variable_bits,
)
from neurips26.methods.scalebits.gather import apply_gathers, permutation_lengths
from neurips26.methods.scalebits.integration import (
    FoldedPermutation,
    QuantizationReport,
    apply_allocation,
    calibration_statistics,
    fold_reordering,
    folded_sides,
    packed_report,
    register_quantize_handler,
    select_linears,
)


@dataclass
class SFMPConfig:
    """SFMP-style static block allocation at ``avg_bits`` (metadata included); needs ``calibration``."""

    avg_bits: float = 3.0
    bits: tuple[int, ...] = (2, 3, 4)
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    reorder: str = "folded"
    micro_batch: int = 4
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        check_tile_layout(self)
        check_choice("reorder", self.reorder, REORDERINGS)


def threshold_allocation(
    importance: dict[str, torch.Tensor],
    shapes: dict[str, tuple[int, int]],
    config: SFMPConfig,
    permutations: dict[str, tuple[int, int]] | None = None,
) -> dict[str, torch.Tensor]:
    """SFMP's search-free rule under the exact ledger: base width ``b`` everywhere, the most important
    tiles (globally) one width up for as long as the budget pays for them.

    ``importance[name]`` is ``(n_tiles,)``; ``shapes[name]`` the real ``(R, C)`` weight shape;
    ``permutations[name]`` the lengths of its runtime gather indices (counted in the budget).
    """
    permutations = permutations or {}
    names = list(importance)
    n_weights = sum(math.prod(shapes[n]) for n in names)
    budget = math.floor(config.avg_bits * n_weights + 1e-6)

    def uniform_cost(bits: int) -> int:
        return sum(
            layer_ledger(
                padded_shape(shapes[n], config.tile),
                config.tile,
                config.group_size,
                config.bits,
                torch.full_like(importance[n], bits, dtype=torch.long),
                *permutations.get(n, (0, 0)),
                n_weights=math.prod(shapes[n]),
            ).total_bits
            for n in names
        )

    fitting = [b for b in config.bits if uniform_cost(b) <= budget]
    if not fitting:
        low = uniform_cost(config.bits[0]) / n_weights
        raise ValueError(
            f"avg_bits={config.avg_bits} is below the representable range (>= {low:.4f} with every tile at "
            f"{config.bits[0]} bits, metadata included) for bits={config.bits}, tile={config.tile}"
        )
    base = max(fitting)
    allocation = {n: torch.full_like(importance[n], base, dtype=torch.long) for n in names}
    if base == config.bits[-1]:
        return allocation
    raised = config.bits[config.bits.index(base) + 1]
    step = int(tile_variable_bits(torch.tensor(raised - base), config.tile, config.group_size))
    flat = torch.cat([importance[n] for n in names])
    n_raise = min(flat.numel(), (budget - uniform_cost(base)) // step)
    chosen = torch.argsort(flat, descending=True, stable=True)[:n_raise]
    bits = torch.full((flat.numel(),), base, dtype=torch.long)
    bits[chosen] = raised
    return dict(zip(names, bits.split([importance[n].numel() for n in names]), strict=True))


def sfmp_allocation(
    model: nn.Module, calibration: torch.Tensor, config: SFMPConfig, linears: dict[str, nn.Linear]
) -> tuple[dict[str, torch.Tensor], list[FoldedPermutation]]:
    """Static Fisher -> (folded) reordering -> block importance -> threshold; ``model`` reordered in place."""
    for name, layer in linears.items():
        check_tiling(name, tuple(layer.weight.shape), config.tile, config.group_size, config.pad)
    statistics = calibration_statistics(model, linears, calibration, config.micro_batch)
    sensitivity = {name: fisher for name, (_, fisher) in statistics.items()}
    folds = fold_reordering(model, linears, sensitivity) if config.reorder != "none" else []
    if config.reorder == "gather":  # SFMP's own setting: every other row / column order kept at run time
        linears = apply_gathers(model, linears, sensitivity, folded_sides(folds))
    importance = {
        name: tile_sum(pad_to_tiles(sensitivity[name], config.tile, zero=True), config.tile)
        for name in linears
    }
    shapes = {name: tuple(layer.weight.shape) for name, layer in linears.items()}
    permutations = {name: permutation_lengths(layer) for name, layer in linears.items()}
    return threshold_allocation(importance, shapes, config, permutations), folds


@register_quantize_handler(SFMPConfig)
def _quantize_sfmp(model: nn.Module, config: SFMPConfig, *, calibration: torch.Tensor) -> QuantizationReport:
    linears = select_linears(model, config.filter_fn)
    allocation, folds = sfmp_allocation(model, calibration, config, linears)
    packed = apply_allocation(model, allocation, config.bits, config.tile, config.group_size, config.pad)
    return packed_report(packed, folds, None)
