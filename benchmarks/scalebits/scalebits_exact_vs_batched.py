"""Exact greedy (one tile per round) versus ScaleBITS' batched greedy (5% of tiles per round) on the
experiment's trained model: held-out perplexity at each budget and search time.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scalebits/scalebits_exact_vs_batched.py
"""

from __future__ import annotations

import copy
import time

import torch

from neurips26.methods.scalebits import ScaleBitsConfig, apply_allocation, reorder_and_allocate
from neurips26.methods.scalebits.config import ScaleBitsExperimentConfig
from neurips26.methods.scalebits.experiment import calibration_windows, evaluate, load_task

TARGETS = [2.4, 2.6, 3.0]


def main() -> None:
    torch.set_num_threads(1)
    config = ScaleBitsExperimentConfig()
    task = load_task(config)
    calibration = calibration_windows(task.train_ids, config.calibration_sequences, config.sequence_length, 0)
    print(f"model: {config.model}")
    print("| search | rounds | seconds | " + " | ".join(f"ppl @ {t}" for t in TARGETS) + " |")
    print("|---|---|---|" + "---|" * len(TARGETS))
    for label, fraction in (("batched 5%", 0.05), ("exact (1 tile/round)", 1e-9)):
        model = copy.deepcopy(task.model)
        qconfig = ScaleBitsConfig(
            avg_bits=max(TARGETS),
            bits=config.method.bits,
            tile=config.method.tile,
            group_size=config.method.group_size,
            fraction=fraction,
            micro_batch=config.method.micro_batch,
        )
        start = time.perf_counter()
        allocation, _ = reorder_and_allocate(model, calibration, TARGETS, qconfig)
        seconds = time.perf_counter() - start
        perplexities = []
        for target in TARGETS:
            quantized = copy.deepcopy(model)
            apply_allocation(
                quantized,
                allocation.allocation(target),
                config.method.bits,
                config.method.tile,
                config.method.group_size,
            )
            perplexities.append(evaluate(quantized, task.model, task.heldout_ids, config)["perplexity"])
        cells = " | ".join(f"{p:.3f}" for p in perplexities)
        print(f"| {label} | {allocation.trace.rounds} | {seconds:.1f} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
