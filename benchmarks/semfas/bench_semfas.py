"""SEM-FAS speed: single-pass inference vs concat-ERM (equal encoders) and MC-dropout (20 passes), and the
head's cost over d = 16..128 and M = 2..6 (issue: O((K + M) d^2 + M^2 d) per class).

    OMP_NUM_THREADS=1 python benchmarks/semfas/bench_semfas.py [--json out.json]

Times are medians of repeated forward passes (no grad) on one thread, batch 256, with the experiment's
encoders (descriptor MLPs; 120/88/88 inputs, hidden 32).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from neurips26.methods.semfas import SEMFAS
from neurips26.methods.semfas.baselines import ConcatERM
from neurips26.methods.semfas.encoders import make_encoders


def _median_ms(fn, repeats: int = 30) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _cnn(channels: int) -> torch.nn.Module:
    """A small CNN encoder on 32 x 32 images (about 40k parameters): the research notes' size."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 32),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sizes = {"rgb": 120, "depth": 88, "ir": 88}
    batch = 256
    inputs = {m: torch.randn(batch, f) for m, f in sizes.items()}
    mask = torch.ones(batch, 3, dtype=torch.bool)
    results: dict = {}
    semfas = SEMFAS(make_encoders(sizes, 32, 0.1), dim=32, heads=4, povm_rank=8).eval()
    concat = ConcatERM(make_encoders(sizes, 32, 0.1), 32, dropout=0.1).eval()
    with torch.no_grad():
        results["semfas_ms"] = _median_ms(lambda: semfas(inputs, mask))
        results["concat_erm_ms"] = _median_ms(lambda: concat(inputs, mask))
        concat.train()  # dropout on: 20 stochastic passes
        results["mc_dropout_20_ms"] = _median_ms(lambda: [concat(inputs, mask) for _ in range(20)], 10)
        concat.eval()
    # the same comparison with small CNN encoders on raw 32 x 32 images (an end-to-end deployment)
    channels = {"rgb": 3, "depth": 1, "ir": 1}
    images = {m: torch.randn(batch, c, 32, 32) for m, c in channels.items()}
    semfas_cnn = SEMFAS({m: _cnn(c) for m, c in channels.items()}, dim=32, heads=4, povm_rank=8).eval()
    concat_cnn = ConcatERM({m: _cnn(c) for m, c in channels.items()}, 32, dropout=0.1).eval()
    with torch.no_grad():
        results["semfas_cnn_ms"] = _median_ms(lambda: semfas_cnn(images, mask), 10)
        results["concat_erm_cnn_ms"] = _median_ms(lambda: concat_cnn(images, mask), 10)
        concat_cnn.train()
        results["mc_dropout_20_cnn_ms"] = _median_ms(lambda: [concat_cnn(images, mask) for _ in range(20)], 3)
    results["semfas_over_concat_cnn"] = results["semfas_cnn_ms"] / results["concat_erm_cnn_ms"]
    results["mc_dropout_over_semfas_cnn"] = results["mc_dropout_20_cnn_ms"] / results["semfas_cnn_ms"]
    print(
        f"CNN encoders: SEM-FAS {results['semfas_cnn_ms']:.1f} ms, "
        f"concat-ERM {results['concat_erm_cnn_ms']:.1f} ms ({results['semfas_over_concat_cnn']:.2f}x), "
        f"MC-dropout x20 {results['mc_dropout_20_cnn_ms']:.1f} ms "
        f"({results['mc_dropout_over_semfas_cnn']:.1f}x SEM-FAS)"
    )
    results["semfas_over_concat"] = results["semfas_ms"] / results["concat_erm_ms"]
    results["mc_dropout_over_semfas"] = results["mc_dropout_20_ms"] / results["semfas_ms"]
    print(
        f"batch {batch}: SEM-FAS {results['semfas_ms']:.2f} ms, concat-ERM {results['concat_erm_ms']:.2f} ms "
        f"({results['semfas_over_concat']:.2f}x), MC-dropout x20 {results['mc_dropout_20_ms']:.2f} ms "
        f"({results['mc_dropout_over_semfas']:.1f}x SEM-FAS)"
    )
    # the head alone (encoders = identity on 32 features) over d and M
    head = {}
    with torch.no_grad():
        for modalities in (2, 3, 4, 6):
            names = [f"m{i}" for i in range(modalities)]
            features = {m: torch.randn(batch, 32) for m in names}
            for dim in (16, 32, 64, 128):
                model = SEMFAS(
                    {m: torch.nn.Identity() for m in names},
                    dim=dim,
                    heads=4,
                    povm_rank=dim // 4,
                    feature_dims=32,
                ).eval()
                head[f"M{modalities}_d{dim}"] = _median_ms(
                    lambda model=model, features=features: model(features), 15
                )
    results["head_ms"] = head
    print("head only (batch 256, K=4, r=d/4), ms:")
    print("M \\ d " + " ".join(f"{d:>7d}" for d in (16, 32, 64, 128)))
    for modalities in (2, 3, 4, 6):
        print(
            f"{modalities:5d} " + " ".join(f"{head[f'M{modalities}_d{d}']:7.2f}" for d in (16, 32, 64, 128))
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
