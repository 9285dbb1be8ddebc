"""SOLAR vs ``torch.compile`` (inductor, CPU): fused code must respect the fused and cache-aware bounds, and
may beat the unfused (op-by-op) bound — that is what separates the two fidelities.

Each program is compiled once (about a minute each on 2 shared cores), then timed with cold caches.
Usage::

    OMP_NUM_THREADS=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor PYTHONPATH=src \
        python benchmarks/solar/bench_solar_compile.py
"""

from __future__ import annotations

import argparse
import json

import torch

from neurips26.methods.solar import analyze, check
from neurips26.methods.solar.hardware import calibrate_cpu_local
from neurips26.methods.solar.suite import get_program
from neurips26.methods.solar.timing import CacheFlusher, measure_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=["rope", "rmsnorm", "softmax"])
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = calibrate_cpu_local(copy_bytes=128 * 2**20)
    flusher = CacheFlusher(2.0)
    for name in args.programs:
        model, inputs = get_program(name).build("cpu")
        report = analyze(model, inputs, hw=spec)
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)  # compile outside the timed region
        eager = measure_seconds(lambda m=model, x=inputs: m(*x), args.reps, flusher=flusher)
        fused = measure_seconds(lambda m=compiled, x=inputs: m(*x), args.reps, flusher=flusher)
        for impl, seconds in (("eager", eager), ("compile", fused)):
            audit = check(report, seconds)
            print(
                json.dumps(
                    {
                        "program": name,
                        "impl": impl,
                        "ms": round(1e3 * seconds, 4),
                        **{
                            f"{k}_over_measured": round(report.bound(k) / seconds, 3)
                            for k in ("fused", "cache_aware", "unfused")
                        },
                        "violations": len(audit.violations),
                        "below_unfused": audit.rows["unfused"]["below"],
                    }
                )
            )


if __name__ == "__main__":
    main()
