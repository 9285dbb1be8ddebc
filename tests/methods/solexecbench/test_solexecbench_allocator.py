"""Issue #44 (SOL-score CV): the timed calls' temporaries must not land on never-touched pages.

The timed loop keeps every call's fresh inputs alive; on the heap they pushed its top up and the call's
temporaries faulted on new pages (up to half of a reference call's time, swinging with the load). The
inputs now live off the heap, and the evaluation processes run on jemalloc where it is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from neurips26.methods.solexecbench import SolExecBench, SolExecBenchConfig, driver, load_problem_set
from neurips26.methods.solexecbench.sandbox import (
    JEMALLOC_CONF,
    Sandbox,
    allocator_library,
    find_jemalloc,
    scrubbed_environment,
)
from neurips26.methods.solexecbench.solutions import ladder_solution

_MEASURE = """
import resource, statistics, sys
import torch
from neurips26.methods.solexecbench import driver

driver._prepare_evaluation_process({"steady_allocator": True, "threads": 1})  # as every evaluation process
faults = []

def reference(inputs, _):
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    x = inputs[0]
    centred = x - x.mean(-1, keepdim=True)
    result = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5) * 2.0 + 1.0
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    return result

def make_iteration(kind, index):
    return [torch.randn(256, 768, generator=torch.Generator().manual_seed(index))], None

settings = {"warmup": 3, "min_reps": 20, "max_reps": 20, "time_budget_s": 60.0,
            "inputs_off_heap": sys.argv[1] == "off"}
clock = driver._make_clock({"timer": "cpu", "flush_bytes": 4096})  # the faults, not a cold cache, count
driver._time_defended(reference, make_iteration, settings, set(), clock)
timed = faults[3:]
print(statistics.median(timed), max(timed))
"""


def _faults_per_timed_call(inputs: str, allocator: str) -> tuple[float, int]:
    """Median and most minor page faults inside a timed call of a LayerNorm-like reference (four temporaries
    and a result the size of its 256 x 768 input), timed by the driver's own loop with its fresh, kept-alive
    inputs, in a fresh single-threaded process set up as an evaluation process is (allocator state is per
    process)."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    environment.pop("LD_PRELOAD", None)
    preload = allocator_library(allocator)
    if preload is not None:  # what the sandbox's environment adds for jemalloc
        environment.update(LD_PRELOAD=preload, MALLOC_CONF=JEMALLOC_CONF)
    environment["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, inputs], capture_output=True, text=True, env=environment, check=True
    )
    median, most = done.stdout.split()[-2:]
    return float(median), int(most)


@pytest.mark.skipif(find_jemalloc() is None, reason="no jemalloc here (apt-get install libjemalloc2)")
def test_timed_temporaries_reuse_touched_pages_with_inputs_off_the_heap() -> None:
    """Off-heap inputs on jemalloc (the defaults): no temporary of a timed call lands on a fresh page. With
    the inputs on the heap, one temporary (192 pages) faults in every call. (Off-heap inputs on glibc
    fault in some environments and not in others, so that pair is not asserted here; in the harness they
    left the reference's time on two levels, README "Timing CV" 4.)"""
    pages = 256 * 768 * 4 // 4096
    median, most = _faults_per_timed_call("off", "jemalloc")
    assert median < pages / 4
    # not one timed call: the warmup holds its previous result through each call, as the timed loop does,
    # so the second timed call's result (two alive at once) no longer lands on fresh pages
    assert most < pages / 4
    assert _faults_per_timed_call("on", "jemalloc")[0] >= pages  # the idea off: inputs on the heap


def test_off_heap_copies_keep_values_dtype_shape_and_leave_other_values_alone() -> None:
    values = [torch.arange(12, dtype=torch.float64).view(3, 4), torch.ones(3, dtype=torch.bool), 1e-5]
    copies = driver._mapped_copies(values)
    assert torch.equal(copies[0], values[0]) and copies[0].dtype == torch.float64
    assert torch.equal(copies[1], values[1]) and copies[2] == 1e-5
    assert copies[0].data_ptr() != values[0].data_ptr() and copies[0].data_ptr() % 4096 == 0
    strided = torch.zeros(4, 4).t()
    assert driver._mapped_copies([strided])[0] is strided  # not contiguous: left where it is


def test_allocator_choices_and_their_environment(monkeypatch, tmp_path) -> None:
    assert allocator_library("glibc") is None
    with pytest.raises(ValueError, match="allocator='tcmalloc'"):
        allocator_library("tcmalloc")
    assert "LD_PRELOAD" not in scrubbed_environment(1, str(tmp_path))
    environment = scrubbed_environment(1, str(tmp_path), preload="/lib/libjemalloc.so.2")
    assert environment["LD_PRELOAD"] == "/lib/libjemalloc.so.2"
    assert environment["MALLOC_CONF"] == JEMALLOC_CONF
    from neurips26.methods.solexecbench import sandbox

    monkeypatch.setattr(sandbox, "find_jemalloc", lambda: None)
    assert allocator_library("auto") is None  # falls back to glibc
    with pytest.raises(ValueError, match="apt-get install libjemalloc2"):
        allocator_library("jemalloc")
    with pytest.raises(ValueError, match="allocator"):
        SolExecBenchConfig(allocator="tcmalloc")


def test_the_trace_names_the_allocator_the_evaluation_ran_on() -> None:
    problem = load_problem_set(("rmsnorm",))["rmsnorm"]
    expected = "jemalloc" if find_jemalloc() else "glibc"
    with Sandbox(allocator="auto") as box:
        bench = SolExecBench(SolExecBenchConfig(min_reps=3, max_reps=3, warmup=1), sandbox=box)
        result = bench.evaluate(problem, ladder_solution("rmsnorm", "fused"))
        bench.close()
    assert result.statuses == ["PASSED"] * len(problem.workloads)
    assert box.allocator == expected
    assert {trace.evaluation.environment.libs["allocator"] for trace in result.traces} == {expected}


_ARENA = """
import ctypes, sys
import torch
from neurips26.methods.solexecbench import driver

mallctl = ctypes.CDLL(None).mallctl

def read(name):
    value, size = ctypes.c_uint(0), ctypes.c_size_t(4)
    assert mallctl(name, ctypes.byref(value), ctypes.byref(size), None, ctypes.c_size_t(0)) == 0
    return value.value

before, existing = read(b"thread.arena"), read(b"arenas.narenas")
driver._prepare_evaluation_process({"steady_allocator": sys.argv[1] == "on", "threads": 1})
torch.ones(256, 1024)  # allocates from the thread's arena
print(before, existing, read(b"thread.arena"))
"""


@pytest.mark.skipif(find_jemalloc() is None, reason="no jemalloc here (apt-get install libjemalloc2)")
def test_every_evaluation_process_allocates_from_a_jemalloc_arena_of_its_own() -> None:
    """A forked evaluation process inherits the fork server's arenas and their dirty extents; beside them a
    timed call's result kept landing on fresh pages (README "Timing CV" 5). ``steady_allocator`` (default on)
    moves the process onto a new arena; off, it stays on the inherited one."""
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "LD_PRELOAD": allocator_library("jemalloc"),
        "MALLOC_CONF": JEMALLOC_CONF,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }

    def arenas(switch: str) -> list[int]:
        done = subprocess.run(
            [sys.executable, "-c", _ARENA, switch],
            capture_output=True,
            text=True,
            env=environment,
            check=True,
        )
        return [int(value) for value in done.stdout.split()[-3:]]

    before, existing, after = arenas("on")
    assert after >= existing and after != before  # a new arena, created for this process
    before, _, after = arenas("off")
    assert after == before


def test_on_glibc_the_arena_step_is_a_no_op() -> None:
    """Where jemalloc is not installed the evaluation processes run on glibc's malloc (``allocator="auto"``):
    the arena step finds no ``mallctl`` and changes nothing, and the process is still prepared."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    environment.pop("LD_PRELOAD", None)
    probe = (
        "from neurips26.methods.solexecbench import driver\n"
        "driver._prepare_evaluation_process({'steady_allocator': True, 'threads': 1})\n"
        "print(driver._own_jemalloc_arena())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environment, check=True
    )
    assert done.stdout.split()[-1] == "None"
