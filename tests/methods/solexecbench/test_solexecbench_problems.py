"""SOL-ExecBench problem set: every authored problem loads, its ladder matches its reference, its red-team
solutions build, solar bounds it, and the extra (C++, torch.compile) rungs are well formed."""

from __future__ import annotations

import ast
import dataclasses
import os

import pytest
import torch

from neurips26.methods.solar import load_hardware
from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, driver, load_problem_set
from neurips26.methods.solexecbench.config import SolExecBenchExperimentConfig
from neurips26.methods.solexecbench.core import reference_namespace, sol_time_ms
from neurips26.methods.solexecbench.experiment import select_problems, summarise_run
from neurips26.methods.solexecbench.problem_set import DEFAULT_PROBLEMS
from neurips26.methods.solexecbench.solutions import (
    COMPILE_PROBLEMS,
    CPP_KERNELS,
    LADDER,
    RUNGS,
    _function,
    _output_shape_source,
    compile_solution,
    cpp_solution,
    red_team_families,
    red_team_solution,
)
from neurips26.methods.solexecbench.static_check import static_check

PROBLEMS = load_problem_set()
FAMILIES_OF_THE_PAPER = {
    "gemm",
    "attention",
    "norm",
    "softmax",
    "activation",
    "mlp",
    "reduction",
    "conv",
    "gather",
    "scatter",
    "position",
    "topk",
    "scan",
    "loss",
    "moe",
    "block",
}


def _driver_problem(problem) -> tuple[dict, dict]:
    """The driver's view of ``problem`` and of its first workload (as the harness sends them)."""
    definition = problem.definition
    namespace = reference_namespace(definition.reference)
    view = {
        "inputs": {k: v.model_dump() for k, v in definition.inputs.items()},
        "outputs": {k: v.model_dump() for k, v in definition.outputs.items()},
        "namespace": namespace,
        "custom_inputs_entrypoint": definition.custom_inputs_entrypoint,
    }
    workload = problem.workloads[0]
    load = {
        "axes": definition.resolve_axes(workload.axes),
        "inputs": {k: v.model_dump() for k, v in workload.inputs.items()},
        "tolerance": workload.tolerance.model_dump(),
    }
    return view, load


def test_problem_set_covers_the_papers_op_families():
    assert len(PROBLEMS) >= 30
    assert {p.definition.op_type for p in PROBLEMS.values()} == FAMILIES_OF_THE_PAPER
    assert set(LADDER) == set(PROBLEMS)
    for problem in PROBLEMS.values():
        assert len(problem.workloads) >= 2
        assert problem.definition.reference.count("def run(") == 1


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_every_rung_matches_the_reference(name):
    """In-process oracle: each honest rung, on the driver's own input generator, within the tolerance."""
    torch.manual_seed(0)
    view, load = _driver_problem(PROBLEMS[name])
    inputs = driver._make_inputs(view, load, randomise_names=True)
    refs = driver._as_list(view["namespace"]["run"](*driver._clone(inputs)), 1)
    for rung in RUNGS:
        namespace: dict = {}
        exec("import torch\n" + _function(name, LADDER[name][rung], "run"), namespace)
        outputs = driver._empty_outputs(view, load, fill_nan=True)
        namespace["run"](*inputs, *outputs)
        driver._check_all(outputs, refs, load["tolerance"], list(view["outputs"]))
        assert static_check({"kernel.py": "import torch\n" + _function(name, LADDER[name][rung])}) == []
    # the return-style red-team families allocate the first output from this shape expression
    shape_ns: dict = {}
    exec(_output_shape_source(name), shape_ns)
    assert tuple(shape_ns["_output_shape"](*inputs)) == tuple(refs[0].shape)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_red_team_solutions_build_for_every_problem(name):
    families = red_team_families(name)
    assert len(families) >= 12
    for family in families:
        solution = red_team_solution(name, family)
        ast.parse(solution.sources[0].content)


ONE_PER_FAMILY = sorted({p.definition.op_type: name for name, p in sorted(PROBLEMS.items())}.values())


@pytest.mark.parametrize("name", ONE_PER_FAMILY)
def test_solar_bounds_the_problem_below_its_measured_time(name):
    """T_SOL exists (one problem per op family: solar's export costs ~1.5 s a problem) and never exceeds
    a measured (in-process, eager) time of the reference."""
    import time

    problem = PROBLEMS[name]
    t_sol, record = sol_time_ms(problem.definition, problem.workloads[0], load_hardware("cpu-local"))
    assert t_sol > 0
    view, load = _driver_problem(problem)
    inputs = driver._make_inputs(view, load, randomise_names=True)
    start = time.perf_counter()
    view["namespace"]["run"](*inputs)
    assert t_sol <= (time.perf_counter() - start) * 1e3, record


def test_select_problems_orders_the_default_six_first():
    problems = select_problems(SolExecBenchExperimentConfig(problems="all", max_workloads=1))
    assert tuple(problems)[: len(DEFAULT_PROBLEMS)] == DEFAULT_PROBLEMS and len(problems) == len(PROBLEMS)
    assert all(len(p.workloads) == 1 for p in problems.values())


def test_extra_rungs_are_well_formed_and_validated():
    for name in COMPILE_PROBLEMS:
        source = compile_solution(name).sources[0].content
        assert "torch.compile(eager" in source and static_check({"kernel.py": source}) == []
    assert set(CPP_KERNELS) == {"rmsnorm", "softmax", "silu_and_mul"}
    assert cpp_solution("softmax").spec.languages == ["cpp"]
    assert SolExecBenchExperimentConfig(extra_rungs="cpp, compile").extra_rung_list() == ("cpp", "compile")
    with pytest.raises(ValueError, match="extra_rungs"):
        SolExecBenchExperimentConfig(extra_rungs="triton")
    with pytest.raises(ValueError, match="problem="):
        compile_solution("nope")


def test_summarise_run_reports_extra_rungs_only_when_evaluated():
    class R:
        def __init__(self, score):
            self.statuses, self.summary, self.scores = ["PASSED"], {"mean_sol_score": score}, []

    ladder = {"p": {"naive": [R(0.1)], "eager": [R(0.5)], "fused": [R(0.8)]}}
    assert "score_cpp" not in summarise_run(ladder, {}, 1.0, 3)
    ladder["p"]["cpp"] = [R(0.6)]
    assert summarise_run(ladder, {}, 1.0, 4)["score_cpp"] == pytest.approx(0.6)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("NEURIPS26_CPP_TESTS"), reason="inductor compile + g++ builds (~1-2 min each)"
)
@pytest.mark.parametrize("rung", ["compile", "cpp"])
def test_extra_rung_passes_in_the_sandbox(rung):
    from neurips26.methods.solexecbench.experiment import evaluate_extra_rung

    problem = load_problem_set(("softmax",))["softmax"]
    problem = dataclasses.replace(problem, workloads=problem.workloads[:1])
    config = SolExecBenchConfig(
        correctness_rounds=2, min_reps=5, max_reps=6, time_budget_s=0.02, timeout_s=300.0
    )
    with SolExecBench(config) as bench:
        result = evaluate_extra_rung(bench, problem, rung, SolExecBenchExperimentConfig().compile_file_bytes)
    assert result.statuses == ["PASSED"], result.traces[0].evaluation.log
