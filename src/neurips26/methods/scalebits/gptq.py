"""GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers (Frantar et al., 2022).

**Re-implemented here**: neither library installs next to this project's torch 2.13 / transformers 5.2
(``llmcompressor`` 0.14 needs transformers >= 5.14, ``gptqmodel`` 7.7 upgrades torch to 2.14). A side
virtual environment with llm-compressor 0.14.0.1 (transformers 5.17, same CPU torch) cross-checks it:
``benchmarks/scalebits/scalebits_gptq_crosscheck.py`` and
``tests/methods/scalebits/test_scalebits_llmcompressor.py`` (with
``static_groups=True`` one layer's result equals llm-compressor's ``quantize_weight`` exactly). It writes its
codes into the ScaleBITS packed format, so its bits are counted by the same ledger, and it accepts a
bit-width per group, so the same loop quantizes uniform allocations and per-tile ScaleBITS allocations.

Algorithm (paper, Alg. 1), for one weight ``W (R, C)`` and the layer-input Hessian ``H = 2 X X^T / n``:

1. dead inputs (``H_jj = 0``) get ``H_jj = 1`` and ``W[:, j] = 0``; damping ``H += lambda mean(diag H) I``;
2. ``U = chol(H^{-1})^T`` (upper Cholesky factor of the inverse Hessian);
3. columns in order; at the first column of each group, the group's asymmetric scale and zero are fitted on
   the *current* (error-updated) weights (``static_groups=True``: all groups fitted once on the original
   weights before the loop, llm-compressor's rule); column ``j`` is rounded, its error
   ``e = (w_j - q_j) / U_jj`` is spread over the remaining columns of the block, ``W[:, j:] -= e U[j, j:]``;
4. lazy batch updates: after each block of ``block_size`` columns, ``W[:, end:] -= E U[block, end:]``.

``act_order=True`` (the reference code's ``--act-order``; llm-compressor's default ordering) processes the
columns by descending ``H_jj`` -- the inputs with the most energy first, while the most columns are left to
absorb their error -- and needs ``static_groups=True``, so that every column keeps the scale and zero of its
*stored* group (no index map is needed by the packed format).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from neurips26.methods.scalebits.core import (
    _MIN_SCALE,
    check_tiling,
    dequantize_groups,
    expand_tile_values,
    pad_to_tiles,
    padded_shape,
)


def fit_group(weight: torch.Tensor, bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Asymmetric min/max scale (float16-representable) and integer zero of each row of ``weight (R, k)``.

    The same rule as :func:`core.quantize_groups`: ``s = fp16((max - min) / (2^b - 1))``,
    ``z = clamp(round(-min / s), 0, 2^b - 1)``; ``bits (R,)``.
    """
    qmax = (2.0 ** bits.double()).float() - 1
    low, high = weight.amin(1), weight.amax(1)
    scale = ((high - low) / qmax).clamp_min(_MIN_SCALE).half().float()
    zero = torch.minimum(torch.round(-low / scale).clamp_min(0), qmax)
    return scale, zero


def round_column(
    column: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: torch.Tensor
) -> torch.Tensor:
    """Integer codes ``q = clamp(round(w / s) + z, 0, 2^b - 1)`` of one column ``(R,)``."""
    qmax = (2.0 ** bits.double()).float() - 1
    return torch.minimum((torch.round(column / scale) + zero).clamp_min(0), qmax)


def inverse_hessian_factor(hessian: torch.Tensor, weight: torch.Tensor, damp: float) -> torch.Tensor:
    """Steps 1-2: zero dead columns of ``weight`` in place, damp ``H`` and return ``U = chol(H^-1)^T``."""
    hessian = hessian.double().clone()
    dead = torch.diag(hessian) == 0
    hessian[dead, dead] = 1.0
    weight[:, dead] = 0.0
    diagonal = torch.arange(hessian.shape[0])
    hessian[diagonal, diagonal] += damp * torch.diag(hessian).mean()
    inverse = torch.cholesky_inverse(torch.linalg.cholesky(hessian))
    return torch.linalg.cholesky(inverse, upper=True).float()


def gptq_quantize(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    group_bits: torch.Tensor,
    group_size: int,
    block_size: int = 128,
    damp: float = 0.01,
    static_groups: bool = False,
    act_order: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPTQ with lazy batch updates and group-wise asymmetric quantization, a bit-width per group.

    Parameters
    ----------
    weight: ``(R, C)``.
    hessian: ``(C, C)``, ``X X^T`` of the layer inputs (any positive scale).
    group_bits: ``(R, ceil(C / g))`` integer bit-width of each group (one row, ``g`` input channels).
    group_size: ``g``; the last group may be partial when ``g`` does not divide ``C``.
    block_size: columns per lazy batch (paper: 128); must be a multiple of ``g`` so that a group never
        straddles two blocks and its scale is fitted on fully updated weights.
    damp: ``lambda``, the dampening fraction of the mean diagonal (paper: 1%).
    static_groups: fit every group's scale and zero once on the original weights (dead columns zeroed)
        before the loop, as llm-compressor's GPTQ does (its observer runs before ``quantize_weight``) and
        the reference code's ``static_groups=True``; default: fit each group on the error-updated weights
        at its first column (the reference code's default).
    act_order: quantize the columns by descending Hessian diagonal (needs ``static_groups``); the returned
        codes are in the original column order.

    Returns
    -------
    codes ``(R, C)`` int64, scales ``(R, G)`` float32 (float16-representable), zeros ``(R, G)`` int64.
    """
    rows, cols = weight.shape
    n_groups = -(-cols // group_size)
    if tuple(hessian.shape) != (cols, cols):
        raise ValueError(
            f"hessian must be ({cols}, {cols}) for weight {tuple(weight.shape)}, got {tuple(hessian.shape)}"
        )
    if tuple(group_bits.shape) != (rows, n_groups):
        raise ValueError(f"group_bits must be ({rows}, {n_groups}), got {tuple(group_bits.shape)}")
    if block_size % group_size:
        raise ValueError(f"block_size={block_size} must be a multiple of group_size={group_size}")
    check_act_order(act_order, static_groups)
    order = activation_order(hessian) if act_order else torch.arange(cols)
    work = weight.detach().float()[:, order].clone()
    factor = inverse_hessian_factor(hessian[order][:, order], work, damp)  # zeroes the dead columns
    group_of = (order // group_size).tolist()  # each processed column's stored group
    codes = torch.zeros(rows, cols)
    scales = torch.zeros(rows, n_groups)
    zeros = torch.zeros(rows, n_groups)
    if static_groups:
        _fit_static_groups(work[:, torch.argsort(order)], group_bits, group_size, scales, zeros)
    for start in range(0, cols, block_size):
        end = min(start + block_size, cols)
        block = work[:, start:end].clone()
        errors = torch.zeros_like(block)
        block_factor = factor[start:end, start:end]
        for i in range(end - start):
            column = start + i
            group = group_of[column]
            bits = group_bits[:, group]
            if column % group_size == 0 and not static_groups:  # fit on the error-updated weights
                scales[:, group], zeros[:, group] = fit_group(block[:, i : i + group_size], bits)
            q = round_column(block[:, i], scales[:, group], zeros[:, group], bits)
            codes[:, column] = q
            dequantized = (q - zeros[:, group]) * scales[:, group]
            error = (block[:, i] - dequantized) / block_factor[i, i]
            block[:, i:] -= error[:, None] * block_factor[i, i:][None, :]  # step 3: spread the error
            errors[:, i] = error
        work[:, end:] -= errors @ factor[start:end, end:]  # step 4: lazy batch update
    return codes[:, torch.argsort(order)].long(), scales, zeros.long()


def activation_order(hessian: torch.Tensor) -> torch.Tensor:
    """Column order of ``act_order``: descending Hessian diagonal (stable, so ties keep their order)."""
    return torch.argsort(torch.diag(hessian), descending=True, stable=True)


def check_act_order(act_order: bool, static_groups: bool) -> None:
    """``act_order`` needs ``static_groups``: a ``ValueError`` naming both otherwise."""
    if act_order and not static_groups:
        raise ValueError(
            "act_order=True needs static_groups=True: a group fitted at its first processed column would "
            "mix columns from all over the weight"
        )


def _fit_static_groups(
    original: torch.Tensor,
    group_bits: torch.Tensor,
    group_size: int,
    scales: torch.Tensor,
    zeros: torch.Tensor,
) -> None:
    """Fit every group's scale and zero once on the (original-order, dead-zeroed) weights, in place."""
    for group in range(scales.shape[1]):
        columns = original[:, group * group_size : (group + 1) * group_size]
        scales[:, group], zeros[:, group] = fit_group(columns, group_bits[:, group])


# ----------------------------------------------------------------------------------------------------
# Model level: sequential stages, Hessians from the already-quantized prefix
# ----------------------------------------------------------------------------------------------------


def accumulate_hessians(
    model: nn.Module, layers: dict[str, nn.Linear], calibration: torch.Tensor, micro_batch: int
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``H = 2 X X^T / n`` of every layer's input over the calibration tokens, and the first stage.

    The first stage is the run of consecutive calls, in forward order, that share the first called layer's
    input tensor (q/k/v share one normed input, gate/up another): they can be quantized together.
    """
    hessians = {name: torch.zeros(layer.in_features, layer.in_features) for name, layer in layers.items()}
    counts = dict.fromkeys(layers, 0)
    first_calls: list[tuple[str, torch.Tensor]] = []  # holding the inputs keeps them alive and distinct
    recording = True

    def hook(name: str):
        def record(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).float()
            order = getattr(module, "input_order", None)
            if order is not None:  # a gathered layer's stored weight sees the gathered input
                x = x[:, order]
            if recording:
                first_calls.append((name, inputs[0]))
            counts[name] += x.shape[0]
            hessians[name] += 2.0 * x.T @ x

        return record

    handles = [layer.register_forward_pre_hook(hook(name)) for name, layer in layers.items()]
    try:
        with torch.no_grad():
            for batch in calibration.split(micro_batch):
                model(input_ids=batch)
                recording = False
    finally:
        for handle in handles:
            handle.remove()
    stage = [first_calls[0][0]]
    for name, tensor in first_calls[1:]:
        if tensor is not first_calls[0][1] or name in stage:  # the same tensor object, not a reused address
            break
        stage.append(name)
    return {name: hessians[name] / max(counts[name], 1) for name in layers}, stage


class _StageRecorded(Exception):
    """Raised by a hook to end a calibration forward once the stage's inputs are recorded."""


def stage_hessians(
    model: nn.Module, layers: dict[str, nn.Linear], calibration: torch.Tensor, micro_batch: int
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The first stage of :func:`accumulate_hessians` and its Hessians, each forward cut short after it.

    The same stage and the same ``H = 2 X X^T / n`` as :func:`accumulate_hessians` (the first run of calls
    sharing the first called layer's input tensor), but every micro-batch's forward stops at the first
    call outside the stage: the later layers' inputs change once the stage is quantized, so the rest of
    the forward (and the output head, a 262k-word vocabulary on Gemma 3) is work thrown away. An empty
    stage means the forward calls none of ``layers``.
    """
    hessians = {name: torch.zeros(layer.in_features, layer.in_features) for name, layer in layers.items()}
    counts = dict.fromkeys(layers, 0)
    stage: list[str] = []
    current: dict[str, Any] = {"input": None, "first": True}

    def hook(name: str):
        def record(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
            if current["input"] is None:
                current["input"] = inputs[0]  # holding it keeps the tensor alive and its identity unique
            elif inputs[0] is not current["input"]:
                raise _StageRecorded
            if current["first"]:
                if name in stage:
                    raise _StageRecorded
                stage.append(name)
            elif name not in stage:
                raise _StageRecorded
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).float()
            order = getattr(module, "input_order", None)
            if order is not None:  # a gathered layer's stored weight sees the gathered input
                x = x[:, order]
            counts[name] += x.shape[0]
            hessians[name] += 2.0 * x.T @ x

        return record

    handles = [layer.register_forward_pre_hook(hook(name)) for name, layer in layers.items()]
    try:
        with torch.no_grad():
            for batch in calibration.split(micro_batch):
                with contextlib.suppress(_StageRecorded):  # the stage is recorded: the rest is not needed
                    model(input_ids=batch)
                current["input"], current["first"] = None, False
    finally:
        for handle in handles:
            handle.remove()
    return {name: hessians[name] / max(counts[name], 1) for name in stage}, stage


def gptq_quantize_model(
    model: nn.Module,
    calibration: torch.Tensor,
    tile_bits: dict[str, torch.Tensor],
    tile: tuple[int, int],
    group_size: int,
    pad: bool = False,
    micro_batch: int = 4,
    block_size: int = 128,
    damp: float = 0.01,
    static_groups: bool = False,
    act_order: bool = False,
) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """GPTQ over the named linears of ``model`` with their per-tile bit-widths, stage by stage.

    Each stage's Hessians are measured with every earlier stage already quantized (the sequential GPTQ of
    the paper's code), and the layer's weight is set to its dequantized value in place. Returns the stored
    (padded) ``codes, scales, zeros`` per layer, ready for :meth:`ScaleBitsLinear.from_quantized`.
    """
    layers = {name: model.get_submodule(name) for name in tile_bits}
    for name, layer in layers.items():
        check_tiling(name, tuple(layer.weight.shape), tile, group_size, pad)
    quantized: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
    remaining = dict(layers)

    def quantize(name: str, hessian: torch.Tensor) -> None:
        layer = remaining.pop(name)
        quantized[name] = _quantize_layer(
            layer, hessian, tile_bits[name], tile, group_size, block_size, damp, static_groups, act_order
        )

    while remaining:
        hessians, stage = stage_hessians(model, remaining, calibration, micro_batch)
        if not stage:  # layers the forward never calls: plain H = I
            for name in list(remaining):
                quantize(name, torch.eye(layers[name].in_features))
        for name in stage:
            quantize(name, hessians[name])
    return quantized


def _quantize_layer(
    layer: nn.Linear,
    hessian: torch.Tensor,
    tile_bits: torch.Tensor,
    tile: tuple[int, int],
    group_size: int,
    block_size: int,
    damp: float,
    static_groups: bool = False,
    act_order: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPTQ on the real ``(R, C)`` weight, then the stored (padded) buffers with edge values repeated."""
    rows, cols = layer.weight.shape
    stored = padded_shape((rows, cols), tile)
    element_bits = expand_tile_values(tile_bits.long(), stored, tile)
    group_bits = element_bits[:rows, :cols:group_size]
    codes, scales, zeros = gptq_quantize(
        layer.weight, hessian, group_bits, group_size, block_size, damp, static_groups, act_order
    )
    with torch.no_grad():
        layer.weight.copy_(dequantize_partial_groups(codes, scales, zeros, group_size))
    scale_tile = (tile[0], tile[1] // group_size)
    return pad_to_tiles(codes, tile), pad_to_tiles(scales, scale_tile), pad_to_tiles(zeros, scale_tile)


def dequantize_partial_groups(
    codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, group_size: int
) -> torch.Tensor:
    """``(q - z) s`` when the last group may be partial (``C`` not a multiple of ``g``)."""
    cols = codes.shape[1]
    padded = pad_to_tiles(codes, (1, group_size))
    return dequantize_groups(padded, scales, zeros)[:, :cols]
