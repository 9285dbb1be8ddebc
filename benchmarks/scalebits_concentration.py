"""Does the tiny model show ScaleBITS' bi-directional sensitivity concentration, and does folding help?

Per layer: the share of sensitivity mass ``s_ij = F_ij (Q_2(W) - W)_ij^2`` in the top 10% of output rows
and of input columns (0.10 would be no concentration), and in the top 10% of (32, 64) tiles before and
after the folded reordering. Uses the experiment's model (zoo tiny-llama, else the in-process fallback).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scalebits_concentration.py
"""

from __future__ import annotations

import copy

import torch

from neurips26.methods.scalebits.config import ScaleBitsExperimentConfig, default_filter
from neurips26.methods.scalebits.core import channel_concentration, tile_concentration
from neurips26.methods.scalebits.experiment import calibration_windows, load_task
from neurips26.methods.scalebits.integration import (
    calibration_statistics,
    element_sensitivity,
    fold_reordering,
    select_linears,
)


def main() -> None:
    torch.set_num_threads(1)
    config = ScaleBitsExperimentConfig()
    task = load_task(config)
    model = copy.deepcopy(task.model)
    calibration = calibration_windows(task.train_ids, config.calibration_sequences, config.sequence_length, 0)
    linears = select_linears(model, default_filter)
    stats = calibration_statistics(model, linears, calibration, config.micro_batch)
    sensitivity = {
        name: element_sensitivity(layer.weight.detach(), stats[name][1], 2, config.group_size)
        for name, layer in linears.items()
    }
    before = {name: tile_concentration(s, config.tile) for name, s in sensitivity.items()}
    channels = {name: channel_concentration(s) for name, s in sensitivity.items()}
    fold_reordering(model, linears, sensitivity)
    print(f"model: {task.source}")
    print("| layer | top-10% rows | top-10% cols | top-10% tiles before | after folding |")
    print("|---|---|---|---|---|")
    for name, s in sensitivity.items():
        rows, cols = channels[name]
        after = tile_concentration(s, config.tile)
        print(f"| {name} | {rows:.2f} | {cols:.2f} | {before[name]:.2f} | {after:.2f} |")


if __name__ == "__main__":
    main()
