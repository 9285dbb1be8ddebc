"""SOLAR analysis speed: a GPT-2-small-shaped model built on meta (no weights allocated).

Times ``analyze`` (trace + rules + bounds; the validation gate is off because the weights do not exist) for
2/4/8/12/16 layers of d=768, 12 heads, T=1024, vocab 50257, through the default path and, in the same process
and interleaved (the machine is shared, so ratios are the figure, absolute seconds are inflated by load),
through the dispatch tracer and ``frontend="auto"`` (``torch.export`` first). Reports the best of
``--repeats`` per frontend (each call with a cold tiling-search cache), the ratios, seconds per op and
the load average before and after. Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/solar/bench_solar.py [--layers 2 4 8 12 16] \
        [--repeats 3]
        [--frontends default dispatch auto] [--model tiny-gpt|hf-gpt2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import torch

from neurips26.methods.solar import analyze
from neurips26.methods.solar.bounds import search_tiling
from neurips26.methods.solar.suite.models import TinyGPT


def gpt2_small(layers: int) -> TinyGPT:
    with torch.device("meta"):
        return TinyGPT(vocab=50257, d=768, heads=12, layers=layers, ctx=1024).eval()


def hf_gpt2_small(layers: int) -> torch.nn.Module:
    """Hugging Face ``GPT2LMHeadModel`` at the GPT-2-small config (SDPA attention), built on meta."""
    import transformers

    config = transformers.GPT2Config(n_layer=layers)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        return transformers.GPT2LMHeadModel(config).eval()


MODELS = {"tiny-gpt": gpt2_small, "hf-gpt2": hf_gpt2_small}


def time_analysis(
    layers: int, repeats: int, frontends: list[str], model_name: str = "tiny-gpt"
) -> dict[str, Any]:
    """Best-of-``repeats`` seconds per frontend, the frontends interleaved within each repeat."""
    ids = torch.zeros(1, 1024, dtype=torch.long, device="meta")
    model = MODELS[model_name](layers)
    best = dict.fromkeys(frontends, float("inf"))
    reports = {}
    for _ in range(repeats):
        for frontend in frontends:
            search_tiling.cache_clear()  # every call cold, as a user's first analyze in a process
            start = time.perf_counter()
            reports[frontend] = analyze(model, [ids], hw="H200", validate=False, frontend=frontend)
            best[frontend] = min(best[frontend], time.perf_counter() - start)
    first = reports[frontends[0]]
    assert all(r.complete for r in reports.values())
    assert all(r.macs == first.macs and r.bounds.fused == first.bounds.fused for r in reports.values())
    row: dict[str, Any] = {
        "model": model_name,
        "layers": layers,
        "ops": len(first.ops),
        "gflops": first.flops / 1e9,
    }
    for frontend in frontends:
        row[f"{frontend}_s"] = best[frontend]
        row[f"{frontend}_ir"] = reports[frontend].frontend
    for frontend in frontends[1:]:
        row[f"{frontend}_over_{frontends[0]}"] = best[frontend] / best[frontends[0]]
    row["us_per_op"] = 1e6 * best[frontends[0]] / len(first.ops)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 12, 16])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--frontends", nargs="+", default=["default", "dispatch", "auto"], help="the first is the reference"
    )
    parser.add_argument(
        "--model",
        default="tiny-gpt",
        choices=sorted(MODELS),
        help="the suite's TinyGPT or HF GPT2LMHeadModel",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    rows = [time_analysis(n, args.repeats, args.frontends, args.model) for n in args.layers]
    for row in rows:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    print(
        json.dumps(
            {"load_1min_before": load_before, "load_1min_after": os.getloadavg()[0], "cpus": os.cpu_count()}
        )
    )


if __name__ == "__main__":
    main()
