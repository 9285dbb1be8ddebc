"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs -- the model-level verb.

``report = quantize_and_report(model, ScaleBitsConfig(avg_bits=2.5), calibration=tokens)``: a config
dataclass, a handler registered per config type, ``filter_fn(module, fqn)`` choosing the layers. It is
deliberately NOT torchao's ``quantize_``: ScaleBITS allocates bits across all layers at once from
calibration data, which a per-module torchao handler cannot see, and it returns a report (the old
``quantize_`` name remains as a deprecated alias). The
lower-level pieces: :func:`calibration_statistics` (gradient and diagonal empirical Fisher),
:func:`fold_reordering` (exact channel permutations), :func:`allocate_bits` (one progressive run, all
budgets) and :func:`apply_allocation` (swap ``nn.Linear`` for :class:`ScaleBitsLinear`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from neurips26.core.deprecation import warn_renamed
from neurips26.methods.scalebits.config import ScaleBitsConfig
from neurips26.methods.scalebits.core import (
    SCALE_BITS,
    AllocationTrace,
    batched_greedy,
    check_tiling,
    dynamic_tile_sensitivity,
    fake_quantize,
    index_bits,
    lower_bits,
    pad_to_tiles,
    padded_shape,
    replace_module,
    representable_range,
    select_fake,
    static_tile_sensitivity,
)
from neurips26.methods.scalebits.gather import apply_gathers, permutation_bits
from neurips26.methods.scalebits.packed import ScaleBitsLinear

_HANDLERS: dict[type, Callable[..., Any]] = {}


def register_quantize_handler(config_cls: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``handler(model, config, **kwargs)`` for ``config_cls`` (torchao's per-config dispatch)."""

    def decorate(handler: Callable[..., Any]) -> Callable[..., Any]:
        _HANDLERS[config_cls] = handler
        return handler

    return decorate


def quantize_and_report(model: nn.Module, config: Any, **kwargs: Any) -> QuantizationReport:
    """Quantize ``model`` in place with the handler registered for ``type(config)``; returns its report.

    ``kwargs`` go to the handler (``calibration=`` token ids for the calibrated methods).
    """
    handler = _HANDLERS.get(type(config))
    if handler is None:
        known = sorted(cls.__name__ for cls in _HANDLERS)
        raise TypeError(
            f"config of type {type(config).__name__} has no quantize_and_report handler; known: {known}"
        )
    return handler(model, config, **kwargs)


def quantize_(model: nn.Module, config: Any, **kwargs: Any) -> QuantizationReport:
    """Deprecated alias of :func:`quantize_and_report` (it looked like torchao's ``quantize_``, which
    returns None and rejects these configs)."""
    warn_renamed("scalebits.quantize_", "quantize_and_report", "torchao's quantize_ is a different verb")
    return quantize_and_report(model, config, **kwargs)


def select_linears(model: nn.Module, filter_fn: Callable[[Any, str], bool]) -> dict[str, nn.Linear]:
    """The ``nn.Linear`` layers ``filter_fn(module, fqn)`` accepts, by fully qualified name."""
    chosen = {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and filter_fn(module, name)
    }
    if not chosen:
        raise ValueError("filter_fn matched no nn.Linear layer of the model; nothing to quantize")
    return chosen


# ----------------------------------------------------------------------------------------------------
# Calibration statistics: gradient and diagonal empirical Fisher of the calibration loss
# ----------------------------------------------------------------------------------------------------


def calibration_statistics(
    model: nn.Module, linears: dict[str, nn.Linear], calibration: torch.Tensor, micro_batch: int
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``g = mean_k g_k`` and ``F = n_tok * mean_k g_k^2`` over micro-batches ``k`` of the next-token loss.

    ``g_k`` is the gradient of the mean token loss of micro-batch ``k`` with ``n_tok`` predicted tokens;
    ``n_tok * g_k^2`` estimates the per-token empirical Fisher diagonal, the Hessian of the mean loss.
    """
    if calibration.ndim != 2 or calibration.shape[1] < 2:
        raise ValueError(
            f"calibration must be (n_sequences, length >= 2) token ids, got {tuple(calibration.shape)}"
        )
    saved = {name: p.requires_grad for name, p in model.named_parameters()}
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    weights = {name: layer.weight for name, layer in linears.items()}
    for weight in weights.values():
        weight.requires_grad_(True)
    grad_sum = {name: torch.zeros_like(w) for name, w in weights.items()}
    square_sum = {name: torch.zeros_like(w) for name, w in weights.items()}
    batches = calibration.split(micro_batch)
    tokens = 0
    for batch in batches:
        logits = model(input_ids=batch).logits[:, :-1]
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        grads = torch.autograd.grad(loss, list(weights.values()))
        tokens = batch[:, 1:].numel()
        for name, grad in zip(weights, grads, strict=True):
            grad_sum[name] += grad
            square_sum[name] += grad**2
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(saved[name])
    n = len(batches)
    return {name: (grad_sum[name] / n, tokens * square_sum[name] / n) for name in weights}


# ----------------------------------------------------------------------------------------------------
# Bi-directional channel reordering, folded into neighbouring layers where it is exact
# ----------------------------------------------------------------------------------------------------


def element_sensitivity(
    weight: torch.Tensor, fisher: torch.Tensor, low_bits: int, group_size: int
) -> torch.Tensor:
    """``s_ij = F_ij (Q_low(W)_ij - W_ij)^2``: the loss cost of the lowest bit-width per weight."""
    padded = pad_to_tiles(weight, (1, group_size))  # whole groups when the weight needs padding
    error = fake_quantize(padded, low_bits, group_size)[:, : weight.shape[1]] - weight
    return fisher * error**2


@dataclass(frozen=True)
class FoldedPermutation:
    """One exact fold: ``producers``' output rows and ``consumer``'s input columns permuted alike."""

    producers: tuple[str, ...]
    consumer: str
    kind: str  # "mlp" or "attention-v-o"


def foldable_pairs(model: nn.Module, linears: dict[str, nn.Linear]) -> list[FoldedPermutation]:
    """The exact folds available in Llama-style blocks whose layers are all selected.

    * MLP: ``down(act(gate x) * up x)`` -- permuting the intermediate channels (rows of gate and up,
      columns of down) leaves the output unchanged.
    * Attention: ``o(softmax(q k^T) v)`` -- permuting head dims inside each KV head (rows of v) with the
      matching columns of o for every query head of the group is exact (no RoPE on v).
    q/k rows (RoPE pairs), the inputs of q/k/v/gate/up (one shared normed input) and the outputs of o/down
    (the residual stream) are left in place here: ``reorder="gather"`` reorders them with stored runtime
    gather indices (:mod:`.gather`).
    """
    folds = []
    for name, module in model.named_modules():
        children = {f"{name}.{child}" for child, _ in module.named_children()}
        if {f"{name}.gate_proj", f"{name}.up_proj", f"{name}.down_proj"} <= children & set(linears):
            folds.append(
                FoldedPermutation((f"{name}.gate_proj", f"{name}.up_proj"), f"{name}.down_proj", "mlp")
            )
        if {f"{name}.v_proj", f"{name}.o_proj"} <= children & set(linears) and hasattr(module, "head_dim"):
            folds.append(FoldedPermutation((f"{name}.v_proj",), f"{name}.o_proj", "attention-v-o"))
    return folds


def _attention_permutation(score: torch.Tensor, module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-KV-head sort of v's rows and the matching column order of o for every query head."""
    head_dim = module.head_dim
    n_kv = score.numel() // head_dim
    local = score.reshape(n_kv, head_dim).argsort(dim=1, descending=True)
    v_order = (local + head_dim * torch.arange(n_kv)[:, None]).reshape(-1)
    n_q = module.o_proj.in_features // head_dim
    group = n_q // n_kv
    kv_of_q = torch.arange(n_q) // group
    o_order = (local[kv_of_q] + head_dim * torch.arange(n_q)[:, None]).reshape(-1)
    return v_order, o_order


def fold_reordering(
    model: nn.Module, linears: dict[str, nn.Linear], sensitivity: dict[str, torch.Tensor]
) -> list[FoldedPermutation]:
    """Permute channels so sensitive ones sit together, folding each permutation exactly (in place).

    Channel score = row sums of the producers' sensitivities + column sums of the consumer's; channels are
    sorted by decreasing score, so sensitivity mass concentrates in the first tiles.
    """
    folds = foldable_pairs(model, linears)
    with torch.no_grad():
        for fold in folds:
            score = sum(sensitivity[p].sum(1) for p in fold.producers) + _consumer_score(fold, sensitivity)
            if fold.kind == "mlp":
                order = score.argsort(descending=True)
                producer_order, consumer_order = order, order
            else:
                attention = model.get_submodule(fold.consumer.rpartition(".")[0])
                producer_order, consumer_order = _attention_permutation(score, attention)
            for producer in fold.producers:
                linears[producer].weight.copy_(linears[producer].weight[producer_order])
                if linears[producer].bias is not None:
                    linears[producer].bias.copy_(linears[producer].bias[producer_order])
                sensitivity[producer] = sensitivity[producer][producer_order]
            consumer = linears[fold.consumer]
            consumer.weight.copy_(consumer.weight[:, consumer_order])
            sensitivity[fold.consumer] = sensitivity[fold.consumer][:, consumer_order]
    return folds


def folded_sides(folds: list[FoldedPermutation]) -> dict[str, set[str]]:
    """``{layer: {"out"} / {"in"}}``: the sides (rows of producers, columns of consumers) a fold permuted."""
    sides: dict[str, set[str]] = {}
    for fold in folds:
        for producer in fold.producers:
            sides.setdefault(producer, set()).add("out")
        sides.setdefault(fold.consumer, set()).add("in")
    return sides


def _consumer_score(fold: FoldedPermutation, sensitivity: dict[str, torch.Tensor]) -> torch.Tensor:
    columns = sensitivity[fold.consumer].sum(0)
    if fold.kind == "mlp":
        return columns
    rows = sensitivity[fold.producers[0]].shape[0]
    return columns.reshape(-1, rows).sum(0) if columns.numel() % rows == 0 else columns[:rows]


# ----------------------------------------------------------------------------------------------------
# Allocation over the whole model and application
# ----------------------------------------------------------------------------------------------------


@dataclass
class ModelAllocation:
    """An allocation run over a model: layer names, their tiles, and the trace with every budget's bits."""

    names: list[str]
    trace: AllocationTrace
    bit_set: tuple[int, ...]
    tile: tuple[int, int]
    group_size: int
    n_weights: int
    fixed_bits: int

    def allocation(self, avg_bits: float) -> dict[str, torch.Tensor]:
        return dict(zip(self.names, self.trace.snapshots[avg_bits], strict=True))


def allocate_bits(
    model: nn.Module,
    calibration: torch.Tensor,
    targets: Sequence[float],
    config: ScaleBitsConfig,
    linears: dict[str, nn.Linear] | None = None,
    full_precision_statistics: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> ModelAllocation:
    """One progressive ScaleBITS run over ``model``'s selected linears, snapshotting every target.

    ``config.sensitivity="dynamic"`` refreshes gradient and Fisher on the current fake-quantized model
    every round; ``"static"`` measures them once at full precision. The model's weights are restored.
    """
    linears = linears if linears is not None else select_linears(model, config.filter_fn)
    for name, layer in linears.items():
        check_tiling(name, tuple(layer.weight.shape), config.tile, config.group_size, config.pad)
    originals = {name: layer.weight.detach().clone() for name, layer in linears.items()}
    weights = {name: pad_to_tiles(w, config.tile) for name, w in originals.items()}  # stored shapes
    fake = {
        name: {b: fake_quantize(w, b, config.group_size) for b in config.bits} for name, w in weights.items()
    }
    names = list(linears)
    tile_elements = config.tile[0] * config.tile[1]
    tile_counts = [weights[n].numel() // tile_elements for n in names]
    n_weights = sum(w.numel() for w in originals.values())
    fixed_bits = sum(  # scales, tile ids and runtime gather indices do not depend on the allocation
        SCALE_BITS * weights[n].numel() // config.group_size
        + count * index_bits(len(config.bits))
        + permutation_bits(linears[n])
        for n, count in zip(names, tile_counts, strict=True)
    )
    low, high = representable_range(
        fixed_bits, tile_counts, config.tile, config.group_size, config.bits, n_weights
    )
    for target in targets:
        if target < low - 1e-9:  # above `high` every tile simply stays at the top width
            raise ValueError(
                f"avg_bits={target} is below the representable range [{low:.4f}, {high:.4f}] for "
                f"bits={config.bits}, tile={config.tile}, group_size={config.group_size} (metadata included)"
            )
    requested = list(targets)
    targets = [min(t, high) for t in targets]
    statistics = full_precision_statistics
    if statistics is None and config.sensitivity == "static":
        statistics = calibration_statistics(model, linears, calibration, config.micro_batch)

    def sensitivity(allocation: list[torch.Tensor]) -> list[torch.Tensor]:
        if config.sensitivity == "static":
            stats = statistics
        else:
            with torch.no_grad():
                for name, bits in zip(names, allocation, strict=True):
                    rows, cols = originals[name].shape
                    linears[name].weight.copy_(select_fake(fake[name], bits, config.tile)[:rows, :cols])
            stats = calibration_statistics(model, linears, calibration, config.micro_batch)
        deltas = []
        for name, bits in zip(names, allocation, strict=True):
            grad, fisher = (pad_to_tiles(x, config.tile, zero=True) for x in stats[name])
            lowered = lower_bits(config.bits, bits)
            if config.sensitivity == "static":
                delta = static_tile_sensitivity(
                    weights[name], fake[name], bits, lowered, grad, fisher, config.tile
                )
            else:
                delta = dynamic_tile_sensitivity(fake[name], bits, lowered, grad, fisher, config.tile)
            deltas.append(delta)
        return deltas

    try:
        trace = batched_greedy(
            tile_counts,
            config.bits,
            targets,
            sensitivity,
            tile=config.tile,
            group_size=config.group_size,
            fixed_bits=fixed_bits,
            n_weights=n_weights,
            fraction=config.fraction,
        )
    finally:
        with torch.no_grad():
            for name, layer in linears.items():
                layer.weight.copy_(originals[name])
    trace.snapshots = {t_in: trace.snapshots[t] for t_in, t in zip(requested, targets, strict=True)}
    return ModelAllocation(names, trace, config.bits, config.tile, config.group_size, n_weights, fixed_bits)


def apply_allocation(
    model: nn.Module,
    allocation: dict[str, torch.Tensor],
    bit_set: Sequence[int],
    tile: tuple[int, int],
    group_size: int,
    pad: bool = False,
) -> dict[str, ScaleBitsLinear]:
    """Replace each named ``nn.Linear`` by a packed :class:`ScaleBitsLinear` with its tile bit-widths."""
    packed = {}
    for name, tile_bits in allocation.items():
        layer = model.get_submodule(name)
        packed[name] = ScaleBitsLinear.from_weight(
            layer.weight,
            tile_bits,
            tuple(bit_set),
            tile,
            group_size,
            layer.bias,
            pad,
            getattr(layer, "input_order", None),
            getattr(layer, "output_order", None),
        )
        replace_module(model, name, packed[name])
    return packed


@dataclass
class QuantizationReport:
    """What ``quantize_and_report`` did: per-layer tile bits, the ledger totals and the allocation trace."""

    tile_bits: dict[str, torch.Tensor]
    n_weights: int
    total_bits: int
    nbytes: int
    folds: list[FoldedPermutation]
    trace: AllocationTrace | None

    @property
    def bits_per_weight(self) -> float:
        return self.total_bits / self.n_weights

    @property
    def bytes_per_weight_bits(self) -> float:
        """Average bits per weight from the packed byte size (byte padding of each stream included)."""
        return 8 * self.nbytes / self.n_weights


def packed_report(
    packed: dict[str, ScaleBitsLinear], folds: list[FoldedPermutation], trace: AllocationTrace | None
) -> QuantizationReport:
    ledgers = {name: layer.ledger() for name, layer in packed.items()}
    return QuantizationReport(
        {name: layer.tile_bits() for name, layer in packed.items()},
        sum(ledger.n_weights for ledger in ledgers.values()),
        sum(ledger.total_bits for ledger in ledgers.values()),
        sum(layer.packed_nbytes() for layer in packed.values()),
        folds,
        trace,
    )


def reorder_and_allocate(
    model: nn.Module, calibration: torch.Tensor, targets: Sequence[float], config: ScaleBitsConfig
) -> tuple[ModelAllocation, list[FoldedPermutation]]:
    """The whole search on ``model`` (reordered in place unless ``config.reorder == "none"``).

    1. full-precision statistics -> element sensitivities -> exact folded permutations (and, with
       ``reorder="gather"``, runtime gather indices on every side no fold reaches: the layers become
       :class:`GatherLinear`);
    2. one progressive (batched greedy) run that snapshots every target.
    """
    linears = select_linears(model, config.filter_fn)
    folds: list[FoldedPermutation] = []
    statistics = None
    if config.reorder in ("folded", "gather"):
        statistics = calibration_statistics(model, linears, calibration, config.micro_batch)
        low = min(config.bits)
        sensitivity = {
            name: element_sensitivity(layer.weight.detach(), statistics[name][1], low, config.group_size)
            for name, layer in linears.items()
        }
        folds = fold_reordering(model, linears, sensitivity)
        if config.reorder == "gather":
            linears = apply_gathers(model, linears, sensitivity, folded_sides(folds))
        statistics = sensitivity = None  # the permuted model needs fresh statistics (and frees these)
    allocation = allocate_bits(model, calibration, targets, config, linears, statistics)
    return allocation, folds


@register_quantize_handler(ScaleBitsConfig)
def _quantize_scalebits(
    model: nn.Module, config: ScaleBitsConfig, *, calibration: torch.Tensor
) -> QuantizationReport:
    """Reorder (folded), allocate with the batched greedy, then pack every selected linear."""
    allocation, folds = reorder_and_allocate(model, calibration, [config.avg_bits], config)
    packed = apply_allocation(
        model, allocation.allocation(config.avg_bits), config.bits, config.tile, config.group_size, config.pad
    )
    return packed_report(packed, folds, allocation.trace)


def uniform_tile_bits(shape: tuple[int, int], tile: tuple[int, int], bits: int) -> torch.Tensor:
    """Every tile at the same width (round-to-nearest at ``bits``); partial tiles count as whole."""
    return torch.full((math.prod(padded_shape(shape, tile)) // (tile[0] * tile[1]),), bits, dtype=torch.long)
