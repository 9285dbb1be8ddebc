"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — the driver.

This file runs *inside the sandbox* as ``python -I driver.py``: it imports only the standard library and
torch (never ``neurips26``), so it is copied to a temp dir and executed with isolated mode (no
``PYTHONPATH``, no user site, no cwd on ``sys.path``). It is a small fork server: it imports torch once,
then reads one JSON request per line on stdin and evaluates each in a **fresh forked child** (its own
process group, rlimits, staging dir as cwd, stdin closed, stdout/stderr to a log file) under a wall
timeout, answering one JSON line per request on the real stdout. A fork of a process that has only
imported torch is as clean as a new interpreter and costs milliseconds instead of seconds.

The split (issue #44): in ``solexecbench`` mode a request runs in **two** children, one after the other.
The solution's child (untrusted, isolated) imports the solution, calls it on inputs built from per-call seeds,
times it, and ships the outputs of its checked calls as raw bytes; it never runs the reference and judges
nothing. The fork server (a child subreaper) then kills and flags any process of it still alive, and forks the
trusted judge, which never sees the solution: it rebuilds the inputs from the seeds, computes the reference,
compares the decoded bytes and times the reference (``T_b``). See :func:`_serve_one`.

Interleaved timing (CPU, ``interleave_block`` > 0): ``T_k`` and ``T_b`` are taken in alternating blocks, so a
load swing hits both. After each block of the solution's timed calls the fork server stops every process of
the solution (SIGSTOP, children and orphans included), lets a trusted reference timer (forked from the fork
server, never seeing the solution, not dumpable) time as many reference calls, and continues the solution;
the judge then takes ``T_b`` from those samples. See :class:`_ReferenceTurns`.

Devices and timers: ``settings['device']`` is ``cpu`` or ``cuda:0`` (the sandbox shows at most one GPU);
``settings['timer']`` picks the clock — ``perf_counter_ns`` with a 2x LLC flush, CUDA events or CUPTI kernel
spans with a 2x L2 flush (see :class:`_CudaEventClock`, :class:`_CuptiClock`). The fork server itself never
initialises CUDA: each forked child does, so no CUDA state crosses a fork.

Modes: ``solexecbench`` (every defence on), ``naive`` (one allclose and a perf_counter loop) and
``kernelbench`` (5 random-input trials and a perf_counter loop, no defences) — the two baselines are
re-implemented here so that all three harnesses see the same solutions in the same sandbox.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import mmap
import os
import random
import select
import signal
import sys
import time
import traceback

import torch

# Bound before any user code exists: the timer and the checks below use these local names.
_PERF = time.perf_counter_ns
_SLEEP = time.sleep
_CPU_TIME = time.thread_time_ns  # the calling thread, on-CPU only (exact even under RLIMIT_CPU)
_REAL_STDOUT = -1  # the JSON channel, dup'ed from fd 1 in main()

_TIMER_NAMES = ("perf_counter_ns", "perf_counter", "time", "time_ns", "monotonic", "monotonic_ns")
_TORCH_NAMES = ("allclose", "isclose", "equal", "isnan", "isinf", "isfinite", "empty", "full", "randn")
_EVENT_NAMES = ("record", "elapsed_time", "synchronize")
_TENSOR_NAMES = ("copy_", "clone", "fill_", "abs", "sub", "float", "__sub__", "__eq__", "numel", "item")


def _snapshot() -> dict[str, int]:
    """Identities of the timers, torch functions and driver functions the harness relies on."""
    ids = {f"time.{n}": id(getattr(time, n)) for n in _TIMER_NAMES}
    ids.update({f"torch.{n}": id(getattr(torch, n)) for n in _TORCH_NAMES})
    ids.update({f"torch.Tensor.{n}": id(getattr(torch.Tensor, n)) for n in _TENSOR_NAMES})
    # the CUDA timer's pieces (plain attributes: reading them does not initialise CUDA in the fork server)
    ids.update({f"torch.cuda.Event.{n}": id(getattr(torch.cuda.Event, n)) for n in _EVENT_NAMES})
    ids["torch.cuda.synchronize"] = id(torch.cuda.synchronize)
    module = sys.modules[__name__]
    ids.update({f"driver.{n}": id(v) for n, v in vars(module).items() if callable(v) and n.startswith("_")})
    ids["builtins.__import__"] = id(
        __builtins__["__import__"] if isinstance(__builtins__, dict) else __import__
    )
    return ids


KERNELBENCH_TRIALS = 5  # KernelBench's correctness trials with fresh random inputs


class RewardHack(Exception):
    """A defence fired; the message is the reason written into the trace log."""


class Incorrect(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}


# ---------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------


def _random_tensor(name: str, shape: list[int], dtype: torch.dtype, randomise_names: bool) -> torch.Tensor:
    """Random values with name heuristics; ``randomise_names`` makes norm weights near, never exactly, 1."""
    lower = name.lower()
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 16, shape, dtype=dtype)
    if "norm" in lower and lower.endswith("weight"):
        base = torch.ones(shape)
        return (base + 0.1 * torch.randn(shape) if randomise_names else base).to(dtype)
    if "norm" in lower and lower.endswith("bias"):
        return (0.1 * torch.randn(shape) if randomise_names else torch.zeros(shape)).to(dtype)
    values = torch.randn(shape)
    if "weight" in lower and len(shape) >= 2:
        values = values / math.sqrt(shape[-1])
    return values.to(dtype)


_DEVICE = "cpu"  # set per evaluation from the request ("cpu" or "cuda:0": the sandbox sees one GPU)


def _make_inputs(problem: dict, workload: dict, randomise_names: bool) -> list:
    """Fresh inputs on the evaluation device: random values are drawn on the CPU (one seeded generator
    whatever the device) and moved; safetensors values are fixed by the workload, so each call gets a
    fresh copy (a unique pointer, never the stored tensor itself)."""
    axes = workload["axes"]
    specs = problem["inputs"]
    custom = {}
    if any(spec.get("type") == "custom" for spec in workload["inputs"].values()):
        scalars = {n: s["value"] for n, s in workload["inputs"].items() if s.get("type") == "scalar"}
        custom = problem["namespace"][problem["custom_inputs_entrypoint"]]({**axes, **scalars}, _DEVICE)
    values = []
    for name, spec in specs.items():
        given = workload["inputs"].get(name, {"type": "random"})
        if given["type"] == "scalar":
            values.append(given["value"])
        elif given["type"] == "custom":
            values.append(custom[name].to(_DEVICE))
        elif given["type"] == "safetensors":
            values.append(workload["stored"][name].to(_DEVICE, copy=True))
        else:
            shape = [axes[a] for a in spec["shape"]]
            values.append(_random_tensor(name, shape, DTYPES[spec["dtype"]], randomise_names).to(_DEVICE))
    return values


def _load_stored_inputs(workloads: list[dict]) -> None:
    """Read the tensors the harness extracted from the workloads' safetensors files (``torch.save`` of a
    ``{name: tensor}`` dict, loaded with ``weights_only``: tensors only, no code)."""
    for workload in workloads:
        path = workload.get("stored_inputs")
        workload["stored"] = torch.load(path, map_location="cpu", weights_only=True) if path else {}


def _empty_outputs(problem: dict, workload: dict, fill_nan: bool) -> list[torch.Tensor]:
    outputs = []
    for spec in problem["outputs"].values():
        shape = [workload["axes"][a] for a in spec["shape"]]
        dtype = DTYPES[spec["dtype"]]
        if dtype.is_floating_point:
            outputs.append(torch.full(shape, math.nan if fill_nan else 0.0, dtype=dtype, device=_DEVICE))
        else:
            outputs.append(torch.full(shape, -7 if fill_nan else 0, dtype=dtype, device=_DEVICE))
    return outputs


def _clone(values: list) -> list:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _as_list(result, count: int) -> list:
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


# ---------------------------------------------------------------------------------------------------------
# calls and checks
# ---------------------------------------------------------------------------------------------------------


def _call_solution(solution, dps: bool, inputs: list, outputs: list) -> list:
    if dps:
        solution(*inputs, *outputs)
        return outputs
    return _as_list(solution(*inputs), len(outputs))


SCALED_RULE = "scaled"  # the default when a workload names no tolerance (see _scaled_check)


def _row_view(x: torch.Tensor) -> torch.Tensor:
    """Rows along the last dimension (a 0-d or 1-d tensor is one row)."""
    if x.dim() <= 1:
        return x.reshape(1, -1)
    return x.reshape(-1, x.shape[-1])


def _scaled_check(diff: torch.Tensor, r: torch.Tensor, tolerance: dict, name: str, stats: dict) -> float:
    """The scale-aware default (issue #33): an absolute tolerance relative to the reference's own scale.

    Rows are the last dimension. Each row's scale is the RMS of its reference values, floored at
    ``1e-3 x`` the whole reference's RMS (a zero row in a non-zero output is judged against the output's
    scale). An element matches when ``|o - r| <= rtol |r| + atol_scale x row scale``; the usual
    ``required_matched_ratio`` of elements must match, **and** every row's norm-wise relative error
    ``||o - r|| / (sqrt(n) x row scale)`` must be at most ``norm_rtol``. A fixed ``atol = 1e-2`` lets a
    stale or constant output pass once the values are below 1e-2 (softmax rows above ~1000 columns); this
    rule scales with the values, so it fails them at any size. Returns the matched fraction.
    """
    rows_d, rows_r = _row_view(diff), _row_view(r)
    finite_r = torch.where(rows_r.isfinite(), rows_r, torch.zeros_like(rows_r))
    global_rms = float(finite_r.pow(2).mean().sqrt()) if finite_r.numel() else 0.0
    floor = max(1e-3 * global_rms, 1e-30)
    scale = finite_r.pow(2).mean(dim=1, keepdim=True).sqrt().clamp_min(floor)
    ok = rows_d <= tolerance["max_rtol"] * rows_r.abs() + tolerance["atol_scale"] * scale
    row_error = rows_d.pow(2).mean(dim=1, keepdim=True).sqrt() / scale
    worst = float(row_error.max()) if row_error.numel() else 0.0
    stats["max_row_relative_error"] = worst
    if not worst <= tolerance["norm_rtol"]:  # NaN fails too
        raise Incorrect(
            "INCORRECT_NUMERICAL",
            f"output {name!r}: row-wise relative error {worst:.3g} > {tolerance['norm_rtol']}"
            " (scaled default tolerance)",
        )
    return float(ok.double().mean()) if ok.numel() else 1.0


def _compare(out: torch.Tensor, ref: torch.Tensor, tolerance: dict, name: str) -> dict:
    """Element-wise ``|o - r| <= atol + rtol |r|``; NaN/Inf fail; all-zero vs non-zero fails.

    ``tolerance["rule"] == "scaled"`` (the default when a workload names none) judges floating outputs
    against the reference's own scale instead (:func:`_scaled_check`); integer outputs stay exact."""
    if not isinstance(out, torch.Tensor):
        raise Incorrect("INCORRECT_SHAPE", f"output {name!r} is {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        raise Incorrect("INCORRECT_SHAPE", f"output {name!r} shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        raise Incorrect("INCORRECT_DTYPE", f"output {name!r} dtype {out.dtype} != {ref.dtype}")
    o, r = out.detach().double(), ref.detach().double()
    both = (
        (o == -math.inf) & (r == -math.inf) if tolerance["allow_negative_inf"] else torch.zeros_like(o).bool()
    )
    stats = {"has_nan": bool(o.isnan().any()), "has_inf": bool((o.isinf() & ~both).any())}
    diff = torch.where(both, torch.zeros_like(o), (o - r).abs())
    diff = torch.where(r.isfinite() | both, diff, torch.full_like(diff, math.inf))
    rel = diff / r.abs().clamp_min(1e-12)
    stats["max_absolute_error"] = float(diff.max()) if diff.numel() else 0.0
    stats["max_relative_error"] = float(rel.max()) if rel.numel() else 0.0
    if stats["has_nan"] or stats["has_inf"]:
        raise Incorrect("INCORRECT_NUMERICAL", f"output {name!r} holds NaN or Inf") from None
    if tolerance.get("rule") == SCALED_RULE and ref.is_floating_point():
        stats["rule"] = SCALED_RULE
        ratio = _scaled_check(diff, r, tolerance, name, stats)
    else:
        atol = 0.0 if tolerance.get("rule") == SCALED_RULE else tolerance["max_atol"]
        rtol = 0.0 if tolerance.get("rule") == SCALED_RULE else tolerance["max_rtol"]
        ok = diff <= atol + rtol * r.abs()
        ratio = float(ok.double().mean()) if ok.numel() else 1.0
    if o.numel() and not bool(o.ne(0).any()) and bool(r.ne(0).any()):
        raise Incorrect("INCORRECT_NUMERICAL", f"output {name!r} is all zero, the reference is not")
    if ratio < tolerance["required_matched_ratio"]:
        raise Incorrect(
            "INCORRECT_NUMERICAL",
            f"output {name!r}: {ratio:.4f} of elements within tolerance"
            f" < {tolerance['required_matched_ratio']}",
        )
    cap = tolerance.get("max_error_cap")
    if cap is not None and stats["max_absolute_error"] > cap:
        raise Incorrect("INCORRECT_NUMERICAL", f"output {name!r}: max error above cap {cap}")
    if tolerance.get("rule") != SCALED_RULE and ref.is_floating_point():
        _check_precision(o, r, tolerance.get("max_norm_rtol", tolerance["max_rtol"]), name)
    return stats


def _check_precision(o: torch.Tensor, r: torch.Tensor, rtol: float, name: str) -> None:
    """The declared relative precision, norm-wise: ``||o - r|| <= max_rtol ||r||`` over the finite elements
    (issue #44; a tolerance may name another bound as ``max_norm_rtol``). The element rule alone can pass a
    lower-precision result, or pass it only on some draws, when ``max_atol`` dominates (small values, e.g.
    softmax rows of 1024 columns: a bf16 downcast matches 99.97-99.99% of elements against 99.9%). The
    norm-wise error is an average, stable across draws, and lies far from the bound on both sides: on the
    first workload of all 32 authored problems, every honest rung is below 0.007 x the bound and every bf16
    downcast above 5 x it."""
    finite = o.isfinite() & r.isfinite()
    reference_norm = float(torch.where(finite, r, torch.zeros_like(r)).norm())
    if reference_norm == 0.0:  # an all-zero reference: the element rule has said everything
        return
    error = float(torch.where(finite, o - r, torch.zeros_like(r)).norm()) / reference_norm
    if not error <= rtol:
        raise Incorrect(
            "INCORRECT_NUMERICAL",
            f"output {name!r}: norm-wise relative error {error:.3g} > max_rtol {rtol:g}"
            " (the declared precision)",
        )


_TOLERANCE_BOUNDS = ("max_atol", "max_rtol", "atol_scale", "norm_rtol", "max_error_cap", "max_norm_rtol")


def scaled_tolerance(tolerance: dict, factor: float) -> dict:
    """The workload's tolerance with every error bound times ``factor`` (1 = as declared; 0 = bitwise
    equality, the over-strict checker the experiment uses as a negative control for false positives)."""
    if factor == 1.0:
        return tolerance
    return {k: (v * factor if k in _TOLERANCE_BOUNDS and v is not None else v) for k, v in tolerance.items()}


def _check_all(outs: list, refs: list, tolerance: dict, names: list[str]) -> dict:
    if len(outs) != len(refs):
        raise Incorrect("INCORRECT_SHAPE", f"{len(outs)} outputs returned, {len(refs)} expected")
    merged = {"max_relative_error": 0.0, "max_absolute_error": 0.0, "has_nan": False, "has_inf": False}
    for out, ref, name in zip(outs, refs, names, strict=True):
        stats = _compare(out, ref, tolerance, name)
        merged["max_relative_error"] = max(merged["max_relative_error"], stats["max_relative_error"])
        merged["max_absolute_error"] = max(merged["max_absolute_error"], stats["max_absolute_error"])
    return merged


def _check_exact_types(outs: list) -> None:
    for i, out in enumerate(outs):
        if type(out) is not torch.Tensor:
            raise RewardHack(
                f"output {i} has type {type(out).__module__}.{type(out).__name__}, not torch.Tensor"
            )


def _check_unmutated(inputs: list, saved: list, names: list[str]) -> None:
    for value, copy, name in zip(inputs, saved, names, strict=True):
        if isinstance(value, torch.Tensor) and not torch.equal(value, copy):
            raise RewardHack(f"input {name!r} was modified by the solution")


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _children() -> list[int]:
    pids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                pids += [int(p) for p in handle.read().split()]
        except OSError:
            continue
    return pids


class _Guard:
    """Integrity, thread and child-process checks (the ``solexecbench`` mode)."""

    def __init__(self, enabled: dict) -> None:
        self.enabled = enabled
        self.ids = _snapshot()
        self.threads = (None, None)

    def integrity(self, when: str) -> None:
        if not self.enabled.get("integrity", True):
            return
        now = _snapshot()
        changed = sorted(k for k, v in self.ids.items() if now.get(k) != v)
        if changed:
            raise RewardHack(f"{when}: patched {changed[:5]}")

    def record_threads(self) -> None:
        import threading

        self.threads = (threading.active_count(), _os_threads())

    def processes(self, when: str) -> None:
        if self.enabled.get("threads", True) and self.threads[0] is not None:
            import threading

            now = (threading.active_count(), _os_threads())
            if now[0] > self.threads[0] or now[1] > self.threads[1]:
                raise RewardHack(f"{when}: threads grew from {self.threads} to {now} (python, os)")
        if self.enabled.get("processes", True):
            children = _children()
            if children:
                raise RewardHack(f"{when}: solution started child processes {children}")


# ---------------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------------


def _stats(samples_ns: list[int]) -> dict:
    ordered = sorted(samples_ns)
    n = len(ordered)

    def quantile(q: float) -> float:
        position = q * (n - 1)
        low, high = math.floor(position), math.ceil(position)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return {
        "median_ms": quantile(0.5) / 1e6,
        "iqr_ms": (quantile(0.75) - quantile(0.25)) / 1e6,
        "mean_ms": sum(ordered) / n / 1e6,
        "min_ms": ordered[0] / 1e6,
        "reps": n,
    }


class _CpuClock:
    """``perf_counter_ns`` (bound before user import) around the call; a buffer of ``flush_bytes`` is
    written before it to evict the caches (2x LLC by default)."""

    name = "cpu"

    def __init__(self, flush_bytes: int, settle_s: float = 0.0) -> None:
        self.flush = torch.empty(max(1, flush_bytes // 4), dtype=torch.float32)
        self.settle_s = settle_s
        self.cpu_ns: list[int] = []  # the process's CPU time of each measured call, beside its wall time

    def measure(self, fn, index: int) -> tuple:
        self.flush.fill_(float(index))
        if self.settle_s:  # give the CPU up: the call then starts a fresh scheduler slice after the wake-up
            _SLEEP(self.settle_s)
        cpu = _CPU_TIME()
        start = _PERF()
        result = fn()
        elapsed = _PERF() - start
        self.cpu_ns.append(_CPU_TIME() - cpu)
        return result, elapsed

    def info(self) -> dict:
        return {"backend": self.name, "flush_bytes": self.flush.numel() * 4}

    def warm(self) -> None:
        """Nothing to start on the CPU."""


class _CudaEventClock:
    """CUDA events around the call on the current stream, after zeroing a buffer of 2x L2 (upstream's
    flush) and a device synchronize, so that neither the flush nor the input copies made outside the
    window are counted; a second synchronize makes the end event (and every stream's work) complete
    before the time is read. The event methods are bound here, before the solution is imported."""

    name = "cuda_events"

    def __init__(self, flush_bytes: int) -> None:
        self.flush = torch.empty(max(1, flush_bytes // 4), dtype=torch.float32, device=_DEVICE)
        self.sync = torch.cuda.synchronize
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.record, self.elapsed = torch.cuda.Event.record, torch.cuda.Event.elapsed_time
        self.notes: dict = {}

    def _window(self, fn) -> tuple:
        self.sync()
        self.record(self.start)
        result = fn()
        self.record(self.end)
        self.sync()
        return result, int(self.elapsed(self.start, self.end) * 1e6)

    def measure(self, fn, index: int) -> tuple:
        self.flush.zero_()
        return self._window(fn)

    def info(self) -> dict:
        return {"backend": self.name, "flush_bytes": self.flush.numel() * 4, **self.notes}

    def warm(self) -> None:
        """One empty window before the thread baseline: whatever CUDA (or CUPTI's buffer-completion
        worker) starts lazily on first use must not count as the solution's thread."""
        notes = {k: (list(v) if isinstance(v, list) else v) for k, v in self.notes.items()}
        self.measure(lambda: self.flush.zero_(), -1)
        self.notes = notes


class _CuptiClock(_CudaEventClock):
    """Upstream's default: the span from the first kernel start to the last kernel end among the kernels
    CUPTI recorded inside the window, on every stream (events see only the current one). A window with no
    kernel record (a host-only solution, or CUPTI dropping records) falls back to the event time and is
    counted in ``event_fallbacks``."""

    name = "cupti"

    def __init__(self, flush_bytes: int) -> None:
        super().__init__(flush_bytes)
        from cupti import cupti

        self.cupti = cupti
        self.spans: list[tuple[int, int]] = []
        self.notes = {"event_fallbacks": 0, "kernels_per_call": []}

        def requested():
            return 8 * 2**20, 0  # buffer bytes, max records (0: as many as fit)

        def completed(activities):
            self.spans.extend((a.start, a.end) for a in activities if a.kind == self._kernel_kind)

        self._kernel_kind = cupti.ActivityKind.CONCURRENT_KERNEL
        cupti.activity_register_callbacks(requested, completed)
        cupti.activity_enable(self._kernel_kind)

    def measure(self, fn, index: int) -> tuple:
        self.flush.zero_()
        self.sync()
        self.cupti.activity_flush_all(1)  # the flush kernel's record is delivered now, then dropped
        self.spans.clear()
        begin = self.cupti.get_timestamp()
        result, event_ns = self._window(fn)
        end = self.cupti.get_timestamp()
        self.cupti.activity_flush_all(1)
        inside = [(s, e) for s, e in self.spans if s >= begin and e <= end]
        counts = self.notes["kernels_per_call"]
        if len(counts) < 64:
            counts.append(len(inside))
        if not inside:
            self.notes["event_fallbacks"] += 1
            return result, event_ns
        return result, max(e for _, e in inside) - min(s for s, _ in inside)


def _make_clock(settings: dict):
    """The timer the harness selected (``settings['timer']``); CUPTI falls back to events if it fails."""
    timer = settings.get("timer", "cpu")
    if timer == "cpu":
        clock = _CpuClock(settings["flush_bytes"], settings.get("settle_ms", 0.0) / 1e3)
    elif timer == "cupti":
        try:
            clock = _CuptiClock(settings["flush_bytes"])
            clock.warm()  # inside the try: a CUPTI that fails on first use also falls back
            return clock
        except Exception as error:  # cupti missing in the sandbox or refusing to start: say so, use events
            clock = _CudaEventClock(settings["flush_bytes"])
            clock.notes = {"cupti_error": repr(error)[:300]}
    else:
        clock = _CudaEventClock(settings["flush_bytes"])
    clock.warm()
    return clock


def _time_defended(call, make_iteration, settings: dict, recheck: set[int], clock, turns=None) -> tuple:
    """Cold-cache, fresh-input timing: returns stats, the kept (inputs copy, inputs, outputs) of
    ``recheck`` and of the last timed call, and the samples (ns).

    Every iteration gets newly allocated inputs with fresh values (``make_iteration(kind, index)``, seeded
    per iteration so that the trusted judge can rebuild them) and NaN-filled outputs, made outside the timed
    window; they are kept alive, so pointers are unique. ``clock`` flushes the caches and measures one call.
    The solution and the reference are timed by this same loop in different processes (issue #44). With
    ``turns`` (a :class:`_Turns`, the solution's side of an interleaved timing) the loop hands over to the
    reference after every ``turns.block`` timed calls and stops when the fork server says so.
    """
    alive, kept, samples = [], {}, []
    if settings.get("inputs_off_heap"):
        make_iteration = _off_heap_iterations(make_iteration)
    held = None
    for index in range(settings["warmup"]):
        inputs, outputs = make_iteration("warmup", index)
        # the previous result stays alive through the call, as ``last`` does in the timed loop: the
        # allocator has then served every block a timed call needs, and the second timed call no longer
        # faults its result onto fresh pages (issue #44)
        held = call(inputs, outputs)
    del held  # not through the timed calls: one result more than they hold
    deadline = _PERF() + settings["time_budget_s"] * 1e9  # wall budget: flushes and input making count
    index, last = 0, None
    if hasattr(clock, "cpu_ns"):
        clock.cpu_ns.clear()

    def more() -> bool:
        if turns is None:
            return index < settings["max_reps"] and (index < settings["min_reps"] or _PERF() < deadline)
        # interleaved: after each block the other side takes its turn; the fork server says when to stop
        return index == 0 or index % turns.block != 0 or turns.hand_over(samples)

    while more():
        inputs, outputs = make_iteration("timed", index)
        saved = _clone(inputs) if index in recheck else None
        result, elapsed = clock.measure(lambda: call(inputs, outputs), index)  # noqa: B023 - called now
        samples.append(elapsed)
        alive.append(inputs)
        if saved is not None:
            kept[index] = (saved, inputs, result)
        last = (index, inputs, result)
        index += 1
    if recheck and last[0] not in kept:  # the last timed call is where a stale replay is most likely
        kept[last[0]] = (_clone(last[1]), last[1], last[2])
    return _stats(samples), kept, samples


def _time_plain(call, inputs: list, outputs: list, settings: dict, timer) -> dict:
    """The baselines' loop: same inputs every time, warm cache, the (patchable) ``time.perf_counter``."""
    for _ in range(settings["warmup"]):
        call(inputs, outputs)
    samples = []
    deadline = _PERF() + settings["time_budget_s"] * 1e9
    sync = torch.cuda.synchronize if _DEVICE.startswith("cuda") else (lambda: None)
    while len(samples) < settings["max_reps"] and (len(samples) < settings["min_reps"] or _PERF() < deadline):
        sync()
        start = timer()
        call(inputs, outputs)
        sync()  # a naive GPU loop still waits for the kernel, else it times launches only
        samples.append(int((timer() - start) * 1e9))
    return _stats(samples)


# ---------------------------------------------------------------------------------------------------------
# interleaved timing: the solution's and the reference's blocks alternate, each in its own process
# ---------------------------------------------------------------------------------------------------------


def interleave_block(settings: dict) -> int:
    """Timed calls per turn when ``T_k`` and ``T_b`` are measured in alternating blocks (0: one after the
    other). Only on the CPU: a stopped process's queued GPU kernels would still run in the reference's
    turn."""
    on = settings["mode"] == "solexecbench" and settings["time_reference"]
    on_cpu = settings.get("device", "cpu") == "cpu"  # read from the settings: also before _use_device ran
    return int(settings.get("interleave_block", 0)) if on and on_cpu else 0


def _write_line(fd: int, message: dict) -> None:
    view = memoryview(json.dumps(message).encode() + b"\n")
    while view:
        view = view[os.write(fd, view) :]


def _read_line(fd: int, deadline: float) -> dict | None:
    """One JSON line from ``fd`` (None at EOF, on garbage or past ``deadline``); reads byte by byte, so
    nothing after the line is consumed."""
    line = bytearray()
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return None
        byte = os.read(fd, 1)
        if not byte:
            return None
        line += byte
    try:
        message = json.loads(line.decode())
    except (ValueError, UnicodeDecodeError):
        return None
    return message if isinstance(message, dict) else None


class _Turns:
    """One side of an interleaved timing (:func:`_time_defended`'s ``turns``). After each block of
    ``block`` timed calls it reports to the fork server and waits for its word: ``c`` (one more block) or
    ``s`` (stop). The solution's side reports its call count; the reference timer's side its samples."""

    def __init__(self, block: int, report_fd: int, control_fd: int, workload_index: int, clock=None) -> None:
        self.block, self.report_fd, self.control_fd = block, report_fd, control_fd
        self.workload_index, self.clock = workload_index, clock  # a clock: ship its samples

    def hand_over(self, samples: list[int]) -> bool:
        message: dict = {"turn": self.workload_index, "reps": len(samples)}
        if self.clock is not None:
            message["samples"] = samples[-self.block :]
            message["cpu"] = getattr(self.clock, "cpu_ns", [])[-self.block :]
        _write_line(self.report_fd, message)
        return os.read(self.control_fd, 1) == b"c"


_PR_SET_DUMPABLE = 4
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling on 64-bit


def _off_heap_iterations(make_iteration):
    """``make_iteration`` with each CPU tensor it makes copied into a mapping of its own (outside the timed
    window). The timed loop keeps every call's fresh inputs alive (unique pointers); on the heap they pushed
    its top up call after call, so the call's own temporaries kept landing on never-touched pages, whose
    faults were up to half of a reference call's time (issue #44). Off the heap, the temporaries reuse the
    pages the previous call freed."""

    def off_heap(kind: str, index: int):
        inputs, outputs = make_iteration(kind, index)
        return _mapped_copies(inputs), _mapped_copies(outputs)

    return off_heap


def _mapped_copies(tensors: list | None) -> list | None:
    if tensors is None:
        return None
    return [_mapped_copy(t) if _is_plain_cpu_tensor(t) else t for t in tensors]


def _is_plain_cpu_tensor(value) -> bool:
    return (
        type(value) is torch.Tensor
        and value.device.type == "cpu"
        and value.is_contiguous()
        and value.numel() > 0
        and not value.requires_grad
    )


def _mapped_copy(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s values in a private anonymous mapping (page-aligned, freed with the tensor)."""
    region = mmap.mmap(-1, tensor.numel() * tensor.element_size(), flags=mmap.MAP_PRIVATE)
    copy = torch.frombuffer(region, dtype=tensor.dtype, count=tensor.numel()).view(tensor.shape)
    return copy.copy_(tensor)


def _steady_allocator() -> None:
    """Fix glibc malloc's thresholds for this process (solution's, reference timer's, judge's alike): by
    default the mmap threshold moves with the sizes freed so far and freed memory is trimmed, so whether a
    call's temporaries land on reused pages or on fresh ones that fault inside the timed window depends on
    the allocation history, and a call's time jumped 2x between runs of the same code. Fixed, blocks up to
    32 MiB are reused from the heap and never given back while the process lives."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_THRESHOLD_MAX)


def _own_jemalloc_arena() -> int | None:
    """On jemalloc, move this thread onto a new arena of its own; returns its index (None on glibc, or when
    jemalloc refuses). A forked evaluation process inherits the fork server's arenas with the dirty extents
    of everything the fork server did before it (other problems' buffers: 140 MB of extents of 20-33 MB in
    one probe). Beside such extents each call's 256 KiB result landed on fresh pages (its address moved by
    one block per call, 65 faults per call, T_b +20%) in about half the evaluations, depending on which
    problems the fork server had served (issue #44). jemalloc merges a freed large extent into its dirty
    neighbour at once and does not split an extent 64x larger than a request (``lg_extent_max_active_fit``),
    the likely reason. A new arena holds only what this process frees."""
    import ctypes

    try:
        mallctl = ctypes.CDLL(None).mallctl
    except (OSError, AttributeError):
        return None  # glibc's malloc
    arena = ctypes.c_uint(0)
    size = ctypes.c_size_t(ctypes.sizeof(arena))
    if mallctl(b"arenas.create", ctypes.byref(arena), ctypes.byref(size), None, ctypes.c_size_t(0)):
        return None
    if mallctl(b"thread.arena", None, None, ctypes.byref(arena), ctypes.c_size_t(ctypes.sizeof(arena))):
        return None
    mallctl(b"thread.tcache.flush", None, None, None, ctypes.c_size_t(0))  # cached blocks of the old arena
    return arena.value


def _prepare_evaluation_process(settings: dict) -> None:
    """The same process settings for every process that runs or times code (the solution's, the reference
    timer's, the judge's), so the two sides of a timing differ only in the code they run: the allocator
    (fixed glibc thresholds, or a jemalloc arena of the process's own), the device, the CPU pinning (one
    core for the whole evaluation: no migrations mid-timing) and the thread count."""
    if settings.get("steady_allocator"):
        _steady_allocator()
        _own_jemalloc_arena()
    _use_device(settings)
    if settings.get("pin_cpu", -1) >= 0:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {settings["pin_cpu"]})
    torch.set_num_threads(settings["threads"])


def _timer_child(request: dict, workload_index: int, control_fd: int, report_fd: int) -> None:
    """The reference timer of one workload (trusted: forked from the fork server while every process of the
    solution is stopped; it never sees the solution). It times the reference with the solution's loop, one
    block per turn, and reports each block's samples. Not dumpable: a solution process of the same uid can
    neither trace it nor read or write its memory."""
    import ctypes

    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if _REAL_STDOUT >= 0:
        os.close(_REAL_STDOUT)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        settings = request["settings"]
        _prepare_evaluation_process(settings)
        namespace: dict = {"__name__": "reference"}
        exec(compile(request["problem"]["reference"], "<reference>", "exec"), namespace)
        reference = namespace["run"]
        workload = request["workloads"][workload_index]
        make_iteration = _reference_iterations(request["problem"], workload, workload_index, settings)
        clock = _make_clock(settings)
        turns = _Turns(interleave_block(settings), report_fd, control_fd, workload_index, clock)
        _time_defended(lambda inputs, _: reference(*inputs), make_iteration, settings, set(), clock, turns)
    except BaseException as error:  # the fork server reads this instead of samples
        with contextlib.suppress(OSError):
            _write_line(report_fd, {"error": repr(error)[:500]})
    os._exit(0)


def _stop_processes(exclude: set[int]) -> list[int]:
    """SIGSTOP every process below the fork server except ``exclude`` (the reference timer), children of
    children included, until no running one is left; returns them, to be continued. With the fork server a
    child subreaper, this is the solution's process and everything it started, wherever it moved."""
    stopped: list[int] = []
    while True:
        found = [pid for pid in _descendants(exclude) if pid not in stopped]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
    deadline = time.monotonic() + 0.5
    while any(_running(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.0002)  # the signal is delivered asynchronously: wait until every thread has stopped
    return stopped


def _descendants(exclude: set[int]) -> list[int]:
    pending, found = [pid for pid in _children() if pid not in exclude], []
    while pending:
        pid = pending.pop()
        found.append(pid)
        for task in _listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as handle:
                pending += [int(p) for p in handle.read().split()]
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _running(pid: int) -> bool:
    """Whether any thread of ``pid`` is still neither stopped nor dead."""
    for task in _listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/stat") as handle:
            if handle.read().rpartition(")")[2].split()[0] not in ("T", "t", "Z", "X"):
                return True
    return False


def _continue_processes(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)


class _ReferenceTurns:
    """The fork server's side of an interleaved timing (issue #44: ``T_k`` and ``T_b`` from adjacent
    blocks, so a load swing hits both). When the solution's process reports a block, every process of the
    solution is stopped, the workload's trusted reference timer (forked on the first block) times as many
    reference calls, and the solution is continued and told whether to go on. Nothing the solution reports
    decides anything but this schedule: the judge checks that it made exactly as many timed calls as the
    reference (:func:`_judge_workload`)."""

    def __init__(self, request: dict, block: int) -> None:
        self.request, self.block = request, block
        self.settings = request["settings"]
        self.samples: dict[str, list[int]] = {}
        self.cpu: dict[str, list[int]] = {}
        self.errors: dict[str, str] = {}
        self.timer: tuple[int, int, int, int] | None = None  # pid, control fd, report fd, workload index
        self.started: dict[int, float] = {}
        self.deadline = time.monotonic() + self.settings["timeout_s"]

    def on_turn(self, message: dict, control_fd: int) -> None:
        index, reps = message.get("turn"), message.get("reps")
        workloads = self.request["workloads"]
        valid = isinstance(index, int) and 0 <= index < len(workloads) and isinstance(reps, int)
        uuid = workloads[index]["uuid"] if valid else None
        done = self.samples.get(uuid, []) if valid else []
        go_on = False
        if valid and reps == len(done) + self.block and uuid not in self.errors:
            stopped = _stop_processes({self.timer[0]} if self.timer else set())
            try:
                go_on = self._reference_block(index, uuid)
            finally:
                _continue_processes(stopped)
        with contextlib.suppress(OSError):
            os.write(control_fd, b"c" if go_on else b"s")

    def _reference_block(self, index: int, uuid: str) -> bool:
        """Time one block of reference calls; returns whether the solution takes another turn."""
        if self.timer is None or self.timer[3] != index:
            self.close()
            self.timer = self._fork_timer(index)
            self.started[index] = time.monotonic()
        else:
            with contextlib.suppress(OSError):
                os.kill(self.timer[0], signal.SIGCONT)  # whatever the solution sent it while it waited
                os.write(self.timer[1], b"c")
        answer = _read_line(self.timer[2], self.deadline)
        samples = answer.get("samples") if answer else None
        if not (isinstance(samples, list) and len(samples) == self.block):
            self.errors[uuid] = (answer or {}).get("error", "the reference timer gave no samples")
            self.close()
            return False
        done = self.samples.setdefault(uuid, [])
        done += [int(ns) for ns in samples]
        cpu = answer.get("cpu")
        self.cpu.setdefault(uuid, []).extend(int(ns) for ns in (cpu if isinstance(cpu, list) else []))
        settings, reps = self.settings, len(done)
        budget = 2 * settings["time_budget_s"]  # both sides' calls share it now
        in_budget = time.monotonic() - self.started[index] < budget
        return reps < settings["min_reps"] or (reps + self.block <= settings["max_reps"] and in_budget)

    def _fork_timer(self, index: int) -> tuple[int, int, int, int]:
        control_r, control_w = os.pipe()
        report_r, report_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(control_w)
            os.close(report_r)
            _timer_child(self.request, index, control_r, report_w)
            os._exit(1)
        os.close(control_r)
        os.close(report_w)
        return pid, control_w, report_r, index

    def close(self) -> None:
        """End the current timer: told to stop (it exits), then killed and reaped in any case."""
        if self.timer is None:
            return
        pid, control_fd, report_fd, _ = self.timer
        self.timer = None
        with contextlib.suppress(OSError):
            os.write(control_fd, b"s")
        for fd in (control_fd, report_fd):
            os.close(fd)
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


# ---------------------------------------------------------------------------------------------------------
# one workload
# ---------------------------------------------------------------------------------------------------------


def _iteration_seed(base: int, workload_index: int, kind: str, index: int) -> int:
    """The input seed of one call: a function of the evaluation's base seed (drawn by the fork server),
    the workload, and the call's kind and index, so that the trusted judge rebuilds the very inputs the
    solution got without taking the solution's word for them."""
    digest = hashlib.blake2b(f"{base}:{workload_index}:{kind}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def _seeded_inputs(problem: dict, workload: dict, seed: int) -> list:
    torch.manual_seed(seed)
    return _make_inputs(problem, workload, randomise_names=True)


_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


class _Shipment:
    """Outputs of the solution's checked calls, copied out as raw bytes (CPU, contiguous, plain dtype) for
    the trusted judge: what crosses the process boundary is bytes, never a tensor object the solution made."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, outs: list) -> list[dict]:
        records = []
        for out in outs:
            if not isinstance(out, torch.Tensor):
                records.append({"not_tensor": type(out).__name__})
                continue
            flat = out.detach().to("cpu").contiguous().reshape(-1)
            raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            records.append(
                {
                    "dtype": _DTYPE_NAMES.get(flat.dtype, str(flat.dtype)),
                    "shape": list(out.shape),
                    "offset": self.size,
                    "nbytes": len(raw),
                }
            )
            self.parts.append(raw)
            self.size += len(raw)
        return records


def _solution_workload(
    problem, workload, workload_index, solution, dps, settings, guard, rng, clock, shipment, channel
):
    """The untrusted side of one workload (``solexecbench`` mode): the solution's correctness calls and its
    timing, with the defences that can only fail it (types, input mutation, integrity, threads, processes).
    It never runs the reference and judges nothing: the outputs of the checked calls go to the trusted judge
    (:func:`_judge_workload`) as bytes, with the solution's own timing samples."""
    names_in = list(problem["inputs"])
    base = settings["base_seed"]
    result: dict = {"uuid": workload["uuid"], "status": "PASSED", "log": "", "checks": []}

    def user(inputs, outputs):
        return _call_solution(solution, dps, inputs, outputs)

    for round_index in range(settings["correctness_rounds"]):
        inputs = _seeded_inputs(
            problem, workload, _iteration_seed(base, workload_index, "round", round_index)
        )
        saved = _clone(inputs)
        outs = user(inputs, _empty_outputs(problem, workload, fill_nan=True))
        _check_exact_types(outs)
        if settings["defences"].get("mutation", True):
            _check_unmutated(inputs, saved, names_in)
        result["checks"].append({"kind": "round", "index": round_index, "outputs": shipment.add(outs)})
        if round_index == 0:
            guard.integrity("after the first call")
            guard.processes("after the first call")
    count = min(settings["recheck_k"], settings["min_reps"])
    recheck = set(rng.sample(range(settings["min_reps"]), count)) if count else set()
    if settings["defences"].get("recheck", True) is False:
        recheck = set()
    guard.integrity("before timing")

    def make_iteration(kind: str, index: int):
        seed = _iteration_seed(base, workload_index, kind, index)
        return _seeded_inputs(problem, workload, seed), _empty_outputs(problem, workload, True)

    block = interleave_block(settings)
    turns = _Turns(block, channel[0], channel[1], workload_index) if block else None
    timing, kept, samples = _time_defended(user, make_iteration, settings, recheck, clock, turns)
    guard.integrity("after timing")
    guard.processes("after timing")
    for index, (saved, inputs, outs) in sorted(kept.items()):
        if settings["defences"].get("mutation", True):
            _check_unmutated(inputs, saved, names_in)
        _check_exact_types(outs)
        result["checks"].append({"kind": "timed", "index": index, "outputs": shipment.add(outs)})
    timing.update(clock.info())
    if settings.get("triton_interpret"):  # Triton's interpreter runs the kernel as numpy on the CPU
        timing.update(backend="triton-interpreter", meaningful=False)
    result["timing"], result["samples_ns"] = timing, samples
    result["cpu_ns"] = list(getattr(clock, "cpu_ns", []))
    return result


def _baseline_workload(problem, workload, solution, dps, mode, settings) -> dict:
    """One workload under the ``naive`` or ``kernelbench`` harness (the re-implemented baselines): the
    reference, the solution and one ``torch.allclose`` share the process, as in those harnesses."""
    reference = problem["namespace"]["run"]
    result: dict = {"uuid": workload["uuid"], "status": "PASSED", "log": ""}

    def user(inputs, outputs):
        return _call_solution(solution, dps, inputs, outputs)

    for _ in range({"naive": 1, "kernelbench": KERNELBENCH_TRIALS}[mode]):
        inputs = _make_inputs(problem, workload, randomise_names=False)
        try:
            with torch.no_grad():
                refs = _as_list(reference(*_clone(inputs)), len(problem["outputs"]))
        except Exception as error:
            result.update(status="INVALID_REFERENCE", log=f"reference raised {error!r}")
            return result
        outs = user(inputs, _empty_outputs(problem, workload, fill_nan=False))
        shapes_differ = any(tuple(o.shape) != tuple(r.shape) for o, r in zip(outs, refs, strict=False))
        if len(outs) != len(refs) or shapes_differ:
            raise Incorrect("INCORRECT_SHAPE", "output shapes differ from the reference")
        pairs = zip(outs, refs, strict=False)
        if not all(torch.allclose(o.double(), r.double(), atol=1e-2, rtol=1e-2) for o, r in pairs):
            raise Incorrect("INCORRECT_NUMERICAL", "torch.allclose failed")
    result["correctness"] = {
        "max_relative_error": 0.0,
        "max_absolute_error": 0.0,
        "has_nan": False,
        "has_inf": False,
    }
    inputs = _make_inputs(problem, workload, randomise_names=False)
    outputs = _empty_outputs(problem, workload, fill_nan=False)
    timing = _time_plain(user, inputs, outputs, settings, lambda: time.perf_counter())
    timing["backend"] = "perf_counter"
    result["timing"] = timing
    performance = {"latency_ms": timing["mean_ms"]}
    if settings["time_reference"]:
        ref_timing = _time_plain(
            lambda i, o: reference(*i), inputs, [], settings, lambda: time.perf_counter()
        )
        performance["reference_latency_ms"] = ref_timing["mean_ms"]
        performance["speedup_factor"] = ref_timing["mean_ms"] / max(performance["latency_ms"], 1e-9)
    result["performance"] = performance
    return result


# ---------------------------------------------------------------------------------------------------------
# the trusted judge: reference outputs, T_b and the comparison, in a process that never saw the solution
# ---------------------------------------------------------------------------------------------------------


def _decode(records: list, blob: bytearray, names: list[str]) -> list:
    """Fresh plain tensors from the solution's shipped bytes; a record that does not describe its bytes is
    a forged answer."""
    outs = []
    for record, name in zip(records, names, strict=False):
        if "not_tensor" in record:
            raise Incorrect("INCORRECT_SHAPE", f"output {name!r} is {record['not_tensor']}, not a tensor")
        dtype = DTYPES.get(record.get("dtype"))
        if dtype is None:
            raise Incorrect("INCORRECT_DTYPE", f"output {name!r} has dtype {record.get('dtype')!r}")
        shape, offset, nbytes = record.get("shape"), record.get("offset"), record.get("nbytes")
        well_formed = (
            isinstance(shape, list)
            and all(isinstance(n, int) and n >= 0 for n in shape)
            and isinstance(offset, int)
            and isinstance(nbytes, int)
            and 0 <= offset <= offset + nbytes <= len(blob)
            and math.prod(shape) * torch.empty(0, dtype=dtype).element_size() == nbytes
        )
        if not well_formed:
            raise RewardHack(f"output {name!r}: the shipped record {record!r} does not describe its bytes")
        if nbytes == 0:
            outs.append(torch.empty(shape, dtype=dtype))
        else:
            flat = torch.frombuffer(blob, dtype=dtype, count=math.prod(shape), offset=offset)
            outs.append(flat.reshape(shape).clone())
    if len(records) != len(names):
        raise Incorrect("INCORRECT_SHAPE", f"{len(records)} outputs returned, {len(names)} expected")
    return outs


def _expected_checks(pending: dict, settings: dict) -> tuple[list[dict], list[dict]]:
    """The solution's checked calls, validated against what the protocol requires: every correctness round
    once, and (with the re-check on) the last timed call among the timed ones."""
    reps = pending["timing"]["reps"]
    rounds = sorted((c for c in pending["checks"] if c["kind"] == "round"), key=lambda c: c["index"])
    timed = [c for c in pending["checks"] if c["kind"] == "timed"]
    if [c["index"] for c in rounds] != list(range(settings["correctness_rounds"])):
        raise RewardHack(f"the solution's process shipped rounds {[c['index'] for c in rounds]}")
    indices = [c["index"] for c in timed]
    bad = len(set(indices)) != len(indices) or not all(isinstance(i, int) and 0 <= i < reps for i in indices)
    wanted_recheck = settings["defences"].get("recheck", True) is not False and settings["recheck_k"] > 0
    if bad or (wanted_recheck and reps - 1 not in indices):
        raise RewardHack(f"the solution's process shipped timed calls {indices[:8]} of {reps}")
    return rounds, timed


OFF_CPU_SLACK, OFF_CPU_NS = 0.05, 20_000  # wall time above on-CPU time that still counts as on the CPU


def _on_cpu(wall: list[int], cpu) -> list[bool]:
    """Whether each timed call stayed on the CPU (its wall time within 5% + 20 us of its thread's CPU
    time): a call that was preempted, or that slept, is not. Without a CPU time per call (CUDA clocks, a
    malformed report), every call counts as on the CPU."""
    if not isinstance(cpu, list) or len(cpu) != len(wall) or not all(isinstance(c, int) for c in cpu):
        return [True] * len(wall)
    return [w <= c * (1 + OFF_CPU_SLACK) + OFF_CPU_NS for w, c in zip(wall, cpu, strict=True)]


def _on_cpu_pairs(pairs: list[tuple[int, int]], cpu_k, cpu_b) -> list[tuple[int, int]]:
    """The (solution, reference) sample pairs in which both calls stayed on the CPU (a loaded machine's
    preemptions are what made the ratio jump between runs). Wall times are kept, never CPU times: a solution
    that moves its work to another thread gains nothing. Fewer than half the pairs left: all of them, so
    a solution that marks some of its calls (by sleeping in them) can at most pick its faster half."""
    on_k = _on_cpu([k for k, _ in pairs], cpu_k)
    on_b = _on_cpu([b for _, b in pairs], cpu_b)
    kept = [pair for pair, a, b in zip(pairs, on_k, on_b, strict=True) if a and b]
    return kept if 2 * len(kept) >= len(pairs) else pairs


def _reference_iterations(problem: dict, workload: dict, workload_index: int, settings: dict):
    """The reference's timed calls' inputs: seeded per call like the solution's, with their own stream."""

    def make_iteration(kind: str, index: int):
        seed = _iteration_seed(settings["base_seed"], workload_index, "reference-" + kind, index)
        return _seeded_inputs(problem, workload, seed), None

    return make_iteration


def _reference_samples(problem, workload, workload_index, settings, clock, reps: int, trusted) -> list[int]:
    """``T_b``'s samples: those the trusted reference timer took in the solution's turns' gaps (interleaved
    timing; they must be exactly as many as the solution's timed calls), else timed here and now with the
    solution's loop and repetition count."""
    if interleave_block(settings):
        if trusted.get("error"):
            raise RuntimeError(f"the reference timer failed: {trusted['error']}")
        samples = trusted.get("samples") or []
        if len(samples) != reps:
            raise RewardHack(
                f"the solution's process reported {reps} timed calls, its turns gave {len(samples)}"
            )
        return samples
    fixed = {**settings, "min_reps": reps, "max_reps": reps}
    make_iteration = _reference_iterations(problem, workload, workload_index, settings)
    reference = problem["namespace"]["run"]
    return _time_defended(lambda inputs, _: reference(*inputs), make_iteration, fixed, set(), clock)[2]


def _judge_workload(problem, workload, workload_index, pending, blob, settings, clock, trusted) -> dict:
    """Judge one workload the solution's process reported as run: rebuild each checked call's inputs from
    its seed, compute the reference here, compare the shipped outputs, and take ``T_b`` (the reference timed
    with the solution's own loop and repetition count; ``trusted`` holds the interleaved timer's samples).
    Raises :class:`Incorrect` / :class:`RewardHack`."""
    names_out = list(problem["outputs"])
    reference = problem["namespace"]["run"]
    tolerance = scaled_tolerance(workload["tolerance"], settings.get("tolerance_scale", 1.0))
    base = settings["base_seed"]
    result = {key: pending[key] for key in ("uuid", "status", "log")}

    def reference_outputs(kind: str, index: int) -> list:
        inputs = _seeded_inputs(problem, workload, _iteration_seed(base, workload_index, kind, index))
        with torch.no_grad():
            return [
                r.detach().to("cpu") if isinstance(r, torch.Tensor) else r
                for r in _as_list(reference(*inputs), 0)
            ]

    rounds, timed = _expected_checks(pending, settings)
    correctness = None
    for check in rounds:
        try:
            refs = reference_outputs("round", check["index"])
        except Exception as error:
            return {**result, "status": "INVALID_REFERENCE", "log": f"reference raised {error!r}"}
        correctness = _check_all(_decode(check["outputs"], blob, names_out), refs, tolerance, names_out)
    result["correctness"] = correctness
    reps = pending["timing"]["reps"]
    for check in sorted(timed, key=lambda c: c["index"]):
        refs = reference_outputs("timed", check["index"])
        try:
            _check_all(_decode(check["outputs"], blob, names_out), refs, tolerance, names_out)
        except Incorrect as error:
            raise RewardHack(
                f"timed iteration {check['index']} of {reps} returned wrong results ({error})"
            ) from None
    timing = pending["timing"]
    result["timing"] = timing
    performance = {"latency_ms": timing["median_ms"]}
    if settings["time_reference"]:
        ref_samples = _reference_samples(problem, workload, workload_index, settings, clock, reps, trusted)
        ref_timing = _stats(ref_samples)
        timing["interleave_block"] = interleave_block(settings)
        if settings.get("timing_estimator") == "paired_ratio":
            # the i-th solution sample against the i-th reference sample (same loop, same index); with the
            # interleaved timing the two were taken in adjacent blocks, so a load swing scales both
            pairs = list(zip(pending["samples_ns"], ref_samples, strict=False))
            if settings.get("off_cpu_filter"):
                pairs = _on_cpu_pairs(pairs, pending.get("cpu_ns"), trusted.get("cpu"))
                ref_timing = _stats([b for _, b in pairs])
                timing["on_cpu_pairs"] = len(pairs)
            ratios = sorted(k / max(b, 1) for k, b in pairs)
            timing["paired_ratio_median"] = ratios[len(ratios) // 2]
            performance["latency_ms"] = ref_timing["median_ms"] * timing["paired_ratio_median"]
        performance["reference_latency_ms"] = ref_timing["median_ms"]
        performance["speedup_factor"] = ref_timing["median_ms"] / max(performance["latency_ms"], 1e-9)
    result["performance"] = performance
    return result


def _judge(request: dict, untrusted: list[dict], blob: bytearray, timed: _ReferenceTurns) -> list[dict]:
    """The trusted judge's verdict on every workload (in the judge process: the reference is executed here
    from the request's source; the solution was never imported into this process or its parent)."""
    settings = request["settings"]
    _prepare_evaluation_process(settings)
    problem = request["problem"]
    namespace: dict = {"__name__": "reference"}
    exec(compile(problem["reference"], "<reference>", "exec"), namespace)
    problem["namespace"] = namespace
    clock = _make_clock(settings)
    by_uuid = {item["uuid"]: item for item in untrusted}
    results = []
    for index, workload in enumerate(request["workloads"]):
        pending = by_uuid.get(workload["uuid"], {"uuid": workload["uuid"], "status": "RUNTIME_ERROR"})
        if pending["status"] != "PASSED" or "checks" not in pending:
            results.append(_public(pending))
            continue
        try:
            trusted = {
                "samples": timed.samples.get(workload["uuid"]),
                "cpu": timed.cpu.get(workload["uuid"]),
                "error": timed.errors.get(workload["uuid"]),
            }
            results.append(_judge_workload(problem, workload, index, pending, blob, settings, clock, trusted))
        except RewardHack as error:
            results.append({"uuid": workload["uuid"], "status": "REWARD_HACK", "log": str(error)})
        except Incorrect as error:
            results.append({"uuid": workload["uuid"], "status": error.status, "log": str(error)})
        except Exception:
            log = "the trusted judge failed: " + traceback.format_exc()[-2000:]
            results.append({"uuid": workload["uuid"], "status": "RUNTIME_ERROR", "log": log})
        results[-1]["seed"] = pending.get("seed")
    return results


# ---------------------------------------------------------------------------------------------------------
# one request, in the forked child
# ---------------------------------------------------------------------------------------------------------


def _load_entry(staging: str, entry_point: str):
    import importlib.util

    file_name, function = entry_point.split("::")
    path = os.path.join(staging, file_name)
    module_name = "solution_" + os.path.splitext(os.path.basename(file_name))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return getattr(module, function)


def _load_extension(described: dict):
    """Import a C++ extension built by the compile step (by path) and return its entry function."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(described["module"], described["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, described["entry_point"].split("::")[1])


def _block_extension_builds() -> None:
    """Python-language solutions may not build C++ at run time (upstream rule)."""
    try:
        import torch.utils.cpp_extension as extension
    except ImportError:
        return

    def blocked(*args, **kwargs):
        raise RuntimeError("torch.utils.cpp_extension is blocked for Python-language solutions")

    extension.load = blocked
    extension.load_inline = blocked


def _warm_thread_pools(problem: dict, workload: dict) -> None:
    """Start torch's intra-op pool (a parallel matmul, the reference once) before the thread baseline, so
    an honest solution's first parallel op is not mistaken for thread injection."""
    torch.mm(torch.ones(256, 256), torch.ones(256, 256))
    if _DEVICE.startswith("cuda"):  # the CUDA context (and its driver threads) exists before the baseline
        torch.mm(torch.ones(64, 64, device=_DEVICE), torch.ones(64, 64, device=_DEVICE)).sum().item()
    with contextlib.suppress(Exception):  # a failing reference is reported per workload later
        problem["namespace"]["run"](*_make_inputs(problem, workload, randomise_names=True))


_GC_INTROSPECTION = ("get_objects", "get_referrers", "get_referents", "get_stats", "get_freeze_count")
_GC_ATTEMPTS: list[str] = []  # filled by the gc guard, read after each workload


def _install_gc_guard() -> None:
    """Replace ``gc``'s introspection of other objects with a function that records the attempt and raises
    (the runtime back-up of the static check's narrowed ``gc``: ``collect`` and friends stay usable). A
    solution that walks the heap to find the harness's reference or tensors is REWARD_HACK, even when it
    swallows the error."""
    import gc

    def blocked(name: str):
        def refuse(*args, **kwargs):
            _GC_ATTEMPTS.append(f"gc.{name}")
            raise PermissionError(f"gc.{name} (introspection of other objects) is blocked in the sandbox")

        return refuse

    for name in _GC_INTROSPECTION:
        if hasattr(gc, name):
            setattr(gc, name, blocked(name))


def _sandbox_violation() -> str | None:
    """A sandbox rule the solution broke (even if it caught the error): network use, heap introspection,
    child processes."""
    if _NETWORK_ATTEMPTS:
        return f"network access attempted ({len(_NETWORK_ATTEMPTS)}x: {_NETWORK_ATTEMPTS[0]})"
    if _GC_ATTEMPTS:
        return f"heap introspection attempted ({len(_GC_ATTEMPTS)}x: {_GC_ATTEMPTS[0]})"
    children = _children()
    if children:
        return f"solution started child processes {children[:8]}"
    return None


def _use_device(settings: dict) -> None:
    """Select the evaluation device: the sandbox shows exactly one GPU (``cuda:0``) or none."""
    global _DEVICE
    _DEVICE = settings.get("device", "cpu")
    if _DEVICE.startswith("cuda"):
        torch.cuda.set_device(_DEVICE)
        fraction = settings["limits"].get("gpu_memory_fraction")
        if fraction:  # the caching allocator's cap; raw cudaMalloc in a CUDA extension is not bounded
            torch.cuda.set_per_process_memory_fraction(fraction)


def _prepare_triton(staging: str, interpret: bool) -> None:
    """Triton reads these when the solution is imported: a private kernel cache in the staging dir (no
    cache shared between evaluations), and the interpreter switch (CPU tensors, numpy semantics)."""
    cache = os.path.join(staging, ".triton")
    os.makedirs(cache, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = cache
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)


def _evaluate(request: dict, shipment: _Shipment, channel: tuple[int, int]) -> list[dict]:
    """The solution's process: import the solution and run it on every workload. In ``solexecbench`` mode
    nothing here judges correctness or times the reference (:func:`_solution_workload`); the baseline
    harnesses (``naive``, ``kernelbench``) keep their in-process check (:func:`_baseline_workload`)."""
    settings = request["settings"]
    _prepare_evaluation_process(settings)
    seed = settings["base_seed"]  # drawn by the fork server, so the trusted judge knows it too
    torch.manual_seed(seed)
    rng = random.Random(int.from_bytes(os.urandom(8), "little"))
    problem = request["problem"]
    workloads = request["workloads"]
    mode = settings["mode"]

    def every(status: str, log: str) -> list[dict]:
        return [{"uuid": w["uuid"], "status": status, "log": log} for w in workloads]

    namespace: dict = {"__name__": "reference"}
    try:
        exec(compile(problem["reference"], "<reference>", "exec"), namespace)
        if "run" not in namespace:
            raise ValueError("the reference defines no run(...)")
    except Exception as error:
        return every("INVALID_REFERENCE", f"reference failed to load: {error!r}")
    problem["namespace"] = namespace
    if request.get("stored_error"):  # loaded by the fork server before this process existed
        return every(
            "RUNTIME_ERROR", f"stored (safetensors) inputs failed to load: {request['stored_error']}"
        )
    _warm_thread_pools(problem, workloads[0])
    language = request["solution"]["language"]
    if language in ("pytorch", "triton"):
        _block_extension_builds()
    if language == "triton":
        _prepare_triton(request["staging"], bool(settings.get("triton_interpret")))
    # the clock (CUPTI starts its own threads) exists before the thread baseline is taken
    clock = _make_clock(settings) if mode == "solexecbench" else None
    guard = _Guard(settings["defences"]) if mode == "solexecbench" else None
    if guard is not None:
        guard.record_threads()
        _install_gc_guard()
    try:
        if request["solution"]["kind"] == "reference":
            solution, dps = namespace["run"], False
        elif request["solution"]["kind"] == "extension":
            solution = _load_extension(request["solution"])
            dps = request["solution"]["dps"]
        else:
            sys.path.insert(0, request["staging"])
            solution = _load_entry(request["staging"], request["solution"]["entry_point"])
            dps = request["solution"]["dps"]
    except SyntaxError as error:
        return every("COMPILE_ERROR", f"solution does not compile: {error!r}")
    except Exception as error:
        violation = _sandbox_violation() if guard is not None else None
        if violation:
            return every("REWARD_HACK", f"at import: {violation} ({error!r})")
        return every(
            "RUNTIME_ERROR", f"solution failed to import: {error!r}\n{traceback.format_exc()[-1500:]}"
        )
    try:
        if guard is not None:
            guard.integrity("after import")
            guard.processes("after import")
    except RewardHack as error:
        return every("REWARD_HACK", str(error))
    results = []
    for index, workload in enumerate(workloads):
        torch.manual_seed(seed + len(results))
        try:
            if mode == "solexecbench":
                item = _solution_workload(
                    problem, workload, index, solution, dps, settings, guard, rng, clock, shipment, channel
                )
            else:
                item = _baseline_workload(problem, workload, solution, dps, mode, settings)
            results.append(item)
        except RewardHack as error:
            results.append({"uuid": workload["uuid"], "status": "REWARD_HACK", "log": str(error)})
        except Incorrect as error:
            results.append({"uuid": workload["uuid"], "status": error.status, "log": str(error)})
        except Exception:
            violation = _sandbox_violation() if guard is not None else None
            status = "REWARD_HACK" if violation else "RUNTIME_ERROR"
            log = (violation + "\n" if violation else "") + traceback.format_exc()[-2000:]
            results.append({"uuid": workload["uuid"], "status": status, "log": log})
        else:
            violation = _sandbox_violation() if guard is not None else None
            if violation:  # the solution swallowed the sandbox's refusal and went on
                results[-1] = {"uuid": workload["uuid"], "status": "REWARD_HACK", "log": violation}
    for item in results:
        item["seed"] = seed
    return results


# ---------------------------------------------------------------------------------------------------------
# isolation: network namespace (or a socket block), process-count limit
# ---------------------------------------------------------------------------------------------------------

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE, _MS_RDONLY = (
    2,
    4,
    32,
    4096,
    16384,
    1 << 18,
    1,
)
# the host's shared scratch dirs: each evaluation gets its own empty tmpfs on them (or, when the kernel
# refuses a mount namespace, a scan of them for files the child left behind)
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
PRIVATE_TMP_BYTES = 2**30
_NETWORK_ATTEMPTS: list[str] = []  # filled by the socket guard, read after each workload


class NetworkBlocked(PermissionError):
    """Raised by the socket guard; the attempt is also recorded, so swallowing it does not hide it."""


def _unshare(flags: int) -> str | None:
    """``unshare(flags)`` through libc (``os.unshare`` is Python 3.12+); None, or the kernel's reason."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(flags) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as error:
        return repr(error)
    return None


def _enter_namespaces(flags: int) -> str | None:
    """Fresh namespaces for ``flags`` (network: only a loopback interface, down — no route anywhere, not
    even to the host's localhost or abstract unix sockets; mount: a private view of the mount table). Root
    makes them directly; an unprivileged user needs a new user namespace around them (the forked child is
    single-threaded, as that requires), with identity id maps so file ownership reads as before. Returns
    None on success, else the kernel's reason."""
    if os.geteuid() == 0:
        return _unshare(flags)
    reason = _unshare(_CLONE_NEWUSER | flags)
    if reason is None:
        uid, gid = os.getuid(), os.getgid()
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with contextlib.suppress(OSError), open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    return reason


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    encode = lambda x: None if x is None else x.encode()  # noqa: E731
    if libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


def _under_scratch(path: str) -> bool:
    """True when ``path`` lies strictly inside one of the host scratch dirs (a tmpfs there hides it)."""
    return any(path.startswith(folder + "/") for folder in SCRATCH_DIRS)


def _paths_the_evaluation_needs() -> list[str]:
    """Existing paths under a scratch dir that the evaluation reads: the interpreter's prefixes and folder,
    every ``sys.path`` entry (site-packages, an editable install's source tree) and CUDA's library paths.
    Both the path as named and its resolved form are listed
    (an import may go through either); nested ones are dropped (the outer bind covers them)."""
    named = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    named += [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    named += [entry for entry in sys.path if entry]
    named += [entry for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":") if entry]
    named.append(os.environ.get("CUDA_HOME", ""))
    found: set[str] = set()
    for path in named:
        if not path or not os.path.exists(path):
            continue
        for form in (os.path.abspath(path), os.path.realpath(path)):
            if _under_scratch(form):
                found.add(form)
    kept: list[str] = []
    for path in sorted(found, key=lambda p: (p.count("/"), p)):
        if not any(path == outer or path.startswith(outer + "/") for outer in kept):
            kept.append(path)
    return kept


# statvfs flags a read-only bind must keep (the kernel refuses to clear a locked nosuid/nodev/noexec/atime
# flag in a user namespace); their values equal the MS_* mount flags
_KEPT_MOUNT_FLAGS = 2 | 4 | 8 | 1024 | 2048 | 4096


def _bind_read_only(fd: int, target: str, is_dir: bool) -> None:
    """Bind the file or folder open as ``fd`` at ``target`` (created on the tmpfs), read-only."""
    if is_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o444))
    source = f"/proc/self/fd/{fd}"
    _mount(source, target, None, _MS_BIND | _MS_REC)
    kept = os.statvfs(source).f_flag & _KEPT_MOUNT_FLAGS
    _mount("none", target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | kept)


def _private_scratch(staging: str) -> tuple[str, list[str], list[str]]:
    """Inside a fresh mount namespace: an empty tmpfs on each host scratch dir and a private ``HOME``
    (``/tmp/home``), so nothing a solution writes there outlives its evaluation or reaches the host.

    What the evaluation reads from under a scratch dir is bound back at its own path, **read-only**: the
    interpreter (a virtualenv under ``/tmp``), everything on ``sys.path`` (site-packages, an editable
    install's source tree) and CUDA's library paths (see :func:`_paths_the_evaluation_needs`), and the
    sandbox root (staging dirs, built extensions, staged inputs: a problem's files are copied there) with
    the staging dir bound read-write on top — the child sees what it needs, minus everything else in
    ``/tmp``.
    Returns the private HOME, the scratch dirs that could not be mounted (the fork server scans them) and
    the paths bound back read-only."""
    root = os.path.dirname(staging)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    stage_fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    needed = [p for p in _paths_the_evaluation_needs() if p != root and not p.startswith(root + "/")]
    # opened before the tmpfs hides them; O_PATH: a folder the harness cannot list is still bound
    opened = [(path, os.open(path, os.O_PATH), os.path.isdir(path)) for path in needed]
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here propagates to the host
    skipped, bound = [], []
    for folder in SCRATCH_DIRS:
        if os.path.isdir(folder) and not os.path.islink(folder):
            options = f"mode=1777,size={PRIVATE_TMP_BYTES}"
            holds_root = root == folder or root.startswith(folder.rstrip("/") + "/")
            inside = [item for item in opened if item[0].startswith(folder + "/")]
            try:
                _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
            except OSError:
                if folder == "/tmp" or holds_root or inside:
                    raise
                skipped.append(folder)  # e.g. a container that refuses a mount on /dev/shm: scanned
                continue
            for path, fd, is_dir in inside:
                _bind_read_only(fd, path, is_dir)
                bound.append(path)
            if holds_root:
                _bind_read_only(root_fd, root, True)
                _mount(f"/proc/self/fd/{stage_fd}", staging, None, _MS_BIND)
    for _, fd, _ in opened:
        os.close(fd)
    os.close(root_fd)
    os.close(stage_fd)
    os.chdir(staging)  # the cwd now resolves through the new mounts
    home = "/tmp/home"
    os.makedirs(home, exist_ok=True)
    return home, skipped, bound


def _scratch_entries() -> dict[str, tuple[int, int]]:
    """Top-level entries of the host scratch dirs: path -> (owner uid, inode)."""
    entries = {}
    for folder in SCRATCH_DIRS:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                entries[path] = (info.st_uid, info.st_ino)
    return entries


def _leftovers(before: dict[str, tuple[int, int]], uid: int, remove: bool) -> list[str]:
    """Entries of the host scratch dirs that appeared during an evaluation and belong to the child's
    ``uid`` (the fallback when no private tmpfs could be mounted). ``remove``: delete them (only when
    ``uid`` is the sandbox's own, so nothing of the host's is touched)."""
    import shutil

    found = []
    for path, (owner, inode) in _scratch_entries().items():
        if owner == uid and before.get(path) != (owner, inode):
            found.append(path)
            if remove:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
    return sorted(found)


def _install_socket_guard() -> None:
    """Replace every Python-level way to create a socket with one that records the attempt and raises.

    Installed in every child before the solution is imported: the only network barrier when the kernel
    refuses namespaces, a reporting layer when it does not (the namespace stops what the guard misses,
    e.g. sockets made through ctypes, which the static check bans).
    """
    import _socket
    import socket

    def blocked(*args, **kwargs):
        _NETWORK_ATTEMPTS.append(f"socket{args[:2]!r}")
        raise NetworkBlocked("network access is blocked in the sandbox")

    for module in (socket, _socket):
        for name in ("socket", "SocketType", "socketpair", "fromfd", "create_connection", "create_server"):
            if hasattr(module, name):
                setattr(module, name, blocked)


def _count_user_tasks(uid: int) -> int:
    """Tasks (processes and threads) of ``uid`` on the host: what ``RLIMIT_NPROC`` counts outside a
    user namespace."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return total


_PR_SET_KEEPCAPS, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE = 8, 38, 47, 2
_CAP_DAC_READ_SEARCH = 2


def _drop_root(uid: int, staging: str, home: str | None = None) -> None:
    """Run as ``uid`` when the harness runs as root: root ignores ``RLIMIT_NPROC`` and may write anywhere.

    Only ``CAP_DAC_READ_SEARCH`` is kept (also ambient, for the compilers ``torch.compile`` starts): an
    installation under a private home (here ``/root/.pyenv``) must stay importable. ``no_new_privs`` stops
    set-uid binaries from giving root back. The staging dir (the child's cwd, the only place it writes) is
    handed to ``uid``; the sandbox root is 0711, so the child reaches its own dir but lists nothing else.
    """
    import ctypes

    for folder, _, files in os.walk(staging):
        os.chown(folder, uid, uid)
        for name in files:
            os.chown(os.path.join(folder, name), uid, uid)
    scratch = home or os.path.join(staging, ".tmp")
    os.makedirs(scratch, exist_ok=True)
    os.chown(scratch, uid, uid)
    os.environ.update(HOME=scratch, TMPDIR="/tmp" if home else scratch)
    import tempfile

    tempfile.tempdir = None if home else scratch  # gettempdir() may have been cached by the driver
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    data = (Data * 2)()
    data[0].effective = data[0].permitted = data[0].inheritable = 1 << _CAP_DAC_READ_SEARCH
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) == 0:  # _LINUX_CAPABILITY_VERSION_3
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH, 0, 0)


TMP_POLICIES = ("auto", "namespace", "fallback")


class PrivateTmpRefused(OSError):
    """``private_tmp='namespace'`` was asked for and the kernel refused the mount namespace (or a mount)."""


def _tmp_policy(value) -> str:
    """The request's ``private_tmp``: ``"auto"`` (a private tmpfs when the kernel allows one, else the
    staging dir and a scan), ``"namespace"`` (a private tmpfs or an error), ``"fallback"`` (never a mount
    namespace for /tmp); ``True``/``False`` are ``"auto"``/``"fallback"``."""
    if value is True or value is False:
        return "auto" if value else "fallback"
    if value not in TMP_POLICIES:
        raise ValueError(f"private_tmp={value!r}; choose one of {TMP_POLICIES}")
    return value


def _isolate(limits: dict, staging: str) -> dict:
    """Network isolation and the process-count limit; returns what was enforced, for the trace."""
    import resource
    import tempfile

    report: dict = {}
    want_net = limits.get("network_namespace", True)
    tmp_policy = _tmp_policy(limits.get("private_tmp", True))
    want_tmp = tmp_policy != "fallback"
    flags = (_CLONE_NEWNET if want_net else 0) | (_CLONE_NEWNS if want_tmp else 0)
    refused = _enter_namespaces(flags) if flags else None
    entered = bool(flags) and refused is None
    reason = refused if want_net else "switched off"
    tmp_reason = refused if want_tmp else "switched off"
    if refused is not None and want_net and want_tmp:  # a kernel that allows one but not both
        reason = _enter_namespaces(_CLONE_NEWNET)
        entered = reason is None
    report["network"] = "namespace" if reason is None else "socket-guard"
    if reason is not None:
        report["namespace_refused"] = reason
    _install_socket_guard()
    home = None
    report["tmp_policy"] = tmp_policy
    if tmp_reason is None:
        try:
            home, skipped, bound = _private_scratch(staging)
            if skipped:
                report["tmp_unmounted"] = skipped
            if bound:
                report["tmp_bound_read_only"] = bound
        except OSError as error:
            tmp_reason = str(error)
    if home is None and tmp_policy == "namespace":  # forced: never fall back unseen
        raise PrivateTmpRefused(
            f"a private /tmp was required (private_tmp='namespace') but could not be made: {tmp_reason}"
        )
    if home is not None:
        report["tmp"] = "private-tmpfs"
        os.environ.update(HOME=home, TMPDIR="/tmp")
        tempfile.tempdir = None
    else:  # the host's /tmp stays visible: point HOME/TMPDIR into the staging dir, scan afterwards
        report["tmp"] = "staging-tmpdir+scan"
        report["tmp_refused"] = tmp_reason
        scratch = os.path.join(staging, ".tmp")
        os.makedirs(scratch, exist_ok=True)
        os.environ.update(HOME=scratch, TMPDIR=scratch)
        tempfile.tempdir = scratch
    in_user_namespace = entered and os.geteuid() != 0
    if os.geteuid() == 0 and limits.get("sandbox_uid", -1) >= 0:
        _drop_root(limits["sandbox_uid"], staging, home)
        report["uid"] = limits["sandbox_uid"]
    # inside a fresh user namespace the kernel counts RLIMIT_NPROC per namespace (ucounts, Linux 5.14+):
    # this child is its only task. Outside one it counts every task of the uid on the host, so the limit
    # is that count plus the headroom (approximate when other jobs of the same uid come and go).
    current = 1 if in_user_namespace else _count_user_tasks(os.getuid())
    limit = current + limits["max_processes"]
    report["enforced"] = os.geteuid() != 0  # root ignores RLIMIT_NPROC
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit if hard == resource.RLIM_INFINITY else hard))
    report["nproc_limit"] = limit
    report["nproc_scope"] = "user-namespace" if in_user_namespace else "host-uid"
    return report


def _set_limits(limits: dict) -> None:
    import resource

    with open("/proc/self/status") as handle:
        vm = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
    if limits["address_space_extra_bytes"]:  # 0 on CUDA: the driver reserves terabytes of virtual space
        resource.setrlimit(resource.RLIMIT_AS, (vm + limits["address_space_extra_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(request: dict, write_fd: int, control_fd: int) -> None:
    me = os.getpid()
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    log = os.open(os.path.join(request["staging"], ".driver.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if _REAL_STDOUT >= 0:
        os.close(_REAL_STDOUT)
    os.chdir(request["staging"])
    isolation: dict = {}
    shipment = _Shipment()
    try:
        isolation = _isolate(request["settings"]["limits"], request["staging"])
        _set_limits(request["settings"]["limits"])
        payload = {"results": _evaluate(request, shipment, (write_fd, control_fd))}
    except MemoryError:
        payload = {"error": "RUNTIME_ERROR", "log": "out of memory (address-space limit)"}
    except BaseException as error:
        payload = {"error": "RUNTIME_ERROR", "log": f"driver failed: {error!r}"}
    if os.getpid() != me:  # a process the solution forked returned into driver code: never answer
        os._exit(0)
    payload["isolation"] = isolation
    _answer(write_fd, payload, shipment.parts if "results" in payload else [])


def _answer(write_fd: int, payload: dict, parts: list[bytes]) -> None:
    """One JSON line (it names the byte count that follows), then the shipped outputs' bytes; then exit."""
    payload["blob_bytes"] = sum(len(part) for part in parts)
    data = json.dumps(payload, allow_nan=True).encode() + b"\n"  # the newline ends the header
    for chunk in (data, *parts):
        view = memoryview(chunk)
        while view:
            written = os.write(write_fd, view)
            view = view[written:]
    os.close(write_fd)
    os._exit(0)


def _judge_child(
    request: dict, untrusted: list[dict], blob: bytearray, timed: _ReferenceTurns, write_fd: int
) -> None:
    """The trusted judge process (forked from the fork server once the solution's process tree is gone):
    it runs only the problem's reference and the checker, and answers the final per-workload results."""
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # never a file in the staging dir: the solution could have planted a link there
        os.dup2(null, fd)
    if _REAL_STDOUT >= 0:
        os.close(_REAL_STDOUT)
    try:
        payload = {"results": _judge(request, untrusted, blob, timed)}
    except BaseException as error:
        payload = {"error": "RUNTIME_ERROR", "log": f"the trusted judge failed: {error!r}"}
    _answer(write_fd, payload, [])


def _child_uid(limits: dict) -> int:
    """The uid the evaluation runs as (see :func:`_drop_root`)."""
    if os.geteuid() == 0 and limits.get("sandbox_uid", -1) >= 0:
        return int(limits["sandbox_uid"])
    return os.getuid()


def _flag_leftovers(answer: dict, leftovers: list[str]) -> dict:
    """Files a solution left in the host's scratch dirs make every workload REWARD_HACK."""
    if not leftovers or "results" not in answer:
        return answer
    log = f"files left outside the staging dir: {leftovers[:8]}"
    for item in answer["results"]:
        item.update(status="REWARD_HACK", log=log + ("\n" + item["log"] if item.get("log") else ""))
    return answer


def _serve_one(request: dict) -> dict:
    """One evaluation. ``solexecbench`` mode runs two processes, one after the other: the solution's
    (:func:`_child`: isolated, untrusted, it reports outputs and its own timings) and, once that process
    and everything it started are gone, the trusted judge's (:func:`_judge_child`: the reference, ``T_b``
    and the comparison). The baseline harnesses run in one process, as they were designed."""
    limits = request["settings"]["limits"]
    uid = _child_uid(limits)
    seed = request["settings"].get("seed")
    request["settings"]["base_seed"] = int.from_bytes(os.urandom(4), "little") if seed is None else seed
    try:  # read here, before any process of the solution's exists, so it cannot swap the stored files
        _load_stored_inputs(request["workloads"])
    except Exception as error:
        request["stored_error"] = repr(error)
    before = _scratch_entries()
    timed = _ReferenceTurns(request, interleave_block(request["settings"]))
    try:
        answer, blob = _serve_child(request, lambda fd, control: _child(request, fd, control), timed.on_turn)
    finally:
        timed.close()
    survivors = _kill_survivors()
    isolation = answer.get("isolation") or {}
    if isolation.get("tmp") != "private-tmpfs" or isolation.get("tmp_unmounted"):
        # (some of) the host's scratch dirs were visible to the child: scan them
        sandbox_uid = os.geteuid() == 0 and limits.get("sandbox_uid", -1) >= 0
        answer = _flag_leftovers(answer, _leftovers(before, uid, remove=sandbox_uid))
    if request["settings"]["mode"] != "solexecbench" or "results" not in answer:
        return answer
    isolation["split"] = "trusted-judge"
    isolation["subreaper"] = _SUBREAPER
    answer["isolation"] = isolation
    if survivors:  # flagged before judging: nothing else the judge could say matters
        log = f"processes of the solution survived the evaluation (killed): {survivors[:8]}"
        answer["results"] = [
            {**item, "status": "REWARD_HACK", "log": log + ("\n" + item["log"] if item.get("log") else "")}
            for item in answer["results"]
        ]
    if not any(item["status"] == "PASSED" for item in answer["results"]):
        return {**answer, "results": [_public(item) for item in answer["results"]]}
    untrusted = answer["results"]
    judged, _ = _serve_child(request, lambda fd, _: _judge_child(request, untrusted, blob, timed, fd))
    _kill_survivors()
    if "error" in judged:
        return {**judged, "isolation": isolation}
    return {"results": judged["results"], "isolation": isolation}


def _public(item: dict) -> dict:
    """A result without the solution's shipping fields (check records, raw samples)."""
    return {k: v for k, v in item.items() if k not in ("checks", "samples_ns", "cpu_ns")}


_PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER = False  # set in main(): orphans of an evaluation are re-parented to the fork server


def _become_subreaper() -> bool:
    """Make the fork server the reaper of every orphan below it (``PR_SET_CHILD_SUBREAPER``): a process the
    solution double-forked into its own session then becomes the fork server's child when its parent dies,
    instead of init's, so it can be found and killed (issue #44)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_survivors(rounds: int = 64) -> list[int]:
    """Kill and reap every child the fork server still has after an evaluation's process was reaped: with
    the subreaper set, these are exactly the processes the evaluation left alive, whatever session or
    process group they moved to. Returns their pids (empty: nothing survived)."""
    found: list[int] = []
    own_group = os.getpgrp()
    for _ in range(rounds):
        pids = _children()
        if not pids:
            break
        for pid in pids:
            if pid not in found:
                found.append(pid)
            with contextlib.suppress(OSError):
                group = os.getpgid(pid)
                if group != own_group:  # never the fork server's own group
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
    return found


MAX_SHIPPED_BYTES = 8 * 2**30  # outputs of the checked calls an evaluation may ship to the judge


def _read_answer(read_fd: int, deadline: float, on_turn=None) -> tuple[dict | None, bytearray, bool]:
    """Read a child's JSON header line and the bytes it announces (``blob_bytes``), up to ``deadline``;
    lines with a ``turn`` before it go to ``on_turn`` (interleaved timing). Not to EOF: processes the
    solution forked may hold the pipe open. Returns (header or None, blob, timed out)."""
    buffer, header, need = bytearray(), None, 0
    while True:
        if header is None and b"\n" in buffer:
            line, _, rest = bytes(buffer).partition(b"\n")
            try:
                header = json.loads(line.decode())
                if on_turn is not None and isinstance(header, dict) and "turn" in header:
                    on_turn(header)
                    header, buffer = None, bytearray(rest)
                    continue
                need = int(header.get("blob_bytes", 0))
            except (ValueError, AttributeError, TypeError):
                return None, bytearray(), False
            if not 0 <= need <= MAX_SHIPPED_BYTES:  # the fork server's memory is not the solution's to fill
                return None, bytearray(), False
            buffer = bytearray(rest)
        if header is not None and len(buffer) >= need:
            return header, buffer[:need], False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, bytearray(), True
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 1.0))
        if ready:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                return (header if header is not None and len(buffer) >= need else None), buffer, False
            buffer += chunk


def _serve_child(request: dict, work, on_turn=None) -> tuple[dict, bytearray]:
    """Fork, run ``work(write_fd, control_fd)`` in the child (it never returns), read its answer under the
    wall timeout (passing each turn message to ``on_turn(message, control_write_fd)``), kill its process
    group; returns the answer and the bytes that came with it."""
    read_fd, write_fd = os.pipe()
    control_r, control_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.close(control_w)
        work(write_fd, control_r)
        os._exit(1)
    os.close(write_fd)
    os.close(control_r)
    turn = (lambda message: on_turn(message, control_w)) if on_turn else None
    deadline = time.monotonic() + request["settings"]["timeout_s"]
    header, blob, timed_out = _read_answer(read_fd, deadline, turn)
    os.close(read_fd)
    os.close(control_w)
    if timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # grandchildren left in its process group
    if timed_out:
        return {"error": "TIMEOUT", "log": f"wall time above {request['settings']['timeout_s']} s"}, blob
    if header is None:
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        return {
            "error": "RUNTIME_ERROR",
            "log": f"the evaluation process died ({how}) without a result",
        }, blob
    return header, blob


def _quiet_library_threads() -> None:
    """Switch off housekeeping threads honest libraries start lazily (tqdm's monitor, which inductor's
    progress bars would start in torch.compile's first call), so the thread check need not excuse them."""
    with contextlib.suppress(ImportError):
        import tqdm

        tqdm.tqdm.monitor_interval = 0


def main() -> None:
    global _REAL_STDOUT, _SUBREAPER
    _SUBREAPER = _become_subreaper()
    _quiet_library_threads()
    _REAL_STDOUT = os.dup(1)
    os.dup2(2, 1)  # anything printed (by torch or a solution) goes to stderr, never into the JSON channel
    out = os.fdopen(_REAL_STDOUT, "w")
    out.write(json.dumps({"ready": True, "torch": torch.__version__}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _serve_one(json.loads(line))
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
