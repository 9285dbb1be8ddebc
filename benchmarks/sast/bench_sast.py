"""SAST speed and memory targets (issue #27), measured on one CPU thread.

1. A SAST epoch costs <= 1.3x a GRIP epoch on the same data: both trainers on the same target, (a) on
   cached MiniCLIP embeddings with the residual adapter (the experiment's setting), (b) live through the
   MiniCLIP image tower with its norm affines trainable.
2. Ledger and prototype updates are vectorised (``index_add_``) and linear in samples: one
   ``FlipLedger.update`` + ``stability`` + SWIP prototype update at N = 1k / 10k / 100k features.
3. Ledger memory O(N * W) small ints.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sast/bench_sast.py
"""

from __future__ import annotations

import json
import time

import torch
from torch.nn import functional as F

from neurips26.methods.sast import (
    GRIP,
    CachedFeatures,
    FlipLedger,
    MiniCLIPBackbone,
    SASTConfig,
    SASTTrainer,
    core,
)
from neurips26.methods.sast.miniclip import MiniCLIP


def _best(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def epoch_ratio(live: bool, n: int = 1000, epochs: int = 6) -> dict[str, float]:
    torch.manual_seed(0)
    backbone = MiniCLIPBackbone(MiniCLIP())
    names = [str(d) for d in range(10)]
    templates = ['a photo of the number: "{}".']
    images = torch.rand(n, 3, 32, 32)
    if live:
        target, trainable = images, "norm"
    else:
        with torch.no_grad():
            target, trainable = CachedFeatures(backbone.encode_image(images)), "adapter"
    config = SASTConfig(epochs=epochs, trainable=trainable)
    out = {}
    for name, cls in (("grip", GRIP), ("sast", SASTTrainer)):
        trainer = cls(backbone, names, templates, config)
        out[name] = _best(lambda trainer=trainer: trainer.adapt(target, "UL"), 3) / epochs
    out["ratio"] = out["sast"] / out["grip"]
    return out


def ledger_scaling() -> dict[str, dict[str, float]]:
    rows = {}
    for n in (1_000, 10_000, 100_000):
        generator = torch.Generator().manual_seed(0)
        ledger = FlipLedger(n, 10, 4)
        f = F.normalize(torch.randn(n, 64, generator=generator), dim=1)
        preds = [torch.randint(0, 10, (n,), generator=generator) for _ in range(4)]
        for p in preds[:3]:
            ledger.update(p)
        confidence = torch.rand(n, generator=generator)

        def step(ledger=ledger, preds=preds, confidence=confidence, f=f) -> None:
            ledger.update(preds[3])
            s = ledger.stability()
            w = core.stability_weights(s, confidence, 2.0, 0.5)
            core.swip_prototypes(f, preds[3], w, 10)

        seconds = _best(step, 7)
        rows[str(n)] = {
            "seconds": seconds,
            "us_per_sample": 1e6 * seconds / n,
            "ledger_bytes": ledger.memory_bytes(),
        }
    return rows


def main() -> None:
    torch.set_num_threads(1)
    result = {
        "epoch_cached_adapter": epoch_ratio(live=False),
        "epoch_live_norm": epoch_ratio(live=True),
        "ledger_and_prototypes": ledger_scaling(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
