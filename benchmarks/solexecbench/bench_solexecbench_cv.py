"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — timing CV.

Run-to-run coefficient of variation of the per-problem SOL score (the issue's target: < 5%) under timing
settings: the current default; more warm-up and repetitions; pinned to one CPU; and the paired-ratio
estimator (the median of adjacent T_k / T_b ratios times the reference's median). Each setting evaluates
the eager and fused rungs of a few problems ``--repeats`` times, interleaving settings so that they share
the machine's load. Prints one line per setting; ``--json`` writes them.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/solexecbench/bench_solexecbench_cv.py --repeats 4
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time

from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, load_problem_set
from neurips26.methods.solexecbench.sandbox import Sandbox
from neurips26.methods.solexecbench.solutions import ladder_solution

SETTINGS = {
    "default": {},
    "more_reps": {"warmup": 5, "min_reps": 15, "max_reps": 60, "time_budget_s": 0.6},
    "more_reps_pinned": {"warmup": 5, "min_reps": 15, "max_reps": 60, "time_budget_s": 0.6, "pin_cpu": 0},
    "paired_ratio": {"timing_estimator": "paired_ratio"},
    "paired_ratio_more_reps": {
        "timing_estimator": "paired_ratio",
        "warmup": 5,
        "min_reps": 15,
        "max_reps": 60,
        "time_budget_s": 0.6,
    },
    "paired_ratio_many_reps": {
        "timing_estimator": "paired_ratio",
        "warmup": 5,
        "min_reps": 40,
        "max_reps": 150,
        "time_budget_s": 1.5,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="rmsnorm,softmax,layernorm,gelu")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    names = tuple(args.problems.split(","))
    problems = {
        n: dataclasses.replace(p, workloads=p.workloads[:1]) for n, p in load_problem_set(names).items()
    }
    chosen = args.settings.split(",")
    scores: dict[str, dict[tuple[str, str], list[float]]] = {s: {} for s in chosen}
    seconds = dict.fromkeys(chosen, 0.0)
    start_load = os.getloadavg()[0]
    with Sandbox(threads=1) as box:
        benches = {s: SolExecBench(SolExecBenchConfig(**SETTINGS[s]), sandbox=box) for s in chosen}
        for _ in range(args.repeats):
            for name, problem in problems.items():
                for rung in ("eager", "fused"):
                    for setting in chosen:  # interleaved: every setting sees the same load
                        start = time.perf_counter()
                        result = benches[setting].evaluate(problem, ladder_solution(name, rung))
                        seconds[setting] += time.perf_counter() - start
                        scores[setting].setdefault((name, rung), []).append(result.summary["mean_sol_score"])
    rows = []
    for setting in chosen:
        cvs = [
            statistics.stdev(v) / statistics.fmean(v) for v in scores[setting].values() if statistics.fmean(v)
        ]
        rows.append(
            {
                "setting": setting,
                "mean_cv": statistics.fmean(cvs),
                "median_cv": statistics.median(cvs),
                "max_cv": max(cvs),
                "s_per_eval": seconds[setting] / (args.repeats * len(problems) * 2),
            }
        )
        print(
            f"{setting:24s} mean CV {rows[-1]['mean_cv']:.3f}  median {rows[-1]['median_cv']:.3f}"
            f"  max {rows[-1]['max_cv']:.3f}  {rows[-1]['s_per_eval']:.2f} s/eval"
        )
    load = (start_load, os.getloadavg()[0])
    print(f"load average at start / end: {load[0]:.1f} / {load[1]:.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {"rows": rows, "load": load, "repeats": args.repeats, "problems": names}, handle, indent=1
            )


if __name__ == "__main__":
    main()
