"""Baselines of the ScaleBITS experiment, all stored in the same packed format and counted by one ledger.

* Uniform round-to-nearest (RTN) at 2/3/4 bits: ``quantize_and_report(model, UniformRTNConfig(bits=3))``;
  ours, the standard asymmetric group RTN (as in GPTQ's and HQQ's RTN baselines), same tile/group layout.
* Uniform GPTQ: ``quantize_and_report(model, GPTQConfig(bits=3), calibration=ids)`` -- **re-implemented** in
  :mod:`.gptq` (neither llm-compressor nor GPTQModel installs with torch 2.13 / transformers 5.2; a side
  venv with llm-compressor cross-checks it: ``benchmarks/scalebits/scalebits_gptq_crosscheck.py``).
* HQQ: ``quantize_and_report(model, HQQConfig(bits=3))`` -- **library adapter**: the ``hqq`` package's
  ``Quantizer.quantize`` (half-quadratic proximal solver, ``axis=1`` groups along input channels); its
  float16 scale and float16 zero per group are stored as such and counted (16 + 16 bits per group).
* HAWQ-style layer-wise mixed precision:
  ``quantize_and_report(model, HAWQConfig(avg_bits=3), calibration=ids)`` --
  **re-implemented** in :mod:`.hawq` (Hutchinson Hessian traces, exact integer-program knapsack).
* Static-sensitivity mixed precision: ScaleBITS with ``sensitivity="static"`` (gradient and Fisher
  measured once at full precision; HAWQ / SliM-LLM style estimate) -- the paper's ablation.
* Random allocation: tiles lowered uniformly at random down to the same budget.
* SliM-LLM-style group-wise salience allocation: :mod:`.slim` (``SliMLLMConfig``); SFMP-style search-free
  static block allocation with reordering: :mod:`.sfmp` (``SFMPConfig``) -- both **re-implemented**.
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
    fake_quantize,
    index_bits,
    layer_ledger,
    pad_to_tiles,
    padded_shape,
    random_allocation,
)
from neurips26.methods.scalebits.gptq import check_act_order, gptq_quantize_model
from neurips26.methods.scalebits.hawq import (
    hutchinson_traces,
    knapsack_allocation,
    layer_costs,
    squared_errors,
)
from neurips26.methods.scalebits.integration import (
    QuantizationReport,
    apply_allocation,
    packed_report,
    register_quantize_handler,
    replace_module,
    select_linears,
    uniform_tile_bits,
)
from neurips26.methods.scalebits.packed import ScaleBitsLinear

try:  # torchao is optional (the quant extra; transformers' quantizers already import it when present)
    from torchao.core.config import AOBaseConfig
    from torchao.quantization.transform_module import register_quantize_module_handler
except ImportError:  # pragma: no cover - exercised where torchao is missing
    AOBaseConfig = object  # type: ignore[assignment,misc]
    register_quantize_module_handler = None


@dataclass
class UniformRTNConfig(AOBaseConfig):  # type: ignore[misc,valid-type]
    """Uniform asymmetric round-to-nearest at ``bits`` with ``group_size`` (ScaleBITS' packed layout).

    Each layer is quantized on its own, so a per-module torchao handler fits: with torchao installed,
    ``torchao.quantization.quantize_(model, UniformRTNConfig(bits=3), filter_fn)`` packs the same
    :class:`ScaleBitsLinear` layers as ``quantize_and_report`` (which also returns the report; torchao's
    verb returns None and takes its own ``filter_fn`` instead of ``config.filter_fn``).
    """

    bits: int = 4
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        _check_uniform(self)


def _check_uniform(config: Any, allowed: tuple[int, ...] = tuple(range(1, 9))) -> None:
    if isinstance(config.bits, bool) or not isinstance(config.bits, int) or config.bits not in allowed:
        raise ValueError(f"bits must be an integer in {allowed}, got {config.bits!r}")
    if config.tile[1] % config.group_size:
        raise ValueError(f"group_size={config.group_size} must divide the tile's columns {config.tile[1]}")


def uniform_ledger_bits(
    shape: tuple[int, int], tile: tuple[int, int], group_size: int, bits: int, float_zeros: bool = False
) -> int:
    """Exact stored bits of one layer quantized uniformly at ``bits`` (a one-width bit set: no tile ids)."""
    stored = padded_shape(shape, tile)
    tile_bits = uniform_tile_bits(shape, tile, bits)
    return layer_ledger(stored, tile, group_size, (bits,), tile_bits, float_zeros=float_zeros).total_bits


@register_quantize_handler(UniformRTNConfig)
def _quantize_rtn(model: nn.Module, config: UniformRTNConfig) -> QuantizationReport:
    packed = {
        name: rtn_linear(layer, config) for name, layer in select_linears(model, config.filter_fn).items()
    }
    for name, layer in packed.items():
        replace_module(model, name, layer)
    return packed_report(packed, [], None)


def rtn_linear(layer: nn.Linear, config: UniformRTNConfig) -> ScaleBitsLinear:
    """One ``nn.Linear`` packed at ``config.bits`` (the per-module step of both verbs)."""
    tile_bits = uniform_tile_bits(tuple(layer.weight.shape), config.tile, config.bits)
    return ScaleBitsLinear.from_weight(
        layer.weight,
        tile_bits,
        (config.bits,),
        config.tile,
        config.group_size,
        layer.bias,
        config.pad,
        getattr(layer, "input_order", None),
        getattr(layer, "output_order", None),
    )


if register_quantize_module_handler is not None:
    register_quantize_module_handler(UniformRTNConfig)(rtn_linear)


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


def _pack_uniform(
    model: nn.Module,
    name: str,
    bits: int,
    quantized: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    tile: tuple[int, int],
    group_size: int,
) -> ScaleBitsLinear:
    layer = model.get_submodule(name)
    shape = tuple(layer.weight.shape)
    packed = ScaleBitsLinear.from_quantized(
        *quantized, shape, uniform_tile_bits(shape, tile, bits), (bits,), tile, group_size, layer.bias
    )
    replace_module(model, name, packed)
    return packed


# ----------------------------------------------------------------------------------------------------
# GPTQ (re-implemented, :mod:`.gptq`)
# ----------------------------------------------------------------------------------------------------


@dataclass
class GPTQConfig:
    """Uniform GPTQ at ``bits`` (Frantar et al., 2022), packed in ScaleBITS' format; needs ``calibration``."""

    bits: int = 4
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    block_size: int = 128  # paper: lazy batches of 128 columns
    damp: float = 0.01  # paper: 1% of the mean Hessian diagonal
    static_groups: bool = False  # True: groups fitted once on the original weights (as llm-compressor)
    act_order: bool = False  # True: columns by descending Hessian diagonal (needs static_groups)
    micro_batch: int = 4
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        _check_uniform(self)
        if self.block_size % self.group_size:
            raise ValueError(
                f"block_size={self.block_size} must be a multiple of group_size={self.group_size}"
            )
        if not self.damp >= 0:
            raise ValueError(f"damp must be >= 0, got {self.damp!r}")
        for name in ("static_groups", "act_order"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        check_act_order(self.act_order, self.static_groups)


@register_quantize_handler(GPTQConfig)
def _quantize_gptq(model: nn.Module, config: GPTQConfig, *, calibration: torch.Tensor) -> QuantizationReport:
    linears = select_linears(model, config.filter_fn)
    allocation = {
        name: uniform_tile_bits(tuple(layer.weight.shape), config.tile, config.bits)
        for name, layer in linears.items()
    }
    return quantize_gptq_allocation(
        model, calibration, allocation, (config.bits,), config.tile, config.group_size, config.pad, config
    )


def quantize_gptq_allocation(
    model: nn.Module,
    calibration: torch.Tensor,
    allocation: dict[str, torch.Tensor],
    bit_set: tuple[int, ...],
    tile: tuple[int, int],
    group_size: int,
    pad: bool,
    config: GPTQConfig | None = None,
) -> QuantizationReport:
    """GPTQ with any per-tile allocation (uniform, or a ScaleBITS allocation), then packing."""
    config = config or GPTQConfig(bits=max(bit_set), tile=tile, group_size=group_size, pad=pad)
    quantized = gptq_quantize_model(
        model,
        calibration,
        allocation,
        tile,
        group_size,
        pad,
        config.micro_batch,
        config.block_size,
        config.damp,
        config.static_groups,
        config.act_order,
    )
    packed = {}
    for name, buffers in quantized.items():
        layer = model.get_submodule(name)
        shape = tuple(layer.weight.shape)
        packed[name] = ScaleBitsLinear.from_quantized(
            *buffers,
            shape,
            allocation[name],
            tuple(bit_set),
            tile,
            group_size,
            layer.bias,
            getattr(layer, "input_order", None),
            getattr(layer, "output_order", None),
        )
        replace_module(model, name, packed[name])
    return packed_report(packed, [], None)


# ----------------------------------------------------------------------------------------------------
# HQQ (library adapter: the ``hqq`` package)
# ----------------------------------------------------------------------------------------------------


@dataclass
class HQQConfig:
    """Uniform HQQ at ``bits`` via the ``hqq`` package; float16 scale and zero per group (counted)."""

    bits: int = 4
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        _check_uniform(self, (1, 2, 3, 4, 8))  # hqq's Quantizer.SUPPORTED_BITS (1.58 aside)


def hqq_quantize_weight(
    weight: torch.Tensor, bits: int, group_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``hqq``'s half-quadratic solver on ``weight (R, C)``; float16 scale and zero, codes re-rounded.

    HQQ fits the zero point (scale fixed, Lp-shrinkage proximal steps; the library's default solver) with
    groups of ``g`` consecutive input channels (``axis=1``). Codes are recomputed with the float16-rounded
    scale and zero, ``q = clamp(round(w / s + z), 0, 2^b - 1)``, so the stored layer dequantizes exactly.
    """
    from hqq.core.quantize import Quantizer

    rows, cols = weight.shape
    _, meta = Quantizer.quantize(
        weight.detach().float(),
        nbits=bits,
        channel_wise=True,
        group_size=group_size,
        optimize=True,
        round_zero=False,
        axis=1,
        bitpack=False,
        device="cpu",
    )
    scales = meta["scale"].reshape(rows, cols // group_size).half().float()
    zeros = meta["zero"].reshape(rows, cols // group_size).half().float()
    groups = weight.detach().float().reshape(rows, cols // group_size, group_size)
    codes = torch.round(groups / scales[..., None] + zeros[..., None]).clamp(0, 2**bits - 1)
    return codes.reshape(rows, cols).long(), scales, zeros


@register_quantize_handler(HQQConfig)
def _quantize_hqq(model: nn.Module, config: HQQConfig) -> QuantizationReport:
    try:
        import hqq  # noqa: F401
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("the HQQ baseline needs the hqq package: pip install 'hqq==0.2.8.post1'") from error
    linears = select_linears(model, config.filter_fn)
    packed = {}
    for name, layer in linears.items():
        check_tiling(name, tuple(layer.weight.shape), config.tile, config.group_size, config.pad)
        # padding repeats edge rows/columns, so each padded group keeps the real values' min and max
        stored = pad_to_tiles(layer.weight.detach(), config.tile)
        quantized = hqq_quantize_weight(stored, config.bits, config.group_size)
        packed[name] = _pack_uniform(model, name, config.bits, quantized, config.tile, config.group_size)
    return packed_report(packed, [], None)


# ----------------------------------------------------------------------------------------------------
# HAWQ-style layer-wise mixed precision (re-implemented, :mod:`.hawq`)
# ----------------------------------------------------------------------------------------------------


@dataclass
class HAWQConfig:
    """Layer-wise bit-widths by Hutchinson Hessian traces and an exact knapsack at ``avg_bits``."""

    avg_bits: float = 3.0
    bits: tuple[int, ...] = (2, 3, 4)
    tile: tuple[int, int] = (32, 64)
    group_size: int = 64
    pad: bool = False
    hutchinson_samples: int = 16  # ours: HAWQ-V2 uses ~200 on ImageNet models; 16 fits 2 cores
    micro_batch: int = 4
    seed: int = 0
    filter_fn: Any = field(default=default_filter, compare=False)

    def __post_init__(self) -> None:
        if not self.bits or any(
            isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 8 for b in self.bits
        ):
            raise ValueError(f"bits must be a non-empty tuple of integers in [1, 8], got {self.bits!r}")
        self.bits = tuple(sorted(set(self.bits)))
        if isinstance(self.avg_bits, bool) or not isinstance(self.avg_bits, (int, float)):
            raise TypeError(f"avg_bits must be a number, got {type(self.avg_bits).__name__}")
        if self.tile[1] % self.group_size:
            raise ValueError(f"group_size={self.group_size} must divide the tile's columns {self.tile[1]}")
        if (
            isinstance(self.hutchinson_samples, bool)
            or not isinstance(self.hutchinson_samples, int)
            or self.hutchinson_samples < 1
        ):
            raise ValueError(
                f"hutchinson_samples must be a positive integer, got {self.hutchinson_samples!r}"
            )


def hawq_allocation(
    model: nn.Module,
    calibration: torch.Tensor,
    config: HAWQConfig,
    targets: list[float],
    traces: dict[str, float] | None = None,
) -> tuple[dict[float, dict[str, int]], dict[str, float]]:
    """Layer bit-widths for every target (one trace estimate serves all); returns them and the traces."""
    linears = select_linears(model, config.filter_fn)
    for name, layer in linears.items():
        check_tiling(name, tuple(layer.weight.shape), config.tile, config.group_size, config.pad)
    if traces is None:
        generator = torch.Generator().manual_seed(config.seed)
        traces = hutchinson_traces(
            model, linears, calibration, config.micro_batch, config.hutchinson_samples, generator
        )
    weights = {name: layer.weight.detach() for name, layer in linears.items()}

    def quantize(weight: torch.Tensor, bits: int) -> torch.Tensor:
        stored = pad_to_tiles(weight, config.tile)
        return fake_quantize(stored, bits, config.group_size)[: weight.shape[0], : weight.shape[1]]

    costs = layer_costs(
        traces, squared_errors(weights, config.bits, quantize), {n: w.numel() for n, w in weights.items()}
    )
    layer_bits = {
        name: {b: uniform_ledger_bits(tuple(w.shape), config.tile, config.group_size, b) for b in config.bits}
        for name, w in weights.items()
    }
    n_weights = sum(w.numel() for w in weights.values())
    allocations = {}
    for target in targets:
        budget = math.floor(target * n_weights + 1e-6)
        top = sum(layer_bits[n][max(config.bits)] for n in weights)
        if top <= budget:
            allocations[target] = dict.fromkeys(weights, max(config.bits))
        else:
            allocations[target] = knapsack_allocation(costs, layer_bits, budget)
    return allocations, traces


def apply_layer_bits(
    model: nn.Module, layer_bits: dict[str, int], tile: tuple[int, int], group_size: int, pad: bool
) -> QuantizationReport:
    """RTN each layer at its own width; a one-width bit set per layer, so no tile ids are stored."""
    packed = {}
    for name, bits in layer_bits.items():
        layer = model.get_submodule(name)
        allocation = {name: uniform_tile_bits(tuple(layer.weight.shape), tile, bits)}
        packed.update(apply_allocation(model, allocation, (bits,), tile, group_size, pad))
    return packed_report(packed, [], None)


@register_quantize_handler(HAWQConfig)
def _quantize_hawq(model: nn.Module, config: HAWQConfig, *, calibration: torch.Tensor) -> QuantizationReport:
    allocations, _ = hawq_allocation(model, calibration, config, [config.avg_bits])
    return apply_layer_bits(model, allocations[config.avg_bits], config.tile, config.group_size, config.pad)
