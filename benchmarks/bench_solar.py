"""SOLAR analysis speed: a GPT-2-small-shaped model built on meta (no weights allocated).

Times ``analyze`` (trace + rules + bounds; the validation gate is off because the weights do not exist) for
2/4/8/12/16 layers of d=768, 12 heads, T=1024, vocab 50257, and reports seconds per layer and per graph
node, for the ``torch.export`` frontend (the default) or the dispatch tracer. Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_solar.py [--layers 2 4 8 12 16] [--repeats 3]
        [--frontend auto|export|dispatch]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from neurips26.methods.solar import analyze
from neurips26.methods.solar.suite.models import TinyGPT


def gpt2_small(layers: int) -> TinyGPT:
    with torch.device("meta"):
        return TinyGPT(vocab=50257, d=768, heads=12, layers=layers, ctx=1024).eval()


def time_analysis(layers: int, repeats: int, frontend: str = "auto") -> dict[str, Any]:
    ids = torch.zeros(1, 1024, dtype=torch.long, device="meta")
    model = gpt2_small(layers)
    best = float("inf")
    report = None
    for _ in range(repeats):
        start = time.perf_counter()
        report = analyze(model, [ids], hw="H200", validate=False, frontend=frontend)
        best = min(best, time.perf_counter() - start)
    assert report is not None and report.complete
    nodes = len(report.ops)
    return {
        "layers": layers,
        "frontend": report.frontend,
        "seconds": best,
        "ops": nodes,
        "us_per_op": 1e6 * best / nodes,
        "gflops": report.flops / 1e9,
        "fused_bound_ms": 1e3 * report.bounds.fused,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 12, 16])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frontend", default="auto", choices=["auto", "export", "dispatch"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [time_analysis(n, args.repeats, args.frontend) for n in args.layers]
    for row in rows:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    if len(rows) >= 2:
        slope = (rows[-1]["seconds"] - rows[0]["seconds"]) / (rows[-1]["layers"] - rows[0]["layers"])
        print(
            f"marginal cost per layer: {slope:.4f} s; per op: "
            f"{[round(r['us_per_op'], 1) for r in rows]} us (flat = linear in graph nodes)"
        )


if __name__ == "__main__":
    main()
