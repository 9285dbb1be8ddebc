"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — scoring.

The SOL score of a kernel time ``T_k`` against a baseline time ``T_b`` and the speed-of-light time
``T_SOL`` (paper, Sec. 3; upstream ``sol_score.py``)::

    S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL))

``S = 0.5`` at ``T_k = T_b`` and ``S = 1`` at ``T_k = T_SOL``; when ``T_b <= T_SOL`` it is 1 for
``T_k <= T_SOL`` and 0 otherwise. Upstream does not clamp (``T_k < T_SOL`` gives ``S > 1``); we keep the raw
value, report the clamped one, and flag ``T_k < T_SOL (1 - tol)`` as REWARD_HACK (the SOL floor).
``T_SOL`` comes from ``solar.analyze`` on the problem's reference at the workload's axes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neurips26.methods.solar import HardwareSpec, analyze

_TORCH_DTYPES = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "bool": "bool",
}


def sol_score(t_kernel: float, t_baseline: float, t_sol: float) -> float:
    """The raw SOL score ``S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL))`` (not clamped; may exceed 1)."""
    for name, value in (("t_kernel", t_kernel), ("t_baseline", t_baseline), ("t_sol", t_sol)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite time >= 0, got {value!r}")
    if t_baseline <= t_sol:  # the baseline is already at the bound: only reaching it counts
        return 1.0 if t_kernel <= t_sol else 0.0
    return 1.0 / (1.0 + (t_kernel - t_sol) / (t_baseline - t_sol))


def clamp_score(score: float) -> float:
    """The reported score: the raw score clipped to [0, 1]."""
    return min(1.0, max(0.0, score))


def below_speed_of_light(t_kernel: float, t_sol: float, tolerance: float = 0.0) -> bool:
    """The SOL floor: a measured time below ``T_SOL (1 - tolerance)`` is physically impossible."""
    return t_kernel < t_sol * (1.0 - tolerance)


@dataclass(frozen=True)
class WorkloadScore:
    """Scores of one workload; a failed workload has ``correct=False`` and score 0."""

    uuid: str
    status: str
    correct: bool
    latency_ms: float | None
    baseline_ms: float | None
    sol_ms: float | None
    speedup: float | None
    sol_score_raw: float
    sol_score: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def score_workload(
    uuid: str, status: str, latency_ms: float | None, baseline_ms: float | None, sol_ms: float | None
) -> WorkloadScore:
    """Speedup over the baseline and the SOL score of one workload (0 unless PASSED)."""
    correct = status == "PASSED" and latency_ms is not None
    if not correct or baseline_ms is None or sol_ms is None:
        speedup = baseline_ms / latency_ms if correct and baseline_ms and latency_ms else None
        return WorkloadScore(uuid, status, correct, latency_ms, baseline_ms, sol_ms, speedup, 0.0, 0.0)
    raw = sol_score(latency_ms, baseline_ms, sol_ms)
    speedup = baseline_ms / latency_ms if latency_ms > 0 else math.inf
    return WorkloadScore(uuid, status, True, latency_ms, baseline_ms, sol_ms, speedup, raw, clamp_score(raw))


def geometric_mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def summarise_problem(scores: Sequence[WorkloadScore], fast_p: float = 1.0) -> dict[str, Any]:
    """Per problem: mean SOL score (failures count 0), geomean speedup over correct workloads, fast_p."""
    if not scores:
        raise ValueError("scores must hold at least one workload")
    n = len(scores)
    return {
        "workloads": n,
        "passed": sum(s.correct for s in scores),
        "mean_sol_score": sum(s.sol_score for s in scores) / n,
        "mean_sol_score_raw": sum(s.sol_score_raw for s in scores) / n,
        "geomean_speedup": geometric_mean([s.speedup for s in scores if s.correct and s.speedup]),
        f"fast_{fast_p:g}": sum(1 for s in scores if s.correct and (s.speedup or 0) > fast_p) / n,
        "statuses": {
            status: sum(s.status == status for s in scores) for status in {s.status for s in scores}
        },
    }


def summarise_dataset(problems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Over problems: mean of per-problem mean SOL scores and geomean of per-problem geomean speedups."""
    if not problems:
        return {"problems": 0, "mean_sol_score": 0.0, "geomean_speedup": None}
    return {
        "problems": len(problems),
        "mean_sol_score": sum(p["mean_sol_score"] for p in problems.values()) / len(problems),
        "geomean_speedup": geometric_mean([p["geomean_speedup"] for p in problems.values()]),
    }


# ---------------------------------------------------------------------------------------------------------
# T_SOL from solar
# ---------------------------------------------------------------------------------------------------------


def reference_namespace(reference: str) -> dict[str, Any]:
    """Execute the definition's (trusted) reference source; it must define ``run``."""
    namespace: dict[str, Any] = {"__name__": "reference"}
    exec(compile(reference, "<reference>", "exec"), namespace)
    if not callable(namespace.get("run")):
        raise ValueError("definition.reference must define a function run(...)")
    return namespace


def example_inputs(definition: Any, axes: dict[str, int], workload: Any, device: str = "meta") -> list[Any]:
    """Inputs of the reference at one workload's axes: meta tensors (shapes and dtypes) and scalars."""
    import torch

    from neurips26.methods.solexecbench.schema import CustomInput, ScalarInput

    namespace = reference_namespace(definition.reference)
    custom: dict[str, Any] = {}
    if any(isinstance(v, CustomInput) for v in workload.inputs.values()):
        scalars = {n: v.value for n, v in workload.inputs.items() if isinstance(v, ScalarInput)}
        custom = namespace[definition.custom_inputs_entrypoint]({**axes, **scalars}, "cpu")
    values: list[Any] = []
    for name, spec in definition.inputs.items():
        given = workload.inputs.get(name)
        if isinstance(given, ScalarInput):
            values.append(given.value)
        elif isinstance(given, CustomInput):
            values.append(custom[name].to(device))
        else:
            shape = [axes[a] for a in spec.shape or []]
            values.append(torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[spec.dtype]), device=device))
    return values


def sol_time_ms(
    definition: Any, workload: Any, hardware: HardwareSpec, fidelity: str = "fused"
) -> tuple[float, dict[str, Any]]:
    """``T_SOL`` in milliseconds of the reference at ``workload``'s axes on ``hardware`` (solar's bound).

    Traced on ``meta`` tensors; a data-dependent reference (custom inputs) is traced on CPU tensors.
    Returns the time and a small record (fidelity, bottleneck, completeness) for the trace.
    """
    axes = definition.resolve_axes(workload.axes)
    namespace = reference_namespace(definition.reference)
    custom = definition.custom_inputs_entrypoint is not None
    device = "cpu" if custom else "meta"
    inputs = example_inputs(definition, axes, workload, device)
    # frontend "auto" (torch.export first): the frontend every published T_SOL was derived with; solar's
    # default moved to the dispatch tracer, whose unfused bound differs slightly on norms and pooling
    report = analyze(
        namespace["run"], inputs, hw=hardware, trace_device=device, validate=False, frontend="auto"
    )
    seconds = report.bound(fidelity)
    record = {
        "t_sol_ms": seconds * 1e3,
        "fidelity": fidelity,
        "hardware": hardware.name,
        "bottleneck": report.bottleneck,
        "complete": report.complete,
        "flops": report.flops,
        "compulsory_bytes": report.bounds.compulsory_bytes,
    }
    return seconds * 1e3, record
