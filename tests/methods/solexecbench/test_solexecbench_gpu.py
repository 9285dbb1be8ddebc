"""SOL-ExecBench's GPU side, tested on a CPU where possible: device/timer selection, the L2 flush size, the
CUDA clocks' synchronisation discipline (with recording fakes), clear statuses without CUDA, the ``triton``
language under Triton's interpreter, and safetensors workload inputs. The ``gpu`` tests run the CUDA
backend for real and are skipped without CUDA.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch

from neurips26.methods.solexecbench import (
    FormatError,
    Sandbox,
    SolExecBench,
    SolExecBenchConfig,
    driver,
    load_problem,
    load_problem_set,
)
from neurips26.methods.solexecbench.backends import (
    CUDA_FLUSH_FALLBACK_BYTES,
    cuda_flush_bytes,
    language_plan,
    resolve_device,
    select_timer,
    visible_device,
)
from neurips26.methods.solexecbench.gpu_solutions import cuda_solution, triton_solution
from neurips26.methods.solexecbench.harness import gpu_hardware_name
from neurips26.methods.solexecbench.problem_set import build_problems
from neurips26.methods.solexecbench.solutions import ladder_solution, make_solution, red_team_solution
from tests.methods.solexecbench_helpers import FAST as FAST_SETTINGS

FAST = {**FAST_SETTINGS, "min_reps": 3, "max_reps": 3, "timeout_s": 60.0}
CUDA = torch.cuda.is_available()
_SANDBOX: list[Sandbox] = []


@pytest.fixture(scope="module")
def bench():
    _SANDBOX.append(Sandbox(threads=1))
    with SolExecBench(SolExecBenchConfig(**FAST), sandbox=_SANDBOX[0]) as harness:
        yield harness
    _SANDBOX[0].close()


def _small(name: str, **axes: int):
    """The first workload of ``name`` with smaller axes (the interpreter runs one program per row)."""
    problem = load_problem_set((name,))[name]
    workload = problem.workloads[0].model_copy(update={"axes": {**problem.workloads[0].axes, **axes}})
    return dataclasses.replace(problem, workloads=[workload])


# ---------------------------------------------------------------------------------------------------------
# selection logic
# ---------------------------------------------------------------------------------------------------------


def test_device_resolution_and_timer_selection():
    assert resolve_device("auto", cuda_available=False, device_count=0) == "cpu"
    assert resolve_device("auto", cuda_available=True, device_count=2) == "cuda:0"
    assert resolve_device("cuda:1", cuda_available=True, device_count=2) == "cuda:1"
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda", cuda_available=False, device_count=0)
    with pytest.raises(ValueError, match="2 CUDA device"):
        resolve_device("cuda:2", cuda_available=True, device_count=2)
    with pytest.raises(ValueError, match="device='tpu'"):
        resolve_device("tpu", cuda_available=True, device_count=1)
    assert select_timer("cpu", "auto", cupti_importable=True) == "cpu"
    assert select_timer("cuda:0", "auto", cupti_importable=True) == "cupti"
    assert select_timer("cuda:0", "auto", cupti_importable=False) == "cuda_events"
    assert select_timer("cuda:0", "cuda_events", cupti_importable=True) == "cuda_events"
    with pytest.raises(ValueError, match="cupti-python"):
        select_timer("cuda:0", "cupti", cupti_importable=False)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        select_timer("cpu", "cuda_events", cupti_importable=True)
    with pytest.raises(ValueError, match="asynchronous"):
        select_timer("cuda:0", "cpu", cupti_importable=True)
    with pytest.raises(ValueError, match="timer="):
        SolExecBenchConfig(timer="wallclock")
    with pytest.raises(ValueError, match="device="):
        SolExecBenchConfig(device="gpu0")


def test_l2_flush_size_and_visible_device():
    h200_l2 = 60 * 2**20  # torch reports L2_cache_size in bytes
    assert cuda_flush_bytes(h200_l2) == 2 * h200_l2
    assert cuda_flush_bytes(0) == CUDA_FLUSH_FALLBACK_BYTES >= 2 * 126 * 10**6  # B200's L2, doubled
    with pytest.raises(ValueError, match="l2_bytes"):
        cuda_flush_bytes(-1)
    assert visible_device(1, None) == "1"
    assert visible_device(1, "4,6") == "6"
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES"):
        visible_device(2, "4,6")
    assert gpu_hardware_name("NVIDIA H200", ["A100", "H100-SXM", "H200"]) == "H200"
    assert gpu_hardware_name("NVIDIA H100 80GB HBM3", ["A100", "H100-SXM", "H200"]) == "H100-SXM"
    with pytest.raises(ValueError, match="pass hardware="):
        gpu_hardware_name("Tesla T4", ["A100", "H200"])


def test_language_plans_name_what_is_missing():
    def plan(language, device="cpu", **kw):
        options = dict(triton_importable=True, nvcc=None, triton_interpreter=True) | kw
        return language_plan(language, device, **options)

    assert plan("pytorch").runnable and plan("cpp").runnable
    cuda_cpu = plan("cuda_cpp")
    assert (cuda_cpu.runnable, cuda_cpu.status) == (
        False,
        "COMPILE_ERROR",
    ) and "needs CUDA" in cuda_cpu.message
    assert "nvcc" in plan("cuda_cpp", "cuda:0").message
    assert plan("cuda_cpp", "cuda:0", nvcc="/usr/local/cuda/bin/nvcc").runnable
    assert plan("triton").interpret and not plan("triton", "cuda:0").interpret
    assert "needs CUDA" in plan("triton", triton_interpreter=False).message
    assert "not installed" in plan("triton", triton_importable=False).message
    assert "CPU-only" in plan("cpp", "cuda:0").message
    assert "not supported" in plan("cutlass", "cuda:0").message


@pytest.mark.skipif(CUDA, reason="checks the behaviour without CUDA")
def test_without_cuda_gpu_requests_end_clearly(bench):
    problem = _small("rmsnorm")
    result = bench.evaluate(problem, cuda_solution("rmsnorm"))
    assert result.statuses == ["COMPILE_ERROR"]
    assert "needs CUDA" in result.traces[0].evaluation.log
    with pytest.raises(ValueError, match="CUDA is not available"):
        SolExecBench(SolExecBenchConfig(device="cuda"))
    assert SolExecBench(SolExecBenchConfig(device="auto")).device == "cpu"


@pytest.mark.skipif(CUDA, reason="checks the behaviour without CUDA")
def test_cli_device_cuda_without_cuda_is_one_error_line(tmp_path, capsys):
    import argparse

    from neurips26.methods.solexecbench import cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["eval-dataset", str(tmp_path), "--device", "cuda"])
    assert cli.main(args) == 1
    assert "device='cuda' but CUDA is not available" in capsys.readouterr().err


def test_cuda_cpp_build_request_goes_to_nvcc_for_one_architecture(tmp_path, monkeypatch):
    """The compile step's request (captured, not run: no nvcc here): .cu and .cpp sources, nvcc flags,
    no -lcuda for our kernels, with_cuda on; and a C++ solution without a C++ source is a COMPILE_ERROR."""
    from neurips26.methods.solexecbench import compile as build

    captured = {}

    def fake_run(command, **kwargs):
        captured.update(json.loads(command[-1]), env=kwargs["env"], timeout=kwargs["timeout"])
        raise build.subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(build.subprocess, "run", fake_run)
    environment = {"PATH": "/usr/bin", "TORCH_CUDA_ARCH_LIST": "9.0"}
    result = build.build_cpp_extension(cuda_solution("rmsnorm"), tmp_path, environment, 7.0, cuda=True)
    assert (result.status, result.path) == ("TIMEOUT", None)
    assert [Path(p).name for p in captured["sources"]] == ["kernel.cu", "binding.cpp"]
    assert captured["cuda"] is True and captured["cuda_cflags"] == ["-O3", "--use_fast_math"]
    assert captured["ldflags"] == [] and captured["timeout"] == 7.0
    assert captured["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    honest = cuda_solution("rmsnorm")
    spec = honest.spec.model_copy(update={"entry_point": "kernel.cu::run"})
    cu_only = honest.model_copy(update={"sources": honest.sources[:1], "spec": spec})
    missing = build.build_cpp_extension(cu_only, tmp_path, environment, 7.0, cuda=False)
    assert missing.status == "COMPILE_ERROR" and "no source file" in missing.log


# ---------------------------------------------------------------------------------------------------------
# the CUDA clocks' discipline, with recording fakes (the real ones run in the gpu tests)
# ---------------------------------------------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def flush(self):
        recorder = self

        class Flush:
            def zero_(self):
                recorder.calls.append("flush")

            def numel(self):
                return 8

        return Flush()


def _fake_event_clock(recorder: _Recorder, cls=driver._CudaEventClock):
    clock = cls.__new__(cls)
    clock.flush = recorder.flush()
    clock.sync = lambda: recorder.calls.append("sync")
    clock.start, clock.end = "start", "end"
    clock.record = lambda event: recorder.calls.append(f"record:{event}")
    clock.elapsed = lambda start, end: 0.25  # ms, what Event.elapsed_time returns
    clock.notes = {}
    return clock


def test_event_clock_flushes_then_synchronises_around_the_window():
    recorder = _Recorder()
    clock = _fake_event_clock(recorder)
    result, elapsed_ns = clock.measure(lambda: recorder.calls.append("call") or "out", 0)
    assert (result, elapsed_ns) == ("out", 250_000)
    # flush first (outside the window), a sync so queued work is not counted, the window, a sync to finish
    assert recorder.calls == ["flush", "sync", "record:start", "call", "record:end", "sync"]
    assert clock.info() == {"backend": "cuda_events", "flush_bytes": 32}
    recorder.calls.clear()
    clock.warm()  # one empty window (lazy CUDA threads start before the thread baseline)
    assert recorder.calls == ["flush", "sync", "record:start", "flush", "record:end", "sync"]


def test_cupti_clock_spans_kernels_inside_the_window_and_falls_back_to_events():
    recorder = _Recorder()
    clock = _fake_event_clock(recorder, driver._CuptiClock)
    stamps = iter([1_000, 9_000, 20_000, 30_000])

    class FakeCupti:
        @staticmethod
        def get_timestamp():
            return next(stamps)

        @staticmethod
        def activity_flush_all(flag):
            recorder.calls.append("cupti-flush")

    clock.cupti, clock.spans = FakeCupti, []
    clock.notes = {"event_fallbacks": 0, "kernels_per_call": []}

    def two_kernels():  # the activity buffer: one record before the window, two inside
        clock.spans.extend([(500, 900), (2_000, 3_000), (4_000, 7_500)])

    _, span = clock.measure(two_kernels, 0)
    assert span == 7_500 - 2_000  # first kernel start to last kernel end, launch gaps included
    _, fallback = clock.measure(lambda: None, 1)  # no kernel: the event time (0.25 ms)
    assert fallback == 250_000
    assert clock.notes == {"event_fallbacks": 1, "kernels_per_call": [2, 0]}


def test_cupti_request_without_cupti_falls_back_to_events_and_says_so(monkeypatch):
    made = []

    class Events:
        def __init__(self, flush_bytes):
            made.append(flush_bytes)
            self.notes = {}

        def warm(self):
            made.append("warm")

    monkeypatch.setattr(driver, "_CudaEventClock", Events)
    monkeypatch.setattr(
        driver, "_CuptiClock", lambda flush_bytes: (_ for _ in ()).throw(ImportError("cupti"))
    )
    clock = driver._make_clock({"timer": "cupti", "flush_bytes": 64})
    assert isinstance(clock, Events) and made == [64, "warm"] and "ImportError" in clock.notes["cupti_error"]
    assert isinstance(driver._make_clock({"timer": "cpu", "flush_bytes": 64}), driver._CpuClock)


# ---------------------------------------------------------------------------------------------------------
# triton under the interpreter (CPU)
# ---------------------------------------------------------------------------------------------------------

try:  # Triton 3.4-3.6's interpreter fails on numpy 2 (see tests/methods/snapmla/test_snapmla_triton.py)
    import triton

    INTERPRETER_WORKS = tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (3, 7)
except ImportError:  # pragma: no cover - triton is a test dependency
    INTERPRETER_WORKS = False


@pytest.mark.skipif(CUDA or not INTERPRETER_WORKS, reason="the interpreter path is the no-CUDA path")
@pytest.mark.parametrize("problem_name, axes", [("rmsnorm", {"tokens": 8}), ("softmax", {"rows": 8})])
def test_triton_solution_runs_under_the_interpreter(bench, problem_name, axes):
    honest = triton_solution(problem_name)
    result = bench.evaluate(_small(problem_name, **axes), honest)
    evaluation = result.traces[0].evaluation
    assert result.statuses == ["PASSED"], evaluation.log
    assert evaluation.timing["backend"] == "triton-interpreter" and evaluation.timing["meaningful"] is False
    # the same kernel with its normalisation dropped must fail the numerical check
    broken_source = honest.sources[0].content
    broken_source = broken_source.replace("x * scale * w", "x * w").replace("e / tl.sum(e, axis=0)", "e")
    broken = honest.model_copy(
        update={"sources": [honest.sources[0].model_copy(update={"content": broken_source})]}
    )
    assert broken_source != honest.sources[0].content
    assert bench.evaluate(_small(problem_name, **axes), broken).statuses == ["INCORRECT_NUMERICAL"]


@pytest.mark.skipif(not INTERPRETER_WORKS, reason="needs Triton >= 3.7's interpreter")
def test_readme_gpu_language_snippet_runs():
    import re

    text = (Path(__file__).parents[3] / "src/neurips26/methods/solexecbench/README.md").read_text()
    snippet = re.findall(r"```python\n(.*?)```", text, re.S)[1]  # the GPU languages without a GPU
    assert "triton_solution" in snippet
    exec(compile(snippet, "README.md", "exec"), {})


@pytest.mark.skipif(CUDA, reason="checks the behaviour without CUDA")
def test_triton_without_interpreter_is_a_clear_compile_error():
    with SolExecBench(SolExecBenchConfig(**FAST, triton_interpreter=False)) as harness:
        result = harness.evaluate(_small("softmax", rows=8), triton_solution("softmax"))
    assert result.statuses == ["COMPILE_ERROR"] and "needs CUDA" in result.traces[0].evaluation.log


# ---------------------------------------------------------------------------------------------------------
# safetensors inputs
# ---------------------------------------------------------------------------------------------------------


STORED = "data/inputs.safetensors"


def _safetensors_problem(tmp_path: Path, x_path: str = STORED, **tensors) -> Path:
    from safetensors.torch import save_file

    definition, _ = build_problems()["rmsnorm"]
    root = tmp_path / "rmsnorm_stored"
    (root / "data").mkdir(parents=True)
    stored = {"x": torch.full((4, 1024), 2.0), "norm_weight": torch.full((1024,), 3.0)} | tensors
    save_file(stored, str(root / "data" / "inputs.safetensors"))
    (root / "definition.json").write_text(json.dumps(definition))
    workload = {
        "uuid": "stored-0",
        "axes": {"tokens": 4},
        "inputs": {
            "x": {"type": "safetensors", "path": x_path, "tensor_key": "x"},
            "norm_weight": {
                "type": "safetensors",
                "path": "data/inputs.safetensors",
                "tensor_key": "norm_weight",
            },
            "eps": {"type": "scalar", "value": 1e-6},
        },
        "tolerance": {"max_atol": 1e-4, "max_rtol": 1e-4},
    }
    (root / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    return root


def test_safetensors_inputs_reach_the_solution(tmp_path, bench):
    problem = load_problem(_safetensors_problem(tmp_path))
    # rmsnorm of a constant 2 row with weight 3 is exactly 3: a solution that only writes 3 passes only if
    # the stored values (not random ones) were its inputs
    constant = make_solution(
        "rmsnorm", "rmsnorm-constant", "def run(x, norm_weight, eps, y):\n    y.fill_(3.0)\n"
    )
    assert bench.evaluate(problem, constant).statuses == ["PASSED"]
    assert bench.evaluate(problem, ladder_solution("rmsnorm", "fused")).statuses == ["PASSED"]
    # a stored input is copied for every call: mutating it is still caught
    assert bench.evaluate(problem, red_team_solution("rmsnorm", "input_mutation")).statuses == ["REWARD_HACK"]


@pytest.mark.parametrize(
    "x_path, tensors, message",
    [
        ("../inputs.safetensors", {}, "must not contain '..'"),
        ("/etc/passwd", {}, "relative path inside the problem directory"),
        ("s3://bucket/x.safetensors", {}, "relative path inside the problem directory"),
        ("data/missing.safetensors", {}, "not found"),
        ("link.safetensors", {}, "resolves outside the problem directory"),
        ("data/inputs.safetensors", {"x": torch.zeros(4, 512)}, r"stored shape \[4, 512\]"),
        ("data/inputs.safetensors", {"x": torch.zeros(4, 1024, dtype=torch.float16)}, "stored dtype"),
    ],
)
def test_bad_safetensors_inputs_name_the_field(tmp_path, x_path, tensors, message):
    root = _safetensors_problem(tmp_path, x_path, **tensors)
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(b"")
    os.symlink(outside, root / "link.safetensors")
    with pytest.raises(FormatError, match=message) as caught:
        load_problem(root)
    assert "workload.jsonl: workload 'stored-0' field 'inputs.x" in str(caught.value)


def test_missing_tensor_key_is_named(tmp_path):
    root = _safetensors_problem(tmp_path)
    lines = (root / "workload.jsonl").read_text().replace('"tensor_key": "x"', '"tensor_key": "q"')
    (root / "workload.jsonl").write_text(lines)
    with pytest.raises(FormatError, match=r"tensor_key 'q' is not in inputs\.safetensors"):
        load_problem(root)


# ---------------------------------------------------------------------------------------------------------
# the real CUDA backend (skipped without CUDA)
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_bench():
    # flush_bytes 0: 2x the GPU's L2; more calls than honest_then_stale's 6 honest ones, so it turns stale
    gpu = {**FAST, "flush_bytes": 0, "warmup": 2, "min_reps": 5, "max_reps": 8}
    with SolExecBench(SolExecBenchConfig(**gpu, device="cuda")) as harness:
        yield harness


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_backend_times_the_ladder(gpu_bench):
    problem = _small("rmsnorm")
    result = gpu_bench.evaluate(problem, ladder_solution("rmsnorm", "fused"))
    evaluation = result.traces[0].evaluation
    assert result.statuses == ["PASSED"], evaluation.log
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert evaluation.timing["backend"] in ("cupti", "cuda_events")
    assert evaluation.timing["flush_bytes"] == 2 * l2
    assert 0 < evaluation.performance.latency_ms < 50 and 0 < result.summary["mean_sol_score"] <= 1


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("make", [triton_solution, cuda_solution], ids=["triton", "cuda_cpp"])
def test_gpu_languages_pass_on_cuda(gpu_bench, make):
    for name in ("rmsnorm", "softmax"):
        result = gpu_bench.evaluate(_small(name), make(name))
        assert result.statuses == ["PASSED"], result.traces[0].evaluation.log
        assert result.traces[0].evaluation.timing["backend"] in ("cupti", "cuda_events")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("family", ["honest_then_stale", "input_mutation", "lazy_subclass", "shape_hardcode"])
def test_red_team_is_caught_on_cuda(gpu_bench, family):
    result = gpu_bench.evaluate(_small("rmsnorm"), red_team_solution("rmsnorm", family))
    assert result.statuses[0] != "PASSED", family
