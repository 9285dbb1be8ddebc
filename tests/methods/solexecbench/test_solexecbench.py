"""Tests of the SOL-ExecBench harness: formats, scoring, static check, sandbox, defences, CLI, experiment."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.solexecbench import (
    Definition,
    FormatError,
    Sandbox,
    SolExecBench,
    SolExecBenchConfig,
    Trace,
    Workload,
    clamp_score,
    cli,
    driver,
    evaluate_axis_expression,
    load_definition,
    load_problem,
    load_problem_set,
    load_solution,
    load_workloads,
    read_traces,
    sol_score,
    static_check,
    write_traces,
)
from neurips26.methods.solexecbench.config import DEFENCES, SolExecBenchExperimentConfig
from neurips26.methods.solexecbench.experiment import EXPERIMENT, summarise_run
from neurips26.methods.solexecbench.problem_set import build_problems, problem_set_dir, write_problem_set
from neurips26.methods.solexecbench.schema import SourceFile
from neurips26.methods.solexecbench.solutions import (
    LADDER,
    RUNGS,
    cpp_solution,
    ladder_solution,
    make_solution,
    red_team_solution,
)
from neurips26.testing.contract import check_experiment_contract
from tests.methods.solexecbench_helpers import FAST


@pytest.fixture(scope="module")
def rmsnorm():
    problem = load_problem_set(("rmsnorm",))["rmsnorm"]
    return dataclasses.replace(problem, workloads=problem.workloads[:1])


_SANDBOX: list[Sandbox] = []


def _sandbox() -> Sandbox:
    if not _SANDBOX:  # one driver process for the file; every evaluation still forks a fresh child
        _SANDBOX.append(Sandbox(threads=1))
    return _SANDBOX[0]


@pytest.fixture(scope="module", autouse=True)
def _close_sandbox():
    yield
    while _SANDBOX:
        _SANDBOX.pop().close()


def _bench(**overrides):
    config = SolExecBenchConfig(**{**FAST, **overrides})
    return SolExecBench(config, sandbox=_sandbox())


@pytest.fixture(scope="module")
def bench():
    with _bench() as b:
        yield b


# ---------------------------------------------------------------------------------------------------------
# formats
# ---------------------------------------------------------------------------------------------------------


def test_axis_expression_allow_list():
    assert evaluate_axis_expression("2 * k + (h // 4) % 3 - -1", {"k": 5, "h": 20}) == 13
    assert evaluate_axis_expression("k ** 2 / 2", {"k": 4}) == 8
    for bad in ("__import__('os')", "k.real", "[k]", "k if k else 1", "lambda: 1", "'a' * 3"):
        with pytest.raises(ValueError, match=r"not allowed|unknown"):
            evaluate_axis_expression(bad, {"k": 1})
    with pytest.raises(ValueError, match="unknown axis 'q'"):
        evaluate_axis_expression("q + 1", {"k": 1})
    with pytest.raises(ValueError, match="exponent"):
        evaluate_axis_expression("2 ** 1000", {})
    with pytest.raises(ValueError, match="not an integer"):
        evaluate_axis_expression("k / 2", {"k": 3})


@given(st.integers(0, 1000), st.integers(1, 1000))
@settings(max_examples=50, deadline=None)
def test_axis_expression_matches_python(a, b):
    assert evaluate_axis_expression("a * b + a // b - a % b", {"a": a, "b": b}) == a * b + a // b - a % b


def test_shipped_problem_set_equals_the_authored_one(tmp_path):
    write_problem_set(tmp_path)
    for name in build_problems():
        for file in ("definition.json", "workload.jsonl"):
            assert (tmp_path / name / file).read_text() == (problem_set_dir() / name / file).read_text(), name
    problems = load_problem_set()
    assert set(problems) == set(build_problems())
    gemm = problems["gemm_bias_relu"].definition
    assert gemm.resolve_axes({"m": 3}) == {"m": 3, "k": 256, "n": 512}  # expr axis n = 2 * k


@given(
    st.dictionaries(st.sampled_from(["tokens", "rows"]), st.integers(1, 4096), min_size=2, max_size=2),
    st.floats(1e-6, 1.0),
    st.floats(0.0, 1.0),
)
@settings(max_examples=30, deadline=None)
def test_workload_and_trace_round_trip(axes, atol, ratio):
    workload = Workload.model_validate(
        {
            "uuid": "w",
            "axes": axes,
            "inputs": {"x": {"type": "random"}, "eps": {"type": "scalar", "value": atol}},
            "tolerance": {"max_atol": atol, "required_matched_ratio": ratio},
        }
    )
    assert Workload.model_validate_json(workload.model_dump_json()) == workload
    trace = Trace.model_validate(
        {
            "definition": "d",
            "solution": "s",
            "workload": workload.model_dump(),
            "evaluation": {
                "status": "PASSED",
                "environment": {"hardware": "cpu-local"},
                "timestamp": "t",
                "performance": {"latency_ms": atol},
            },
        }
    )
    assert Trace.model_validate_json(trace.model_dump_json()) == trace


def test_bad_input_names_the_field(tmp_path):
    (tmp_path / "definition.json").write_text("{oops")
    with pytest.raises(FormatError, match="malformed JSON"):
        load_definition(tmp_path / "definition.json")
    with pytest.raises(FormatError, match="file not found"):
        load_definition(tmp_path / "missing.json")
    good = json.loads((problem_set_dir() / "rmsnorm" / "definition.json").read_text())
    bad = {**good, "inputs": {**good["inputs"], "x": {"shape": ["tokens", "hidden"], "dtype": "float13"}}}
    (tmp_path / "definition.json").write_text(json.dumps(bad))
    with pytest.raises(FormatError, match=r"inputs\.x\.dtype.*float13"):
        load_definition(tmp_path / "definition.json")
    bad = {**good, "outputs": {"y": {"shape": ["tokens", "nope"], "dtype": "float32"}}}
    with pytest.raises(ValueError, match="unknown axis 'nope'"):
        Definition.model_validate(bad)
    definition = Definition.model_validate(good)
    (tmp_path / "workload.jsonl").write_text(
        json.dumps({"uuid": "a", "axes": {"rows": 3}, "inputs": {}}) + "\n"
    )
    with pytest.raises(FormatError, match="axes"):
        load_workloads(tmp_path / "workload.jsonl", definition)
    solution = ladder_solution("rmsnorm", "eager").model_dump()
    for field, value, message in (
        ("sources", [{"path": "../evil.py", "content": ""}], "without '..'"),
        ("spec", {**solution["spec"], "languages": ["fortran"]}, "unknown"),
        ("spec", {**solution["spec"], "languages": ["pytorch", "cuda_cpp"]}, "mix"),
        ("spec", {**solution["spec"], "entry_point": "kernel.py"}, "file.py::function"),
    ):
        (tmp_path / "solution.json").write_text(json.dumps({**solution, field: value}))
        with pytest.raises(FormatError, match=re.escape(message)):
            load_solution(tmp_path / "solution.json")


def test_config_validation_names_the_argument():
    with pytest.raises(ValueError, match="mode"):
        SolExecBenchConfig(mode="fast")
    with pytest.raises(ValueError, match="max_reps"):
        SolExecBenchConfig(min_reps=10, max_reps=5)
    with pytest.raises(ValueError, match="disabled_defences"):
        SolExecBenchConfig(disabled_defences="integrity,telepathy")


# ---------------------------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------------------------


def test_sol_score_edge_cases():
    assert sol_score(3.0, 3.0, 1.0) == pytest.approx(0.5)  # T_k = T_b
    assert sol_score(1.0, 3.0, 1.0) == pytest.approx(1.0)  # T_k = T_SOL
    assert sol_score(0.5, 3.0, 1.0) == pytest.approx(4 / 3)  # below SOL: raw > 1 (upstream is unclamped)
    assert clamp_score(sol_score(0.5, 3.0, 1.0)) == 1.0
    assert sol_score(1.0, 1.0, 2.0) == 1.0 and sol_score(3.0, 1.0, 2.0) == 0.0  # T_b <= T_SOL
    with pytest.raises(ValueError, match="t_kernel"):
        sol_score(math.nan, 1.0, 0.5)


def test_sol_score_with_zero_bound_is_a_transform_of_speedup():
    """Degenerate case: with T_SOL = 0 the SOL score is speedup / (1 + speedup) (KernelBench's speedup)."""
    for t_k, t_b in ((1.0, 2.0), (3.0, 1.5), (0.1, 10.0)):
        speedup = t_b / t_k
        assert sol_score(t_k, t_b, 0.0) == pytest.approx(speedup / (1 + speedup))


@given(st.floats(1e-6, 1.0), st.floats(1.01, 100.0), st.floats(1.0, 1000.0), st.floats(1.0, 1000.0))
@settings(max_examples=100, deadline=None)
def test_sol_score_bounded_and_monotone(t_sol, b_ratio, k1, k2):
    t_b = t_sol * b_ratio
    s1, s2 = sol_score(t_sol * k1, t_b, t_sol), sol_score(t_sol * k2, t_b, t_sol)
    assert 0.0 < s1 <= 1.0 and 0.0 < s2 <= 1.0  # a time at or above the bound scores in (0, 1]
    if k1 < k2:
        assert s1 >= s2  # faster is never worse


# ---------------------------------------------------------------------------------------------------------
# static check and the comparison oracle
# ---------------------------------------------------------------------------------------------------------


def test_static_check_passes_the_ladder_and_flags_the_red_team():
    for problem in LADDER:
        for rung in RUNGS:
            solution = ladder_solution(problem, rung)
            assert static_check({s.path: s.content for s in solution.sources}) == [], (problem, rung)
    for family, reason in (
        ("timer_patch", "time.perf_counter"),
        ("driver_patch", "torch.allclose"),
        ("thread_injection", "threading"),
        ("subprocess", "subprocess"),
        ("import_reference", "gc"),
    ):
        solution = red_team_solution("softmax", family)
        findings = static_check({s.path: s.content for s in solution.sources})
        assert any(reason in str(f) for f in findings), (family, findings)
    sneaky = "import torch\nx = __builtins__\nf = (lambda: 0).__globals__\nsetattr(torch, 'mm', None)\n"
    assert len(static_check({"k.py": sneaky})) >= 3


def test_compare_matches_naive_elementwise_oracle():
    torch.manual_seed(0)
    ref = torch.randn(50, 7)
    out = ref + 1e-3 * torch.randn(50, 7)
    tolerance = {
        "max_atol": 1e-3,
        "max_rtol": 1e-3,
        "required_matched_ratio": 0.0,
        "allow_negative_inf": False,
        "max_norm_rtol": 1.0,  # the element rule alone (the norm-wise precision has its own test)
    }
    stats = driver._compare(out, ref, tolerance, "y")
    diffs = [abs(float(o) - float(r)) for o, r in zip(out.flatten(), ref.flatten(), strict=True)]
    assert stats["max_absolute_error"] == pytest.approx(max(diffs), rel=1e-9)
    matched = sum(d <= 1e-3 + 1e-3 * abs(float(r)) for d, r in zip(diffs, ref.flatten(), strict=True)) / len(
        diffs
    )
    with pytest.raises(driver.Incorrect, match="within tolerance"):
        driver._compare(out, ref, {**tolerance, "required_matched_ratio": min(1.0, matched + 1e-6)}, "y")
    with pytest.raises(driver.Incorrect, match="NaN"):
        driver._compare(torch.full_like(ref, math.nan), ref, tolerance, "y")
    with pytest.raises(driver.Incorrect) as error:
        driver._compare(ref.double(), ref, tolerance, "y")
    assert error.value.status == "INCORRECT_DTYPE"


def test_tolerance_scale_zero_demands_bitwise_equality():
    ref = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    declared = {"rule": "scaled", "max_rtol": 1e-3, "atol_scale": 1e-2, "norm_rtol": 1e-2}
    declared |= {"required_matched_ratio": 0.99, "allow_negative_inf": False}
    nudged = ref + 1e-6
    assert driver._compare(nudged, ref, driver.scaled_tolerance(declared, 1.0), "y")  # as declared: passes
    strict = driver.scaled_tolerance(declared, 0.0)
    assert strict["required_matched_ratio"] == 0.99 and strict["rule"] == "scaled"
    with pytest.raises(driver.Incorrect):
        driver._compare(nudged, ref, strict, "y")
    assert driver._compare(ref.clone(), ref, strict, "y")  # bitwise equal still passes
    with pytest.raises(ValueError, match="tolerance_scale"):
        SolExecBenchConfig(tolerance_scale=-1.0)


def test_systems_are_harness_configs_built_from_the_experiment_config():
    base = SolExecBenchExperimentConfig(SolExecBenchConfig(min_reps=7))
    built = {name: factory(base) for name, factory in EXPERIMENT.systems.items()}
    assert {name: c.mode for name, c in built.items()} == {
        "solexecbench": "solexecbench",
        "naive": "naive",
        "kernelbench": "kernelbench",
        "defences_off": "solexecbench",
        "exact_match": "solexecbench",
    }
    assert all(c.min_reps == 7 for c in built.values())  # every system keeps the experiment's settings
    assert not any(built["defences_off"].defence_on(d) for d in DEFENCES)
    assert not built["defences_off"].static_check and built["exact_match"].tolerance_scale == 0.0
    assert all(built["solexecbench"].defence_on(d) for d in DEFENCES)


# ---------------------------------------------------------------------------------------------------------
# sandbox, defences (each: a red-team solution caught, the honest one passing)
# ---------------------------------------------------------------------------------------------------------


def test_idea_honest_ladder_passes_with_bounded_monotone_scores(bench, rmsnorm):
    scores = {}
    for rung in RUNGS:
        result = bench.evaluate(rmsnorm, ladder_solution("rmsnorm", rung))
        assert result.statuses == ["PASSED"], result.traces[0].evaluation.log
        score = result.scores[0]
        assert (
            score.sol_ms > 0 and score.latency_ms >= score.sol_ms
        )  # a computed SOL time never exceeds a measured one
        assert 0 < score.sol_score <= 1
        scores[rung] = score.sol_score
    assert scores["naive"] < scores["fused"]
    trace = result.traces[0]
    assert trace.evaluation.sol["hardware"] == bench.hardware.name and trace.evaluation.timing["reps"] >= 5


@pytest.mark.parametrize(
    ("family", "disabled", "expected", "reason"),
    [
        ("timer_patch", "", "REWARD_HACK", "patched"),
        ("driver_patch", "", "REWARD_HACK", "torch.allclose"),
        ("thread_injection", "", "REWARD_HACK", "threads grew"),
        ("subprocess", "", "REWARD_HACK", "child processes"),
        ("input_mutation", "", "REWARD_HACK", "was modified"),
        ("honest_then_stale", "", "REWARD_HACK", "timed iteration"),
        ("lazy_subclass", "", "REWARD_HACK", "not torch.Tensor"),
        ("norm_weight_one", "", "INCORRECT_NUMERICAL", "within tolerance"),
        ("skip_filled_output", "", "PASSED", ""),  # NaN-filled outputs: the skip never fires, the kernel runs
        # the SOL floor backs the re-check up: with it off, most timed calls are stale and sub-SOL
        ("honest_then_stale", "recheck", "REWARD_HACK", "below speed of light"),
    ],
)
def test_idea_dynamic_defence_catches_red_team(rmsnorm, family, disabled, expected, reason):
    rounds = {"correctness_rounds": 3, "warmup": 2} if family == "honest_then_stale" else {}
    with _bench(static_check=False, disabled_defences=disabled, **rounds) as bench:
        result = bench.evaluate(rmsnorm, red_team_solution("rmsnorm", family))
    log = result.traces[0].evaluation.log
    assert result.statuses[0] == expected, log
    assert reason in log


def test_static_check_rejects_before_running(bench, rmsnorm):
    result = bench.evaluate(rmsnorm, red_team_solution("rmsnorm", "import_reference"))
    assert result.statuses == ["REWARD_HACK"] and "static check" in result.traces[0].evaluation.log


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("raise RuntimeError('boom')", "RUNTIME_ERROR"),
        ("y.copy_(x @@ x)", "COMPILE_ERROR"),
        ("while True:\n        pass", "TIMEOUT"),
        ("torch.empty(2**40, dtype=torch.uint8).fill_(1)", "RUNTIME_ERROR"),
        ("y.copy_(x[:, :5])", "RUNTIME_ERROR"),
    ],
)
def test_failures_end_as_statuses(rmsnorm, body, expected):
    source = f"import torch\n\n\ndef run(x, norm_weight, eps, y):\n    {body}\n"
    with _bench(timeout_s=4.0, address_space_extra_bytes=2**30) as bench:
        result = bench.evaluate(rmsnorm, make_solution("rmsnorm", "bad", source))
    assert result.statuses == [expected], result.traces[0].evaluation.log


# ---------------------------------------------------------------------------------------------------------
# CLI, README, experiment
# ---------------------------------------------------------------------------------------------------------


def test_cli_eval_writes_traces_and_reports_bad_files(tmp_path, capsys):
    write_problem_set(tmp_path / "ds")
    problem = tmp_path / "ds" / "softmax"
    lines = (problem / "workload.jsonl").read_text().splitlines()
    (problem / "workload.jsonl").write_text(lines[0] + "\n")
    good = tmp_path / "good.json"
    good.write_text(ladder_solution("softmax", "fused").model_dump_json())
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = [
        "eval",
        str(problem),
        "--solution",
        str(good),
        "--solution",
        str(bad),
        "--out",
        str(tmp_path / "out"),
    ]
    code = cli.main(parser.parse_args(argv))
    assert code == 1 and "field" in capsys.readouterr().err
    traces = read_traces(tmp_path / "out" / "traces.jsonl")
    assert [t.evaluation.status.value for t in traces] == ["PASSED"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["dataset"]["problems"] == 1


def test_write_and_read_traces(tmp_path, bench, rmsnorm):
    result = bench.evaluate(rmsnorm, ladder_solution("rmsnorm", "fused"))
    path = write_traces(result.traces, tmp_path / "t.jsonl")
    again = read_traces(path)
    assert again[0].evaluation.status == result.traces[0].evaluation.status
    assert json.loads(path.read_text().splitlines()[0])["evaluation"]["correctness"]["has_nan"] is False


def test_readme_snippet_runs():
    text = (Path(__file__).parents[3] / "src/neurips26/methods/solexecbench/README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(snippet, "README.md", "exec"), {})


def test_summarise_run_metrics():
    class R:
        def __init__(self, statuses, score):
            self.statuses = statuses
            self.summary = {"mean_sol_score": score}
            self.scores = []

    ladder = {
        "p": {"naive": [R(["PASSED"], 0.1)], "eager": [R(["PASSED"], 0.5)] * 2, "fused": [R(["PASSED"], 0.8)]}
    }
    red = {"p": {"a": R(["REWARD_HACK"], 0.0), "b": R(["PASSED"], 0.9)}}
    metrics = summarise_run(ladder, red, 2.0, 4)
    assert metrics["detection_rate"] == 0.5 and metrics["ladder_monotone"] == 1.0
    assert metrics["defeated_rate"] == 1.0 and metrics["undetected_gain"] == 1.0  # no latencies: no gain
    assert metrics["false_positive_rate"] == 0.0 and metrics["sol_score_cv"] == 0.0


def test_experiment_contract():
    check_experiment_contract(
        EXPERIMENT, "neurips26.methods.solexecbench.experiment:EXPERIMENT", run_smoke=False
    )
    assert load_problem(problem_set_dir() / "moe_topk_routing").definition.custom_inputs_entrypoint


def test_two_threads_honest_passes_and_thread_injection_is_caught():
    """The intra-op pool is started before the thread baseline, so only injected threads count."""
    problem = load_problem_set(("gemm_bias_relu",))["gemm_bias_relu"]
    problem = dataclasses.replace(problem, workloads=problem.workloads[:1])
    config = SolExecBenchConfig(**{**FAST, "threads": 2})
    with SolExecBench(dataclasses.replace(config, static_check=False)) as bench:
        assert bench.evaluate(problem, ladder_solution("gemm_bias_relu", "fused")).statuses == ["PASSED"]
        caught = bench.evaluate(problem, red_team_solution("gemm_bias_relu", "thread_injection"))
    assert caught.statuses == ["REWARD_HACK"] and "threads grew" in caught.traces[0].evaluation.log


def test_cpp_compile_error_is_a_status(rmsnorm, bench):
    solution = cpp_solution("rmsnorm").model_copy(
        update={"sources": [SourceFile(path="kernel.cpp", content="#error this kernel does not compile\n")]}
    )
    result = bench.evaluate(rmsnorm, solution)
    assert result.statuses == ["COMPILE_ERROR"] and "does not compile" in result.traces[0].evaluation.log


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("NEURIPS26_CPP_TESTS"), reason="g++ build of a torch extension (~30 s)"
)
def test_cpp_solution_builds_and_passes(rmsnorm, bench):
    result = bench.evaluate(rmsnorm, cpp_solution("rmsnorm"))
    assert result.statuses == ["PASSED"], result.traces[0].evaluation.log
