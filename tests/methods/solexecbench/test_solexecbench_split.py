"""SOL-ExecBench's process split (issue #44): the solution runs in an untrusted process that never sees the
reference, the baseline timer or the checker; reference outputs, ``T_b`` and the comparison come from a
trusted process that never imports the solution. Each red-team family below, written with public PyTorch API,
PASSED on the single-process harness (checked before the split landed) and must be blocked now, on both
``/tmp`` paths (private tmpfs in a mount namespace, and the fallback). The static check is off throughout:
it is a first filter, and these tests check what stands behind it.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, load_problem, load_problem_set
from neurips26.methods.solexecbench.config import PRIVATE_TMP_SWITCH
from neurips26.methods.solexecbench.problem_set import build_problems
from neurips26.methods.solexecbench.solutions import make_solution
from tests.methods.solexecbench_helpers import FAST as FAST_SETTINGS

FAST = {**FAST_SETTINGS, "timeout_s": 60.0, "static_check": False}
POLICIES = ["namespace", "fallback"]

# -- reference override through the dispatcher: aten::rsqrt answers 1 for every process that asks --------
DISPATCHER_OVERRIDE = """import torch

_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("rsqrt", lambda t: torch.ones_like(t.detach()).requires_grad_(False), "CPU")


def run(x, norm_weight, eps, y):
    torch.mul(x, norm_weight, out=y)  # what the patched reference computes: no normalisation at all
"""
# -- attribute rebinding: the reference's Tensor.exp and the torch namespace it reads ------------------------
ATTRIBUTE_REBINDING = """import torch

torch.Tensor.exp = lambda self: torch.ones_like(self)  # softmax's reference now answers 1/cols


def run(scores, probs):
    probs.fill_(1.0 / scores.shape[-1])
"""
# -- checker-state tampering: the comparison operator, and the driver's tolerance helper ---------------
CHECKER_COMPARISON = """import torch


def _always(self, other):
    return torch.ones(self.shape, dtype=torch.bool)


torch.Tensor.__le__ = _always  # every element-wise tolerance test the checker makes says yes


def run(x, norm_weight, eps, y):
    y.fill_(7.0)
"""
CHECKER_TOLERANCE = """import sys

import torch

_driver = sys.modules["__main__"]
_driver.scaled_tolerance = lambda tolerance, factor: {
    **tolerance, "max_atol": 1e9, "max_rtol": 1e9, "atol_scale": 1e9, "norm_rtol": 1e9
}


def run(x, norm_weight, eps, y):
    y.fill_(3.0)
"""
# -- timing interference: the reference's own ops sleep, so T_b balloons -------------------------------------
SLOW_REFERENCE = """import time

import torch

_exp = torch.Tensor.exp


def _slow_exp(self):
    time.sleep(0.02)
    return _exp(self)


torch.Tensor.exp = _slow_exp  # the solution below never calls it


def run(scores, probs):
    torch.softmax(scores, -1, out=probs)
"""
# -- timing interference from a concurrent process (issue #44, interleaved timing): a thread of the solution
# that would run during the reference's turns. It watches its own wake-ups: a gap as long as a reference
# turn means it was stopped; from then on the solution answers wrong, which the re-check of the last timed
# call catches. A thread that was never stopped never sees such a gap, and the solution PASSES.
STOPPED_WATCHER = """import threading
import time

import torch

_LONGEST = [0.0]


def _watch():
    last = time.monotonic()
    while True:
        time.sleep(0.005)
        now = time.monotonic()
        _LONGEST[0] = max(_LONGEST[0], now - last)
        last = now


threading.Thread(target=_watch, daemon=True).start()


def run(scores, probs):
    torch.softmax(scores, -1, out=probs)
    if _LONGEST[0] > 0.4:  # the reference's turns (0.6 s each) passed while this thread was stopped
        probs.fill_(0.5)
"""
# the reference of that problem sleeps 0.2 s per call: a turn of 3 calls is 0.6 s
SLEEPING_REFERENCE = """import time

import torch

def run(scores):
    time.sleep(0.2)
    return torch.softmax(scores, -1)
"""
# -- orphan survivor: a double fork, the grandchild in its own session (out of the killed process group) ----
ORPHAN = """import os
import time

import torch


def _leave_a_survivor():
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(120)
        os._exit(0)
    os.waitpid(first, 0)


_leave_a_survivor()


def run(x, norm_weight, eps, y):
    torch.mul(x, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), out=y)
    y.mul_(norm_weight)
"""
# -- honest: scipy/numpy inside, a precomputed constant, an algorithm better than the reference's ----------
HONEST_SCIPY = """import numpy as np
import scipy.special
import torch


def run(scores, probs):
    probs.copy_(torch.from_numpy(scipy.special.softmax(scores.numpy().astype(np.float64), axis=-1)))
"""
HONEST_CONSTANT = """import math

import torch

_LOG2E = torch.tensor(1.0 / math.log(2.0))  # precomputed at import


def run(scores, probs):
    shifted = scores - scores.amax(-1, keepdim=True)
    e = torch.exp2(shifted * _LOG2E)
    torch.div(e, e.sum(-1, keepdim=True), out=probs)
"""
HONEST_CUMSUM = """import torch


def run(x, y):
    torch.sub(x.cumsum(-1), x, out=y)
"""
# the reference: an exclusive prefix sum as a triangular matmul (O(n^2) per row); cumsum is O(n)
TRIANGULAR_REFERENCE = """import torch

def run(x):
    n = x.shape[-1]
    return x @ torch.triu(torch.ones(n, n, dtype=x.dtype), diagonal=1)
"""


def _first_workload(name: str):
    problem = load_problem_set((name,))[name]
    return dataclasses.replace(problem, workloads=problem.workloads[:1])


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    triangular = tmp_path_factory.mktemp("triangular_cumsum")
    definition, workloads = build_problems()["cumsum"]
    (triangular / "definition.json").write_text(json.dumps({**definition, "reference": TRIANGULAR_REFERENCE}))
    (triangular / "workload.jsonl").write_text(json.dumps(workloads[0]) + "\n")
    sleeping = tmp_path_factory.mktemp("sleeping_softmax")
    definition, workloads = build_problems()["softmax"]
    (sleeping / "definition.json").write_text(json.dumps({**definition, "reference": SLEEPING_REFERENCE}))
    (sleeping / "workload.jsonl").write_text(json.dumps(workloads[0]) + "\n")
    return {
        "sleeping_softmax": load_problem(sleeping),
        "rmsnorm": _first_workload("rmsnorm"),
        "softmax": _first_workload("softmax"),
        "triangular_cumsum": load_problem(triangular),
    }


def _evaluate(problems, problem: str, source: str, policy: str, monkeypatch, **config):
    monkeypatch.setenv(PRIVATE_TMP_SWITCH, policy)
    with SolExecBench(SolExecBenchConfig(**{**FAST, **config})) as bench:
        result = bench.evaluate(problems[problem], make_solution(problems[problem].name, "probe", source))
    evaluation = result.traces[0].evaluation
    if policy == "namespace" and "private /tmp was required" in evaluation.log:
        pytest.skip(f"the kernel refuses a mount namespace here: {evaluation.log[-300:]}")
    assert evaluation.sandbox and evaluation.sandbox["tmp_policy"] == policy
    return result, evaluation


CHEATS = {
    "dispatcher_override": ("rmsnorm", DISPATCHER_OVERRIDE),
    "attribute_rebinding": ("softmax", ATTRIBUTE_REBINDING),
    "checker_comparison": ("rmsnorm", CHECKER_COMPARISON),
    "checker_tolerance": ("rmsnorm", CHECKER_TOLERANCE),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("family", sorted(CHEATS))
def test_wrong_output_is_judged_by_the_trusted_process(family, policy, problems, monkeypatch):
    """With the identity snapshot off too: what the solution did to its own process cannot reach the
    reference or the checker, so its wrong output is wrong."""
    problem, source = CHEATS[family]
    result, evaluation = _evaluate(
        problems, problem, source, policy, monkeypatch, disabled_defences="integrity"
    )
    assert result.statuses == ["INCORRECT_NUMERICAL"], evaluation.log


@pytest.mark.parametrize("policy", POLICIES)
def test_a_slowed_reference_does_not_inflate_the_baseline(policy, problems, monkeypatch):
    result, evaluation = _evaluate(
        problems, "softmax", SLOW_REFERENCE, policy, monkeypatch, disabled_defences="integrity"
    )
    assert result.statuses == ["PASSED"], evaluation.log
    # the reference sleeps 20 ms per call in the solution's process; in the trusted one it takes ~1 ms
    assert evaluation.performance.reference_latency_ms < 10.0, evaluation.performance
    assert evaluation.performance.speedup_factor < 10.0, evaluation.performance


@pytest.mark.parametrize("policy", POLICIES)
def test_the_solution_is_stopped_during_the_reference_turns(policy, problems, monkeypatch):
    """Interleaved timing keeps both processes alive: every thread and process of the solution must be
    stopped while the trusted timer times the reference, or it could slow ``T_b`` down (threads defence off:
    this checks what stands behind it). With the timings one after the other the watcher is never stopped
    and the solution passes: the test's own control."""
    blocks = {"interleaved": 3, "sequential": 0}
    statuses, logs = {}, {}
    for name, block in blocks.items():
        result, evaluation = _evaluate(
            problems,
            "sleeping_softmax",
            STOPPED_WATCHER,
            policy,
            monkeypatch,
            disabled_defences="threads",
            interleave_block=block,
        )
        statuses[name], logs[name] = result.statuses, evaluation.log
        if result.statuses == ["PASSED"]:
            assert evaluation.timing["interleave_block"] == block
    assert statuses == {"interleaved": ["REWARD_HACK"], "sequential": ["PASSED"]}, logs
    assert "timed iteration" in logs["interleaved"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("policy", POLICIES)
def test_an_orphan_in_its_own_session_is_killed_and_flagged(policy, problems, monkeypatch):
    result, evaluation = _evaluate(problems, "rmsnorm", ORPHAN, policy, monkeypatch)
    assert result.statuses == ["REWARD_HACK"], evaluation.log
    assert "survived the evaluation" in evaluation.log
    pids = [int(p) for p in re.findall(r"\d+", evaluation.log.split("survived the evaluation")[1][:200])]
    assert pids and not any(_alive(pid) for pid in pids)


HONEST = {
    "scipy": ("softmax", HONEST_SCIPY),
    "constant": ("softmax", HONEST_CONSTANT),
    "better_algorithm": ("triangular_cumsum", HONEST_CUMSUM),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_solutions_pass(case, policy, problems, monkeypatch):
    problem, source = HONEST[case]
    result, evaluation = _evaluate(problems, problem, source, policy, monkeypatch)
    assert result.statuses == ["PASSED"], evaluation.log
    assert evaluation.sandbox["split"] == "trusted-judge", evaluation.sandbox


# ---------------------------------------------------------------------------------------------------------
# the declared precision, norm-wise: a bf16 result fails every draw, an honest fp32 one passes every draw
# ---------------------------------------------------------------------------------------------------------

AUTHORED_TOLERANCE = {
    "max_atol": 1e-4,
    "max_rtol": 1e-4,
    "required_matched_ratio": 0.999,
    "max_error_cap": None,
    "allow_negative_inf": False,
}


def _manual_softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def test_a_bf16_result_fails_the_declared_precision_on_every_draw():
    import torch

    from neurips26.methods.solexecbench import driver

    element_rule_only = {**AUTHORED_TOLERANCE, "max_norm_rtol": float("inf")}
    outcomes = {"bf16_element_rule": 0, "bf16": 0, "honest": 0}
    for seed in range(20):
        x = torch.randn(64, 1024, generator=torch.Generator().manual_seed(seed))
        ref = torch.softmax(x, -1)
        downcast = torch.softmax(x.bfloat16(), -1).float()
        for key, out, tolerance in (
            ("bf16_element_rule", downcast, element_rule_only),
            ("bf16", downcast, AUTHORED_TOLERANCE),
            ("honest", _manual_softmax(x), AUTHORED_TOLERANCE),
        ):
            try:
                driver._compare(out, ref, tolerance, "probs")
                outcomes[key] += 1
            except driver.Incorrect as error:
                assert key != "bf16" or "norm-wise" in str(error)
    # the element rule alone passes the downcast (99.97-99.99% of elements match here): the bug; the
    # norm-wise bound fails it on every draw and passes the honest kernel on every draw
    assert outcomes == {"bf16_element_rule": 20, "bf16": 0, "honest": 20}


def test_a_bf16_downcast_is_incorrect_in_the_sandbox_and_honest_passes(problems, monkeypatch):
    from neurips26.methods.solexecbench.solutions import ladder_solution, red_team_solution

    softmax = problems["softmax"]
    wide = softmax.workloads[0].model_copy(update={"axes": {"rows": 64, "cols": 1024}})
    problem = dataclasses.replace(softmax, workloads=[wide])
    with SolExecBench(SolExecBenchConfig(**FAST)) as bench:
        cheat = bench.evaluate(problem, red_team_solution("softmax", "precision_downgrade"))
        honest = bench.evaluate(problem, ladder_solution("softmax", "fused"))
    assert cheat.statuses == ["INCORRECT_NUMERICAL"], cheat.traces[0].evaluation.log
    assert "norm-wise relative error" in cheat.traces[0].evaluation.log
    assert honest.statuses == ["PASSED"], honest.traces[0].evaluation.log


# ---------------------------------------------------------------------------------------------------------
# the off-CPU filter of the paired estimator (issue #44, SOL-score CV on a loaded machine)
# ---------------------------------------------------------------------------------------------------------


def test_pairs_with_a_preempted_call_are_left_out_of_the_ratio():
    from neurips26.methods.solexecbench import driver

    pairs = [(100_000, 200_000), (900_000, 200_000), (100_000, 800_000), (100_000, 200_000)]
    cpu_k = [99_000, 100_000, 99_000, 99_000]  # the second solution call was off the CPU for 0.8 ms
    cpu_b = [199_000, 199_000, 200_000, 199_000]  # the third reference call too
    assert driver._on_cpu_pairs(pairs, cpu_k, cpu_b) == [pairs[0], pairs[3]]


def test_fewer_than_half_on_the_cpu_keeps_every_pair():
    """A solution that sleeps in most of its calls cannot choose which of them count."""
    from neurips26.methods.solexecbench import driver

    pairs = [(100_000 + i, 200_000) for i in range(5)]
    cpu_k = [99_000, 99_000, 10_000, 10_000, 10_000]
    assert driver._on_cpu_pairs(pairs, cpu_k, [199_000] * 5) == pairs


@pytest.mark.parametrize("cpu", [None, "forged", [1, 2], [1.5] * 3])
def test_a_missing_or_malformed_cpu_report_counts_every_call_as_on_the_cpu(cpu):
    from neurips26.methods.solexecbench import driver

    pairs = [(100_000, 200_000)] * 3
    assert driver._on_cpu_pairs(pairs, cpu, [199_000] * 3) == pairs
