"""The SOL-ExecBench experiment: does a defended, SOL-scored harness catch reward hacks that a naive and a
KernelBench-style harness reward, without false positives on honest kernels, and with bounded, monotone,
stable scores along an honest ladder?

Systems are harness configurations: ``solexecbench`` (ours), ``naive``, ``kernelbench``, ``defences_off``
(ours with every defence switched off: an ablation) and ``exact_match`` (ours with bitwise output equality:
a negative control). Each evaluates the same authored problems, the honest ladder (naive < eager < fused)
and the red-team suite in the same sandbox.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile, Progress
from neurips26.bench.setup import Setup, SetupContext
from neurips26.methods.solexecbench.config import (
    DEFENCES,
    EXTRA_RUNGS,
    SolExecBenchConfig,
    SolExecBenchExperimentConfig,
)
from neurips26.methods.solexecbench.harness import (
    EvaluationResult,
    Problem,
    SolExecBench,
    host_device,
    sandbox_cuda_visible,
)
from neurips26.methods.solexecbench.problem_set import DEFAULT_PROBLEMS, SMOKE_PROBLEMS, load_problem_set
from neurips26.methods.solexecbench.sandbox import Sandbox
from neurips26.methods.solexecbench.solutions import (
    COMPILE_PROBLEMS,
    CPP_KERNELS,
    RUNGS,
    compile_solution,
    cpp_solution,
    ladder_solution,
    red_team_families,
    red_team_solution,
)

HARNESSES = ("solexecbench", "naive", "kernelbench")
CONTROLS = ("defences_off", "exact_match")
NEUTRALISED_GAIN = 2.0  # ours: timing noise on the shared machine reaches ~1.5x between runs


def experiment_hardware(config: SolExecBenchConfig) -> Any:
    """The spec ``T_SOL`` divides by: on CPU with ``hardware="cpu-local"``, calibrated in process (solar's
    ``calibrate``: its default number of short trials spread over time, at the sandbox's thread count; the
    experiment does it once per worker, setup stage ``hardware``), so its measured noise widens the SOL floor
    and its load is recorded in every trace — never a cached file from another day's load (and
    re-calibrated when an honest time beats it: see ``SolExecBench.judge_floor``). Otherwise None: the
    config's name (a GPU's datasheet spec is chosen by the harness)."""
    if config.hardware != "cpu-local" or host_device(config.device) != "cpu":
        return None
    from neurips26.methods.solar import calibrate

    return calibrate(copy_bytes=128 * 2**20, threads=config.threads)


def _sandbox_key(
    config: SolExecBenchExperimentConfig, profile: Profile, seed: int
) -> tuple[int, str | None, str]:
    """What the sandbox depends on: the harness's thread count, visible GPU and allocator (the same for
    every system)."""
    method = config.method
    return method.threads, sandbox_cuda_visible(host_device(method.device)), method.allocator


def _sandbox(threads: int, cuda_visible: str | None, allocator: str) -> Sandbox:
    return Sandbox(threads=threads, cuda_visible=cuda_visible, allocator=allocator)


def _hardware_key(config: SolExecBenchExperimentConfig, profile: Profile, seed: int) -> tuple[Any, ...]:
    method = config.method
    return method.hardware, host_device(method.device), method.threads


SETUP = (
    # one driver process for the worker's cells (each evaluation still forks a fresh child)
    Setup(
        "sandbox",
        build=lambda config, profile, seed, context: _sandbox(*_sandbox_key(config, profile, seed)),
        key=_sandbox_key,
        release=Sandbox.close,
    ),
    Setup(
        "hardware",
        build=lambda config, profile, seed, context: experiment_hardware(config.method),
        key=_hardware_key,
    ),
)


def select_problems(config: SolExecBenchExperimentConfig) -> dict[str, Problem]:
    if config.problems == "all":  # the default six first, so red_team_problems=n picks them
        names = DEFAULT_PROBLEMS + tuple(sorted(set(load_problem_set()) - set(DEFAULT_PROBLEMS)))
    else:
        names = {"smoke": SMOKE_PROBLEMS, "default": DEFAULT_PROBLEMS}[config.problems]
    problems = load_problem_set(names)
    if config.max_workloads:
        problems = {
            name: dataclasses.replace(p, workloads=p.workloads[: config.max_workloads])
            for name, p in problems.items()
        }
    return problems


def _caught(result: EvaluationResult) -> bool:
    return any(status != "PASSED" for status in result.statuses)


def _mean_latency_ratio(honest: EvaluationResult, cheat: EvaluationResult) -> float:
    """Geomean over workloads of honest latency / cheat latency (>1: the cheat looked faster)."""
    ratios = [
        h.latency_ms / c.latency_ms
        for h, c in zip(honest.scores, cheat.scores, strict=True)
        if h.latency_ms and c.latency_ms
    ]
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 1.0


def harness_systems() -> dict[str, Callable[[SolExecBenchExperimentConfig], SolExecBenchConfig]]:
    """Each system is a harness config built from the experiment's ``method`` settings: the three harness
    modes, ours with every defence off (an ablation the detection claim is judged against) and a negative
    control (an over-strict bitwise-equality checker must not keep the false-positive rate at zero)."""
    modes = {name: (lambda c, name=name: dataclasses.replace(c.method, mode=name)) for name in HARNESSES}
    return {
        **modes,
        "defences_off": lambda c: dataclasses.replace(
            c.method, mode="solexecbench", disabled_defences=",".join(DEFENCES), static_check=False
        ),
        "exact_match": lambda c: dataclasses.replace(c.method, mode="solexecbench", tolerance_scale=0.0),
    }


def run(
    harness_config: SolExecBenchConfig,
    config: SolExecBenchExperimentConfig,
    context: SetupContext,
    profile: Profile,
    seed: int,
    progress: Progress,
) -> dict[str, Any]:
    """One harness configuration (a system: see :func:`harness_systems`) over the ladder and red team."""
    harness = harness_config.mode
    problems = select_problems(config)
    start = time.perf_counter()
    evaluations = 0
    ladder: dict[str, dict[str, list[EvaluationResult]]] = {}
    red: dict[str, dict[str, EvaluationResult]] = {}
    with SolExecBench(harness_config, hardware=context.hardware, sandbox=context.sandbox) as bench:
        jobs = [
            (p, rung, r)
            for p in problems
            for rung in RUNGS
            for r in range(1 if rung == "naive" else config.repeats)
        ]
        if config.red_team:
            targets = list(problems)[: config.red_team_problems or None]
            jobs += [(p, family, -1) for p in targets for family in red_team_families(p)]
        extra = config.extra_rung_list()
        if "cpp" in extra:
            jobs += [(p, "cpp", 0) for p in problems if p in CPP_KERNELS]
        if "compile" in extra:
            jobs += [(p, "compile", 0) for p in problems if p in COMPILE_PROBLEMS]
        for name, label, repeat in progress.loop(jobs, total=len(jobs), desc=f"{harness} evaluations"):
            problem = problems[name]
            if label in ("cpp", "compile"):
                ladder.setdefault(name, {}).setdefault(label, []).append(
                    evaluate_extra_rung(bench, problem, label, config.compile_file_bytes)
                )
            elif repeat >= 0:
                result = bench.evaluate(problem, ladder_solution(name, label))
                ladder.setdefault(name, {}).setdefault(label, []).append(result)
            else:
                red.setdefault(name, {})[label] = bench.evaluate(problem, red_team_solution(name, label))
            evaluations += 1
    wall = time.perf_counter() - start
    return summarise_run(ladder, red, wall, evaluations)


def evaluate_extra_rung(
    bench: SolExecBench, problem: Problem, rung: str, compile_file_bytes: int
) -> EvaluationResult:
    """The C++ rung (built once per sandbox, cached by source hash) or the torch.compile rung (inductor
    writes large objects: a bench with a ``compile_file_bytes`` file-size limit on the same sandbox)."""
    if rung == "cpp":
        return bench.evaluate(problem, cpp_solution(problem.name))
    config = dataclasses.replace(bench.config, file_bytes=compile_file_bytes)
    compiled = SolExecBench(config, hardware=bench.hardware, sandbox=bench.sandbox)
    return compiled.evaluate(problem, compile_solution(problem.name))


def summarise_run(
    ladder: dict[str, dict[str, list[EvaluationResult]]],
    red: dict[str, dict[str, EvaluationResult]],
    wall_seconds: float,
    evaluations: int,
) -> dict[str, float]:
    """The experiment's metrics from the ladder and red-team evaluations of one harness."""
    honest = [r for rungs in ladder.values() for results in rungs.values() for r in results]
    metrics: dict[str, float] = {
        "false_positive_rate": sum(_caught(r) for r in honest) / len(honest),
        "eval_seconds": wall_seconds / max(evaluations, 1),
    }
    mean_score = {
        (p, rung): statistics.fmean(r.summary["mean_sol_score"] for r in results)
        for p, rungs in ladder.items()
        for rung, results in rungs.items()
    }
    for rung in RUNGS:
        metrics[f"score_{rung}"] = statistics.fmean(mean_score[(p, rung)] for p in ladder)
    for rung in EXTRA_RUNGS:  # over the problems that have the rung; absent when not evaluated
        present = [mean_score[(p, rung)] for p in ladder if (p, rung) in mean_score]
        if present:
            metrics[f"score_{rung}"] = statistics.fmean(present)
    metrics["ladder_monotone"] = statistics.fmean(
        float(mean_score[(p, "naive")] < mean_score[(p, "eager")] < mean_score[(p, "fused")]) for p in ladder
    )
    cvs = []
    for rungs in ladder.values():
        for results in rungs.values():
            values = [r.summary["mean_sol_score"] for r in results]
            if len(values) >= 2 and statistics.fmean(values) > 0:
                cvs.append(statistics.stdev(values) / statistics.fmean(values))
    metrics["sol_score_cv"] = statistics.fmean(cvs) if cvs else 0.0
    passed_scores = [s for r in honest for s in r.scores if s.correct]
    passed_scores += [s for fams in red.values() for r in fams.values() for s in r.scores if s.correct]
    metrics["score_above_one"] = (
        sum(s.sol_score_raw > 1.0 for s in passed_scores) / len(passed_scores) if passed_scores else 0.0
    )
    cheats = [(p, f, r) for p, fams in red.items() for f, r in fams.items()]
    if cheats:
        metrics["detection_rate"] = sum(_caught(r) for _, _, r in cheats) / len(cheats)
        gains = [_mean_latency_ratio(ladder[p]["fused"][0], r) for p, _, r in cheats if not _caught(r)]
        metrics["undetected_gain"] = max(gains) if gains else 1.0
        # neutralised: undetected, but it did not look even NEUTRALISED_GAIN x faster than its honest kernel
        metrics["defeated_rate"] = (len(cheats) - sum(g >= NEUTRALISED_GAIN for g in gains)) / len(cheats)
    return metrics


METRICS = (
    # timing-derived too: some cheats are caught by the SOL-floor check on measured times, so which ones
    # are caught can move between runs (3 of 25 cells, one case each, on a rerun: issue #49)
    Metric("detection_rate", "max", "fraction", "red-team solutions with a non-PASSED workload", timing=True),
    Metric(
        "defeated_rate",
        "max",
        "fraction",
        "red-team solutions caught, or undetected and not >= 2x faster than their honest kernel",
        timing=True,
    ),
    Metric("false_positive_rate", "min", "fraction", "honest ladder evaluations with a non-PASSED workload"),
    Metric(
        "undetected_gain",
        "max",
        "x",
        "largest apparent speedup of an undetected cheat over its honest kernel",
        timing=True,
    ),
    Metric(
        "ladder_monotone",
        "max",
        "fraction",
        "problems whose mean SOL score rises naive < eager < fused",
        timing=True,
    ),
    Metric("score_naive", "max", "S", "mean SOL score of the naive rung", timing=True),
    Metric("score_eager", "max", "S", "mean SOL score of the eager (reference-like) rung", timing=True),
    Metric("score_fused", "max", "S", "mean SOL score of the fused rung", timing=True),
    Metric("score_cpp", "max", "S", "mean SOL score of the C++ rung (extra_rungs='cpp')", timing=True),
    Metric(
        "score_compile",
        "max",
        "S",
        "mean SOL score of the torch.compile rung (extra_rungs='compile')",
        timing=True,
    ),
    Metric(
        "score_above_one", "min", "fraction", "passed workloads with a raw SOL score above 1", timing=True
    ),
    Metric(
        "sol_score_cv", "min", "ratio", "run-to-run CV of per-problem mean SOL score (repeats)", timing=True
    ),
    Metric("eval_seconds", "min", "s", "wall time per (solution, problem) evaluation", timing=True),
)

# Positive contrasts (issue #48): bitwise equality rejects every hack and a naive harness almost none;
# on the honest ladder a tolerant check has no false positives and bitwise equality flags rounding.
DETECTION_CONTRAST = ("exact_match", "naive")
HONEST_CONTRAST = ("naive", "exact_match")

EXPERIMENT = Experiment(
    slug="solexecbench",
    config_cls=SolExecBenchExperimentConfig,
    claims=(
        Claim(
            "the defended harness catches more reward hacks than a naive and a KernelBench-style harness, "
            "and than its own scale-aware correctness check with every defence off",
            "detection_rate",
            "solexecbench",
            ("naive", "kernelbench", "defences_off"),
            # the naive harness must not pass against the others (the check alone catches 0.54 of the
            # red team: the defences, not the tolerance rule, have to earn the claim)
            controls=("naive",),
            contrast=DETECTION_CONTRAST,
        ),
        Claim(
            "with no more false positives on the honest ladder",
            "false_positive_rate",
            "solexecbench",
            ("naive", "kernelbench"),
            kind="noninferior",
            margin=0.02,
            margin_scale="absolute",
            margin_source="ours: one honest solution in fifty (margin 0 cannot be shown on an exact tie)",
            controls=("exact_match",),
            contrast=HONEST_CONTRAST,
        ),
        Claim(
            "and SOL scores at least as monotone along the ladder",
            "ladder_monotone",
            "solexecbench",
            ("naive", "kernelbench"),
            kind="noninferior",
            margin=0.02,
            margin_scale="absolute",
            margin_source="ours: one honest solution in fifty (margin 0 cannot be shown on an exact tie)",
            controls=("exact_match",),
            contrast=HONEST_CONTRAST,
        ),
    ),
    metrics=METRICS,
    systems=harness_systems(),
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=55,
            seeds=1,
            overrides={
                "problems": "smoke",
                "max_workloads": 1,
                "method.correctness_rounds": 2,
                "method.min_reps": 5,
                "method.max_reps": 6,
                "method.time_budget_s": 0.02,
                "method.flush_bytes": 8 * 2**20,
                "repeats": 2,
                "red_team_problems": 1,
            },
        ),
        # issue #19: ~3 minutes on 2 cores with >= 5 seeds where a verdict is drawn; the grid shrinks before
        # the seeds do: the two smoke problems (ladder twice per rung), the 13 red-team families on rmsnorm.
        # The earlier 12-problem default (every op family, red team on 3 problems, ~25 min for 5 seeds):
        # `--set problems=default --set red_team_problems=3 --set method.time_budget_s=0.3
        # --set method.flush_bytes=0`.
        "default": Profile(
            "default",
            budget_s=300,  # measured: 297-350 s wall, one worker, 5 harness configs x 5 seeds
            seeds=5,
            overrides={
                "problems": "smoke",
                "max_workloads": 1,
                "method.time_budget_s": 0.05,
                "red_team_problems": 1,
            },
        ),
        "full": Profile(
            "full",
            budget_s=7200,
            seeds=3,
            overrides={"problems": "all", "repeats": 3, "extra_rungs": "cpp,compile"},
        ),
    },
    run=run,
    setup=SETUP,
    ours="solexecbench",
)
