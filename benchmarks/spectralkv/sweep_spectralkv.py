"""Design sweep for SpectralKV's free choices, on *train-split* windows (never the experiment's test data).

    PYTHONPATH=src python benchmarks/spectralkv/sweep_spectralkv.py

Attention-output error over the prefix for the decode queries (the experiment's ``fidelity_error``) on 4
train-split windows of 2048 + 16 tokens of the zoo's tiny-llama, for score power beta in {1, 2, 4}, rank
strategy hybrid / restart / segments, and entropy vs uniform layer budgets, next to SnapKV and TOVA; then
the budget direction gamma in {2, 1, -1} (restart coreset, beta 1) and the per-layer concentration of
those windows.

    PYTHONPATH=src python benchmarks/spectralkv/sweep_spectralkv.py --pool-factors 2 1.5 1.25 \
        [--energy-tols 0.01]
        [--keeps 0.5 0.125 0.0625] [--strategies segments restart] [--segment-budgets 32 64]
        [--block-sizes 16]

instead sweeps only the speed knobs (candidate-pool size x pivoting energy tolerance x rank strategy ...)
for the press and its uniform-budget variant, next to SnapKV.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import torch
from kvpress import SnapKVPress, TOVAPress

from neurips26 import zoo
from neurips26.methods.spectralkv import SpectralKVPress
from neurips26.methods.spectralkv.evaluation import decode_continuation
from neurips26.methods.spectralkv.press_eval import compressed_prefill, text_batch
from neurips26.zoo.training import load_corpus_tokens


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keeps", type=float, nargs="+", default=[0.5, 0.125, 0.0625])
    parser.add_argument("--pool-factors", type=float, nargs="+", default=None)
    parser.add_argument("--energy-tols", type=float, nargs="+", default=[0.01])
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[SpectralKVPress.block_size])
    parser.add_argument("--strategies", nargs="+", default=[SpectralKVPress.rank_strategy])
    parser.add_argument("--segment-budgets", type=int, nargs="+", default=[SpectralKVPress.segment_budget])
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer = zoo.load("tiny-llama")
    train = load_corpus_tokens(tokenizer, "train")
    ids = text_batch(train.haystack.ids, np.random.default_rng(7), 4, 2048 + 16)

    def fidelity(press: object) -> float:
        prefill = compressed_prefill(model, ids[:, :2048], press, keep_full=True)
        return float(decode_continuation(model, prefill, ids[:, 2048:], fidelity=True).fidelity_error or 0.0)

    if args.pool_factors:
        for keep in args.keeps:
            ratio = 1 - keep
            errors = {"snapkv": fidelity(SnapKVPress(compression_ratio=ratio, window_size=32))}
            grid = itertools.product(
                args.pool_factors,
                args.energy_tols,
                args.block_sizes,
                args.strategies,
                args.segment_budgets,
                ("entropy", "uniform"),
            )
            for pool, tol, block, strategy, segment, mode in grid:
                if strategy != "segments" and segment != args.segment_budgets[0]:
                    continue  # the segment budget only matters to "segments"
                press = SpectralKVPress(
                    ratio,
                    pool_factor=pool,
                    energy_tol=tol,
                    block_size=block,
                    rank_strategy=strategy,
                    segment_budget=segment,
                    budget_mode=mode,
                )
                name = f"pool {pool:g} energy_tol {tol:g} block {block} {strategy}"
                name += f" segment_budget {segment}" if strategy == "segments" else ""
                errors[f"{name} {mode}"] = fidelity(press)
            print(f"\n## keep {keep:g}\n| system | fidelity error |\n|---|---|")
            for name, value in errors.items():
                print(f"| {name} | {value:.4f} |")
        return
    for keep in args.keeps:
        ratio = 1 - keep
        errors = {
            "snapkv": fidelity(SnapKVPress(compression_ratio=ratio, window_size=32)),
            "tova": fidelity(TOVAPress(compression_ratio=ratio)),
        }
        for beta, strategy, mode in itertools.product(
            (1.0, 2.0, 4.0), ("hybrid", "restart", "segments"), ("entropy", "uniform")
        ):
            press = SpectralKVPress(ratio, score_power=beta, rank_strategy=strategy, budget_mode=mode)
            errors[f"beta={beta:g} {strategy} {mode}"] = fidelity(press)
        for gamma in (2.0, -1.0):  # gamma = 1 is in the grid above
            press = SpectralKVPress(ratio, gamma=gamma, rank_strategy="restart")
            errors[f"beta=1 restart entropy gamma={gamma:g}"] = fidelity(press)
        print(f"\n## keep {keep:g}\n| system | fidelity error |\n|---|---|")
        for name, value in sorted(errors.items(), key=lambda kv: kv[1]):
            print(f"| {name} | {value:.4f} |")

    observer = SpectralKVPress(0.5)
    with torch.no_grad(), observer.observing(model):
        model(ids[:, :2048])
    print(
        "\nconcentration per layer:",
        [round(observer.concentrations[i], 3) for i in sorted(observer.concentrations)],
    )


if __name__ == "__main__":
    main()
