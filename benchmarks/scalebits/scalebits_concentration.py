"""Does the tiny model show ScaleBITS' bi-directional sensitivity concentration, and does folding help?

Per layer: the share of sensitivity mass ``s_ij = F_ij (Q_2(W) - W)_ij^2`` in the top 10% of output rows
and of input columns (0.10 would be no concentration), and in the top 10% of (32, 64) tiles before,
after the folded reordering and after folds plus runtime gathers (``reorder="gather"``); then, unless
``--no-explain``, the per-layer bits at 2.6 bits/weight, the static-vs-dynamic sensitivity drift and a bit
heat-map PNG. Uses the experiment's model (``--model``: zoo tiny-llama or tiny-qwen3; tiny-llama falls back
to the in-process model when the zoo is missing).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scalebits/scalebits_concentration.py [--model \
        tiny-qwen3]
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch

from neurips26.methods.scalebits import ScaleBitsConfig, allocate_bits
from neurips26.methods.scalebits.config import ScaleBitsExperimentConfig, default_filter
from neurips26.methods.scalebits.core import channel_concentration, pad_to_tiles, tile_concentration
from neurips26.methods.scalebits.experiment import calibration_windows, load_task
from neurips26.methods.scalebits.explain import layer_average_bits, plot_bit_heatmaps, sensitivity_drift
from neurips26.methods.scalebits.gather import apply_gathers
from neurips26.methods.scalebits.integration import (
    calibration_statistics,
    element_sensitivity,
    fold_reordering,
    folded_sides,
    select_linears,
)


def concentration(sensitivity: torch.Tensor, tile: tuple[int, int]) -> float:
    """Top-10% tile share; a weight that whole tiles do not cover is padded with zero sensitivity."""
    return tile_concentration(pad_to_tiles(sensitivity, tile, zero=True), tile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llama", choices=("tiny-llama", "tiny-qwen3"))
    parser.add_argument("--no-explain", action="store_true", help="skip the 2.6-bit allocation")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = ScaleBitsExperimentConfig(model=args.model)
    task = load_task(config)
    model = copy.deepcopy(task.model)
    calibration = calibration_windows(task.train_ids, config.calibration_sequences, config.sequence_length, 0)
    linears = select_linears(model, default_filter)
    stats = calibration_statistics(model, linears, calibration, config.method.micro_batch)
    sensitivity = {
        name: element_sensitivity(layer.weight.detach(), stats[name][1], 2, config.method.group_size)
        for name, layer in linears.items()
    }
    before = {name: concentration(s, config.method.tile) for name, s in sensitivity.items()}
    channels = {name: channel_concentration(s) for name, s in sensitivity.items()}
    folds = fold_reordering(model, linears, sensitivity)
    folded = {name: concentration(s, config.method.tile) for name, s in sensitivity.items()}
    gathered_model = copy.deepcopy(model)
    gathered = {name: s.clone() for name, s in sensitivity.items()}
    gathered_linears = select_linears(gathered_model, default_filter)
    apply_gathers(gathered_model, gathered_linears, gathered, folded_sides(folds))
    print(f"model: {config.model}")
    print("| layer | top-10% rows | top-10% cols | top-10% tiles before | after folding | folds + gathers |")
    print("|---|---|---|---|---|---|")
    for name in sensitivity:
        rows, cols = channels[name]
        after = concentration(gathered[name], config.method.tile)
        print(f"| {name} | {rows:.2f} | {cols:.2f} | {before[name]:.2f} | {folded[name]:.2f} | {after:.2f} |")
    if not args.no_explain:
        explain_allocation(model, calibration, config)


def explain_allocation(
    model: torch.nn.Module, calibration: torch.Tensor, config: ScaleBitsExperimentConfig
) -> None:
    """Per-layer bits at 2.6 bits/weight, static-vs-dynamic drift, and the heat-map figure."""
    qconfig = ScaleBitsConfig(
        avg_bits=2.6,
        bits=config.method.bits,
        tile=config.method.tile,
        group_size=config.method.group_size,
        reorder="none",
        fraction=config.method.fraction,
        micro_batch=config.method.micro_batch,
        pad=config.method.pad,
    )
    allocation = allocate_bits(model, calibration, [2.6], qconfig).allocation(2.6)
    top = {name: torch.full_like(bits, max(config.method.bits)) for name, bits in allocation.items()}
    print(
        "\nstatic-vs-dynamic rank correlation of tile sensitivities: "
        f"all tiles at {max(config.method.bits)} bits "
        f"{sensitivity_drift(model, calibration, qconfig, top):.3f}; at the 2.6-bit allocation "
        f"{sensitivity_drift(model, calibration, qconfig, allocation):.3f}"
    )
    print("\n| layer | mean bits at 2.6 |\n|---|---|")
    for name, bits in layer_average_bits(allocation).items():
        print(f"| {name} | {bits:.2f} |")
    shapes = {name: tuple(model.get_submodule(name).weight.shape) for name in allocation}
    path = plot_bit_heatmaps(allocation, shapes, config.method.tile, Path("scalebits_bits_2.6.png"))
    print(f"\nheat-map: {path}")


if __name__ == "__main__":
    main()
