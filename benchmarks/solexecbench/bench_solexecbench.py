"""SOL-ExecBench harness cost: wall time per evaluation, fork server versus a fresh interpreter each.

Run: ``OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/solexecbench/bench_solexecbench.py \
    --evaluations 6``.
Prints one row per isolation mode: interpreter starts, mean and median seconds per (solution, problem)
evaluation (one workload, the fast smoke timing settings), and the harness-measured kernel latency, so the
sandbox overhead and its effect on the measured time are visible side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, load_problem_set
from neurips26.methods.solexecbench.solutions import ladder_solution


def measure(isolation: str, evaluations: int) -> dict[str, float]:
    problem = load_problem_set(("rmsnorm",))["rmsnorm"]
    problem = dataclasses.replace(problem, workloads=problem.workloads[:1])
    config = SolExecBenchConfig(
        isolation=isolation,
        correctness_rounds=2,
        min_reps=5,
        max_reps=6,
        time_budget_s=0.02,
        flush_bytes=8 * 2**20,
    )
    walls, latencies = [], []
    with SolExecBench(config) as bench:
        _ = bench.hardware  # calibrated or loaded outside the timed loop
        for _ in range(evaluations):
            start = time.perf_counter()
            result = bench.evaluate(problem, ladder_solution("rmsnorm", "fused"))
            walls.append(time.perf_counter() - start)
            latencies.append(result.scores[0].latency_ms)
        starts = bench.sandbox.interpreters
    return {
        "interpreters": starts,
        "mean_s": statistics.fmean(walls),
        "median_s": statistics.median(walls),
        "kernel_ms": statistics.median(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--evaluations", type=int, default=6)
    args = parser.parse_args()
    print(f"{'isolation':<10}{'interpreters':>13}{'mean s/eval':>13}{'median s/eval':>15}{'kernel ms':>11}")
    for isolation in ("fork", "spawn"):
        row = measure(isolation, args.evaluations)
        print(
            f"{isolation:<10}{row['interpreters']:>13}{row['mean_s']:>13.3f}{row['median_s']:>15.3f}"
            f"{row['kernel_ms']:>11.4f}"
        )


if __name__ == "__main__":
    main()
