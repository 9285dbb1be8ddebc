"""SOLAR's two PyTorch frontends on the whole authored suite: ``torch.export`` vs the dispatch tracer.

For each of the 36 programs (built on meta): which frontend ``auto`` used, whether MACs, compulsory bytes and
the lower bounds (flop_only, fused, cache_aware) and the unfused model agree, whether the export IR passes
the validation gate, and the analysis time of each frontend (gate off in the timed calls). Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/solar/bench_solar_frontends.py
"""

from __future__ import annotations

import json
import math
import time

import torch

from neurips26.methods.solar import analyze
from neurips26.methods.solar.suite import PROGRAMS


def compare(name: str, model: torch.nn.Module, inputs: list) -> dict:
    exported = analyze(model, inputs, hw="H200", frontend="auto")  # with the validation gate
    start = time.perf_counter()
    analyze(model, inputs, hw="H200", frontend="auto", validate=False)
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    dispatched = analyze(model, inputs, hw="H200", frontend="dispatch", validate=False)
    dispatch_s = time.perf_counter() - start
    same = {
        k: math.isclose(exported.bound(k), dispatched.bound(k), rel_tol=1e-12)
        for k in ("flop_only", "fused", "cache_aware", "unfused")
    }
    return {
        "program": name,
        "frontend": exported.frontend,
        "macs_equal": exported.macs == dispatched.macs,
        "compulsory_bytes_equal": exported.bounds.compulsory_bytes == dispatched.bounds.compulsory_bytes,
        "lower_bounds_equal": all(same[k] for k in ("flop_only", "fused", "cache_aware")),
        "unfused_equal": same["unfused"],
        "unfused_export_over_dispatch": exported.bounds.unfused / dispatched.bounds.unfused,
        "validated": exported.validated,
        "auto_s": round(export_s, 3),
        "dispatch_s": round(dispatch_s, 3),
    }


def main() -> None:
    torch.set_num_threads(1)
    rows = []
    for program in PROGRAMS:
        model, inputs = program.build("meta")
        rows.append(compare(program.name, model, inputs))
        print(json.dumps(rows[-1]))
    summary = {
        "programs": len(rows),
        "exported": sum(r["frontend"] == "torch-export" for r in rows),
        "macs_equal": sum(r["macs_equal"] for r in rows),
        "lower_bounds_equal": sum(r["lower_bounds_equal"] for r in rows),
        "unfused_equal": sum(r["unfused_equal"] for r in rows),
        "validated": sum(r["validated"] for r in rows),
        "auto_s_total": round(sum(r["auto_s"] for r in rows), 2),
        "dispatch_s_total": round(sum(r["dispatch_s"] for r in rows), 2),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
