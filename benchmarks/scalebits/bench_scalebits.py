"""ScaleBITS search time versus the number of tiles: batched greedy (5% per round) against exact greedy.

Four tiny Llamas (random weights, 2 layers) of growing width; tile (16, 32), group 32, target 3.0 bits.
Exact greedy lowers one tile per round (one sensitivity refresh per tile step); the batched greedy's
number of rounds does not grow with the number of tiles. Also reports the calibration loss of the two
allocations (quality). Run:

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scalebits/bench_scalebits.py [--exact-max-tiles 400]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from neurips26.methods.scalebits import ScaleBitsConfig, allocate_bits, apply_allocation
from neurips26.zoo.builders import tiny_llama


def calibration_loss(model: torch.nn.Module, tokens: torch.Tensor) -> float:
    with torch.no_grad():
        return float(model(input_ids=tokens, labels=tokens).loss)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 64, 96, 128])
    parser.add_argument("--exact-max-tiles", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokens = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(0))
    print(
        "| width | tiles | batched rounds | batched s | batched loss | exact rounds | exact s | exact loss |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for width in args.widths:
        model = tiny_llama(hidden_size=width, intermediate_size=2 * width, num_heads=4, num_kv_heads=2)
        row = []
        n_tiles = 0
        for fraction in (0.05, 1e-9):
            config = ScaleBitsConfig(avg_bits=3.0, tile=(16, 32), group_size=32, fraction=fraction)
            probe = copy.deepcopy(model)
            start = time.perf_counter()
            if fraction < 0.01 and n_tiles > args.exact_max_tiles:
                row += ["-", "-", "-"]
                continue
            result = allocate_bits(probe, tokens, [3.0], config)
            seconds = time.perf_counter() - start
            n_tiles = sum(len(b) for b in result.trace.snapshots[3.0])
            apply_allocation(probe, result.allocation(3.0), config.bits, config.tile, config.group_size)
            row += [str(result.trace.rounds), f"{seconds:.2f}", f"{calibration_loss(probe, tokens):.4f}"]
        print(f"| {width} | {n_tiles} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
