"""SOLAR on JAX programs: MAC counts vs hand formulas and vs XLA ``cost_analysis`` (which counts loop bodies
once), plus the validation verdict and cold-cache ``jax.jit`` timing against the cpu-local bound.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/solar/bench_solar_jax.py
"""

from __future__ import annotations

import json

import torch

from neurips26.methods.solar import analyze, check
from neurips26.methods.solar.hardware import calibrate_cpu_local
from neurips26.methods.solar.suite.jax_programs import programs
from neurips26.methods.solar.timing import CacheFlusher, measure_seconds


def main() -> None:
    import jax

    torch.set_num_threads(1)
    spec = calibrate_cpu_local(copy_bytes=128 * 2**20)
    flusher = CacheFlusher(2.0)
    for entry in programs():
        inputs = entry["inputs"]()
        report = analyze(entry["fn"], inputs, hw=spec)
        jitted = jax.jit(entry["fn"])
        cost = jitted.lower(*inputs).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        cold = measure_seconds(
            lambda f=jitted, a=inputs: jax.block_until_ready(f(*a)), reps=7, flusher=flusher
        )
        audit = check(report, cold)
        print(
            json.dumps(
                {
                    "program": entry["name"],
                    "hand_macs": entry["macs"],
                    "ours_macs": sum(report.macs.values()),
                    "xla_flops_over_2": cost.get("flops", 0.0) / 2,
                    "validated": report.validated,
                    "cold_ms": round(1e3 * cold, 4),
                    "fused_bound_over_measured": round(report.bounds.fused / cold, 4),
                    "violations": len(audit.violations),
                }
            )
        )


if __name__ == "__main__":
    main()
