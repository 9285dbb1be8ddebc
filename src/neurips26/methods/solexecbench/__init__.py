"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits.

A kernel benchmark harness that loads the official formats (``definition.json``, ``workload.jsonl``,
``solution.json``), evaluates untrusted solutions in a sandbox with reward-hack defences, and scores them
against the speed of light ``T_SOL`` from ``solar``::

    from neurips26.methods.solexecbench import SolExecBench, load_problem, load_solution
    with SolExecBench() as bench:
        result = bench.evaluate(load_problem("problem_dir"), load_solution("solution.json"))
"""

from __future__ import annotations

from neurips26.methods.solexecbench.config import SolExecBenchConfig
from neurips26.methods.solexecbench.core import (
    WorkloadScore,
    below_speed_of_light,
    clamp_score,
    score_workload,
    sol_score,
    sol_time_ms,
    summarise_dataset,
    summarise_problem,
)
from neurips26.methods.solexecbench.harness import EvaluationResult, Problem, SolExecBench, load_problem
from neurips26.methods.solexecbench.problem_set import load_problem_set, write_problem_set
from neurips26.methods.solexecbench.sandbox import Sandbox
from neurips26.methods.solexecbench.schema import (
    Definition,
    EvaluationStatus,
    FormatError,
    Solution,
    Trace,
    Workload,
    evaluate_axis_expression,
    load_definition,
    load_solution,
    load_workloads,
    read_traces,
    write_traces,
)
from neurips26.methods.solexecbench.static_check import Finding, static_check

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "score against the speed of light from solar": (
        "tests/methods/solexecbench/test_solexecbench.py::test_idea_honest_ladder_passes_with_bounded_monotone_scores"
    ),
    "dynamic defences against reward hacks": (
        "tests/methods/solexecbench/test_solexecbench.py::test_idea_dynamic_defence_catches_red_team"
    ),
    "the SOL floor re-verifies a time below the bound": (
        "tests/methods/solexecbench/test_solexecbench_hardening.py::test_idea_sol_floor_flags_only_beyond_the_measured_noise"
    ),
}

# tests/test_conformance.py: no ecosystem API family fits this method's public API.
CONFORMANCE: tuple[tuple[str, str], ...] = ()
CONFORMANCE_REASON: str = (
    "SOLExecBench is a benchmark harness (problems, sandboxed evaluation, SOL scores) whose API belongs"
    " to no ecosystem family."
)

__all__ = [
    "CONFORMANCE",
    "CONFORMANCE_REASON",
    "IDEAS",
    "Definition",
    "EvaluationResult",
    "EvaluationStatus",
    "Finding",
    "FormatError",
    "Problem",
    "Sandbox",
    "SolExecBench",
    "SolExecBenchConfig",
    "Solution",
    "Trace",
    "Workload",
    "WorkloadScore",
    "below_speed_of_light",
    "clamp_score",
    "evaluate_axis_expression",
    "load_definition",
    "load_problem",
    "load_problem_set",
    "load_solution",
    "load_workloads",
    "read_traces",
    "score_workload",
    "sol_score",
    "sol_time_ms",
    "static_check",
    "summarise_dataset",
    "summarise_problem",
    "write_problem_set",
    "write_traces",
]
