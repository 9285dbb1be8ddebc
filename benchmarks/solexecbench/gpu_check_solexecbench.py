"""SOL-ExecBench's CUDA backend on a GPU: the ladder, a Triton and a CUDA C++ rung, SOL scores, red team.

Prepared for a device session; **not run yet** (no GPU was lent when it was written). It exits with a
message when CUDA is absent. On one GPU (sized for < 5 min on an H200) it evaluates, with the CUDA timing
backend (CUPTI when ``cupti-python`` imports, else CUDA events; 2x L2 flush before every timed call):

- the honest ladder (naive, eager, fused) of rmsnorm, softmax and gemm_bias_relu at GPU-sized axes;
- the ``triton`` and ``cuda_cpp`` rungs of rmsnorm and softmax (nvcc builds in the compile step);
- 8 red-team families on rmsnorm (each must not pass);
- fused rmsnorm once more with ``timer="cuda_events"`` to compare the two timers when CUPTI is present.

It prints one line per evaluation and writes everything to ``$OUT/gpu_check_solexecbench.json`` when
``$OUT`` is set. Expectations: every honest rung PASSED with SOL score in (0, 1] and naive < eager <= fused
in score; every red-team family not PASSED; the trace's ``timing.backend`` is ``cupti`` or
``cuda_events`` and ``flush_bytes`` twice the L2. Usage::

    PYTHONPATH=src python benchmarks/solexecbench/gpu_check_solexecbench.py [--hw H200] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import torch

from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, load_problem_set
from neurips26.methods.solexecbench.gpu_solutions import cuda_solution, triton_solution
from neurips26.methods.solexecbench.solutions import ladder_solution, red_team_solution

# GPU-sized axes (the shipped workloads are sized for a 2-core CPU)
AXES = {
    "rmsnorm": {"tokens": 4096},
    "softmax": {"rows": 4096, "cols": 2048},
    "gemm_bias_relu": {"m": 4096},
}
GPU_RUNG_PROBLEMS = ("rmsnorm", "softmax")
RED_TEAM = (
    "honest_then_stale",
    "timer_patch",
    "input_mutation",
    "lazy_subclass",
    "pointer_cache",
    "shape_hardcode",
    "precision_downgrade",
    "thread_injection",
)


def _problem(name: str):
    problem = load_problem_set((name,))[name]
    first = problem.workloads[0]
    workload = first.model_copy(update={"axes": {**first.axes, **AXES[name]}, "uuid": f"{name}-gpu"})
    return dataclasses.replace(problem, workloads=[workload])


def _row(kind: str, problem: str, result) -> dict:
    evaluation = result.traces[0].evaluation
    timing = evaluation.timing or {}
    row = {
        "kind": kind,
        "problem": problem,
        "solution": result.solution,
        "status": result.statuses[0],
        "latency_ms": evaluation.performance.latency_ms if evaluation.performance else None,
        "sol_score": result.scores[0].sol_score,
        "t_sol_ms": (evaluation.sol or {}).get("t_sol_ms"),
        "backend": timing.get("backend"),
        "flush_bytes": timing.get("flush_bytes"),
        "iqr_ms": timing.get("iqr_ms"),
        "reps": timing.get("reps"),
        "wall_s": round(result.wall_seconds, 2),
        "log": evaluation.log[-400:] if result.statuses[0] != "PASSED" else "",
    }
    print(
        f"{kind:9s} {problem:15s} {result.solution:32s} {row['status']:20s}"
        f" lat={row['latency_ms'] or 0:.4f} ms S={row['sol_score'] or 0:.3f} [{row['backend']}]",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hw", default="cpu-local", help="solar spec; cpu-local = match the GPU's name")
    parser.add_argument("--quick", action="store_true", help="fewer reps (a smoke run)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check_solexecbench: CUDA is not available; nothing to check on this host")
        return
    reps = dict(min_reps=5, max_reps=10) if args.quick else dict(min_reps=15, max_reps=50)
    config = SolExecBenchConfig(device="cuda", correctness_rounds=3, time_budget_s=0.3, timeout_s=300, **reps)
    rows: list[dict] = []
    start = time.perf_counter()
    with SolExecBench(config, hardware=args.hw) as bench:
        print(f"device {torch.cuda.get_device_name(0)}, timer {bench.timer}, spec {bench.hardware.name}")
        for name in AXES:
            problem = _problem(name)
            for rung in ("naive", "eager", "fused"):
                rows.append(_row("ladder", name, bench.evaluate(problem, ladder_solution(name, rung))))
        for name in GPU_RUNG_PROBLEMS:
            for make in (triton_solution, cuda_solution):
                rows.append(_row("gpu-rung", name, bench.evaluate(_problem(name), make(name))))
        rmsnorm = _problem("rmsnorm")
        for family in RED_TEAM:
            cheat = red_team_solution("rmsnorm", family)
            rows.append(_row("red-team", "rmsnorm", bench.evaluate(rmsnorm, cheat)))
        timer = bench.timer
    if timer == "cupti":  # the same kernel under CUDA events, for the timers' agreement
        events_config = dataclasses.replace(config, timer="cuda_events")
        with SolExecBench(events_config, hardware=args.hw) as events:
            fused = ladder_solution("rmsnorm", "fused")
            rows.append(_row("events", "rmsnorm", events.evaluate(rmsnorm, fused)))
    honest = [r for r in rows if r["kind"] in ("ladder", "gpu-rung")]
    cheats = [r for r in rows if r["kind"] == "red-team"]
    scores = {(r["problem"], r["solution"].rsplit("-", 1)[-1]): r["sol_score"] or 0.0 for r in honest}
    summary = {
        "device": torch.cuda.get_device_name(0),
        "timer": timer,
        "honest_passed": sum(r["status"] == "PASSED" for r in honest),
        "honest_total": len(honest),
        "red_team_caught": sum(r["status"] != "PASSED" for r in cheats),
        "red_team_total": len(cheats),
        "ladder_monotone": sum(
            scores[(p, "naive")] < scores[(p, "eager")] <= scores[(p, "fused")] + 1e-9 for p in AXES
        ),
        "scores_in_unit_interval": all(
            0 < (r["sol_score"] or 0) <= 1 for r in honest if r["status"] == "PASSED"
        ),
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "gpu_check_solexecbench.json"), "w") as handle:
            json.dump({"summary": summary, "rows": rows}, handle, indent=1)
    sys.exit(0 if summary["honest_passed"] == summary["honest_total"] else 1)


if __name__ == "__main__":
    main()
