"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — the CLI.

``neurips26 solexecbench eval PROBLEM_DIR --solution solution.json`` evaluates one solution;
``neurips26 solexecbench eval-dataset DIR`` evaluates every ``DIR/<problem>/solutions/*.json`` against
``DIR/<problem>``; ``neurips26 solexecbench write-problems DIR`` writes the authored problem set. Both
evaluations write official-format JSONL traces and a summary JSON (per-workload speedup, raw and clamped SOL
score, fast_p, per-problem mean and geomean). A bad file prints one line naming the field; the run goes on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neurips26.methods.solexecbench.backends import TIMERS
from neurips26.methods.solexecbench.config import MODES, SolExecBenchConfig
from neurips26.methods.solexecbench.core import summarise_dataset
from neurips26.methods.solexecbench.harness import EvaluationResult, SolExecBench, load_problem
from neurips26.methods.solexecbench.problem_set import write_problem_set
from neurips26.methods.solexecbench.schema import FormatError, load_solution, write_traces


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``eval``, ``eval-dataset`` and ``write-problems`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="solexecbench_command", required=True)
    one = sub.add_parser("eval", help="evaluate one solution on one problem directory")
    one.add_argument("problem_dir", help="directory with definition.json and workload.jsonl")
    one.add_argument("--solution", required=True, action="append", help="solution.json (repeatable)")
    dataset = sub.add_parser("eval-dataset", help="evaluate DIR/<problem>/solutions/*.json for every problem")
    dataset.add_argument("dataset_dir")
    for command in (one, dataset):
        command.add_argument("--out", default=None, help="folder for traces.jsonl and summary.json")
        command.add_argument("--hw", default="cpu-local", help="hardware spec for T_SOL (solar name or YAML)")
        command.add_argument("--mode", default="solexecbench", choices=MODES, help="harness (baselines too)")
        command.add_argument("--threads", type=int, default=1)
        command.add_argument("--timeout", type=float, default=60.0, help="wall seconds per evaluation")
        command.add_argument("--seed", type=int, default=-1, help="-1: fresh random input seeds")
        command.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
        command.add_argument("--timer", default="auto", choices=TIMERS, help="auto: CUPTI > events on CUDA")
    write = sub.add_parser("write-problems", help="write the authored problem set in the official format")
    write.add_argument("out_dir")


def _config(args: argparse.Namespace) -> SolExecBenchConfig:
    return SolExecBenchConfig(
        mode=args.mode,
        threads=args.threads,
        timeout_s=args.timeout,
        seed=args.seed,
        hardware=args.hw,
        device=args.device,
        timer=args.timer,
    )


def _row(result: EvaluationResult) -> dict[str, Any]:
    return {
        "problem": result.problem,
        "solution": result.solution,
        "summary": result.summary,
        "workloads": [s.to_dict() for s in result.scores],
        "wall_seconds": result.wall_seconds,
    }


def _write(out: str | None, results: list[EvaluationResult], summary: dict[str, Any]) -> None:
    if out is None:
        return
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_traces([t for r in results for t in r.traces], folder / "traces.jsonl")
    tmp = folder / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    tmp.replace(folder / "summary.json")


def _print(result: EvaluationResult) -> None:
    s = result.summary
    print(
        f"{result.problem} / {result.solution}: {s['passed']}/{s['workloads']} passed, "
        f"mean SOL score {s['mean_sol_score']:.3f} (raw {s['mean_sol_score_raw']:.3f}), "
        f"geomean speedup {s['geomean_speedup'] or float('nan'):.3f}, statuses {s['statuses']}"
    )


def main(args: argparse.Namespace) -> int:
    """Run a subcommand; returns 0 when everything loaded, 1 when some file failed to load."""
    if args.solexecbench_command == "write-problems":
        for path in write_problem_set(args.out_dir):
            print(path)
        return 0
    failures = 0
    results: list[EvaluationResult] = []
    pairs: list[tuple[Path, Path]] = []
    if args.solexecbench_command == "eval":
        pairs = [(Path(args.problem_dir), Path(s)) for s in args.solution]
    else:
        root = Path(args.dataset_dir)
        if not root.is_dir():
            print(f"error: dataset_dir {str(root)!r} is not a directory", file=sys.stderr)
            return 1
        for problem_dir in sorted(p for p in root.iterdir() if (p / "definition.json").exists()):
            pairs += [(problem_dir, s) for s in sorted((problem_dir / "solutions").glob("*.json"))]
    problems: dict[Path, Any] = {}
    try:
        bench = SolExecBench(_config(args))
    except ValueError as error:  # e.g. --device cuda on a host without CUDA
        print(f"error: {error}", file=sys.stderr)
        return 1
    with bench:
        for problem_dir, solution_path in pairs:
            try:
                if problem_dir not in problems:
                    problems[problem_dir] = load_problem(problem_dir)
                result = bench.evaluate(problems[problem_dir], load_solution(solution_path))
            except FormatError as error:
                print(f"error: {error}", file=sys.stderr)
                failures += 1
                continue
            _print(result)
            results.append(result)
    per_problem: dict[str, dict[str, Any]] = {}
    for result in results:  # the best solution of each problem stands for it
        best = per_problem.get(result.problem)
        if best is None or result.summary["mean_sol_score"] > best["mean_sol_score"]:
            per_problem[result.problem] = result.summary
    summary = {"evaluations": [_row(r) for r in results], "dataset": summarise_dataset(per_problem)}
    _write(args.out, results, summary)
    print(json.dumps(summary["dataset"]))
    return 1 if failures else 0
