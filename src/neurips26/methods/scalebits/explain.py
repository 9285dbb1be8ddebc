"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs -- allocation explainer.

Per-layer average bits, per-tile bit heat-maps, and the drift between static (full-precision) and dynamic
(current quantized model) tile sensitivities at a given allocation.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from neurips26.methods.scalebits.config import ScaleBitsConfig
from neurips26.methods.scalebits.core import (
    dynamic_tile_sensitivity,
    fake_quantize,
    lower_bits,
    pad_to_tiles,
    padded_shape,
    select_fake,
    static_tile_sensitivity,
)
from neurips26.methods.scalebits.integration import calibration_statistics, select_linears


def layer_average_bits(tile_bits: dict[str, torch.Tensor]) -> dict[str, float]:
    """Mean code bit-width of each layer's tiles (all tiles have the same size)."""
    return {name: float(bits.float().mean()) for name, bits in tile_bits.items()}


def plot_bit_heatmaps(
    tile_bits: dict[str, torch.Tensor], shapes: dict[str, tuple[int, int]], tile: tuple[int, int], path: Path
) -> Path:
    """One panel per layer: the tile grid coloured by bit-width (saved as PNG with the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(7, len(tile_bits))
    rows = math.ceil(len(tile_bits) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(2.2 * columns, 2.2 * rows), squeeze=False)
    low = min(int(b.min()) for b in tile_bits.values())
    high = max(int(b.max()) for b in tile_bits.values())
    for axis, (name, bits) in zip(axes.flat, tile_bits.items(), strict=False):
        stored = padded_shape(shapes[name], tile)
        grid = bits.reshape(stored[0] // tile[0], stored[1] // tile[1])
        image = axis.imshow(grid.numpy(), vmin=low, vmax=high, cmap="viridis")
        axis.set_title(
            name.replace("model.layers.", "L").replace("self_attn.", "").replace("mlp.", ""), fontsize=7
        )
        axis.set_xticks([])
        axis.set_yticks([])
    for axis in list(axes.flat)[len(tile_bits) :]:
        axis.axis("off")
    figure.colorbar(image, ax=axes.ravel().tolist(), label="bits")
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    rank_a = a.argsort().argsort().double()
    rank_b = b.argsort().argsort().double()
    return float(torch.corrcoef(torch.stack([rank_a, rank_b]))[0, 1])


def sensitivity_drift(
    model: nn.Module, calibration: torch.Tensor, config: ScaleBitsConfig, tile_bits: dict[str, torch.Tensor]
) -> float:
    """Spearman rank correlation, over the tiles that can still be lowered, between the static and the
    dynamic sensitivity at the allocation ``tile_bits`` (1.0: no drift). The model is left unchanged."""
    linears = select_linears(model, config.filter_fn)
    originals = {name: layer.weight.detach().clone() for name, layer in linears.items()}
    weights = {name: pad_to_tiles(w, config.tile) for name, w in originals.items()}
    fake = {n: {b: fake_quantize(w, b, config.group_size) for b in config.bits} for n, w in weights.items()}
    static = calibration_statistics(model, linears, calibration, config.micro_batch)
    try:
        with torch.no_grad():
            for name in linears:
                rows, cols = originals[name].shape
                linears[name].weight.copy_(
                    select_fake(fake[name], tile_bits[name], config.tile)[:rows, :cols]
                )
        dynamic = calibration_statistics(model, linears, calibration, config.micro_batch)
    finally:
        with torch.no_grad():
            for name, layer in linears.items():
                layer.weight.copy_(originals[name])
    static_deltas, dynamic_deltas, movable = [], [], []
    padded = {
        key: {
            name: tuple(pad_to_tiles(x, config.tile, zero=True) for x in pair) for name, pair in stats.items()
        }
        for key, stats in (("static", static), ("dynamic", dynamic))
    }
    for name in linears:
        bits = tile_bits[name]
        lowered = lower_bits(config.bits, bits)
        static_deltas.append(
            static_tile_sensitivity(
                weights[name], fake[name], bits, lowered, *padded["static"][name], config.tile
            )
        )
        dynamic_deltas.append(
            dynamic_tile_sensitivity(fake[name], bits, lowered, *padded["dynamic"][name], config.tile)
        )
        movable.append(lowered < bits)
    mask = torch.cat(movable)
    if int(mask.sum()) < 2:
        raise ValueError("tile_bits leaves fewer than two tiles that can be lowered; drift is undefined")
    return _spearman(torch.cat(static_deltas)[mask], torch.cat(dynamic_deltas)[mask])
