"""SOL-ExecBench sandbox isolation: no network (a namespace, or a socket guard when the kernel refuses
namespaces) and a process-count limit; each stops its red-team solution with REWARD_HACK and an honest
solution still passes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, load_problem_set
from neurips26.methods.solexecbench.solutions import LADDER, _function, ladder_solution, make_solution
from tests.methods.solexecbench_helpers import FAST as FAST_SETTINGS

FAST = {**FAST_SETTINGS, "static_check": False}  # the static check would reject these before they run
KERNEL = "import torch\n\n\n" + _function("rmsnorm", LADDER["rmsnorm"]["fused"], "kernel") + "\n\n"
SWALLOWED_SOCKET = (
    KERNEL
    + """import socket


def run(x, norm_weight, eps, y):
    try:  # a cheat that hides the refusal and carries on
        socket.create_connection(("127.0.0.1", 22), timeout=1).close()
    except Exception:
        pass
    kernel(x, norm_weight, eps, y)
"""
)
FORK_BOMB = (
    KERNEL
    + """import os
import time


def run(x, norm_weight, eps, y):
    while True:
        if os.fork() == 0:
            time.sleep(20)
"""
)


@pytest.fixture(scope="module")
def rmsnorm():
    problem = load_problem_set(("rmsnorm",))["rmsnorm"]
    return dataclasses.replace(problem, workloads=problem.workloads[:1])


@pytest.mark.parametrize("network_isolation", [True, False])
def test_socket_is_stopped_and_the_barrier_is_reported(rmsnorm, network_isolation):
    with SolExecBench(SolExecBenchConfig(**FAST, network_isolation=network_isolation)) as bench:
        honest = bench.evaluate(rmsnorm, ladder_solution("rmsnorm", "fused"))
        cheat = bench.evaluate(rmsnorm, make_solution("rmsnorm", "socket", SWALLOWED_SOCKET))
    assert honest.statuses == ["PASSED"], honest.traces[0].evaluation.log
    evaluation = cheat.traces[0].evaluation
    assert cheat.statuses == ["REWARD_HACK"] and "network access attempted" in evaluation.log
    sandbox = evaluation.sandbox
    if network_isolation and "namespace_refused" not in sandbox:
        assert sandbox["network"] == "namespace"
    else:  # switched off or refused by the kernel: the guard alone, and the trace says so and why
        assert sandbox["network"] == "socket-guard" and sandbox["namespace_refused"]


def test_fork_bomb_is_stopped_quickly(rmsnorm):
    with SolExecBench(SolExecBenchConfig(**FAST)) as bench:
        result = bench.evaluate(rmsnorm, make_solution("rmsnorm", "bomb", FORK_BOMB))
        after = bench.evaluate(rmsnorm, ladder_solution("rmsnorm", "fused"))
    evaluation = result.traces[0].evaluation
    assert result.statuses == ["REWARD_HACK"] and "child processes" in evaluation.log, evaluation.log
    assert evaluation.sandbox["enforced"] and evaluation.sandbox["nproc_limit"] <= 64
    assert "Resource temporarily unavailable" in evaluation.log  # the limit, not the timeout, stopped it
    assert after.statuses == ["PASSED"]  # the bomb's leftovers were killed with its process group


ISOLATE_CHILD = """
import json, socket, sys
from neurips26.methods.solexecbench import driver
if sys.argv[1] == "refuse":
    driver._unshare = lambda flags: "Operation not permitted (simulated)"
report = driver._isolate({"max_processes": 8, "network_namespace": True, "sandbox_uid": 65534}, sys.argv[2])
try:
    socket.socket()
    report["socket"] = "opened"
except PermissionError as error:
    report["socket"] = str(error)
print(json.dumps(report))
"""


def _isolate_in_a_fork(monkeypatch_unshare: bool, tmp_path) -> dict:
    """Run ``driver._isolate`` in a fresh interpreter (it changes uid, limits and sockets for good).

    Not ``os.fork()``: the pytest worker may have imported JAX, whose threads make a fork unsafe."""
    mode = "refuse" if monkeypatch_unshare else "allow"
    done = subprocess.run(
        [sys.executable, "-c", ISOLATE_CHILD, mode, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_refused_namespace_falls_back_to_the_guard_honestly(tmp_path):
    report = _isolate_in_a_fork(True, tmp_path)
    assert report["network"] == "socket-guard"
    assert report["namespace_refused"] == "Operation not permitted (simulated)"
    assert report["socket"] == "network access is blocked in the sandbox"
    assert report["nproc_scope"] == "host-uid" and report["nproc_limit"] >= 8


def test_namespace_when_the_kernel_allows_it(tmp_path):
    report = _isolate_in_a_fork(False, tmp_path)
    if "namespace_refused" in report:
        pytest.skip(f"kernel refused namespaces here: {report['namespace_refused']}")
    assert report["network"] == "namespace" and report["enforced"]
