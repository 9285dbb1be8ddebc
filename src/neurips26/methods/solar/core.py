"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — ``analyze``, ``check`` and ``inverse_roofline``.

``analyze(program, example_inputs, hw)`` traces the program (meta tensors by default), lowers every op to the
einsum-graph IR, runs the validation gate and computes the multi-fidelity bounds of
:mod:`~neurips26.methods.solar.bounds`. ``check`` audits a measured time against them: a measurement below
a lower bound is either a modelling bug (peaks, counts) or a timing artefact (warm cache, a timing hack).
``inverse_roofline`` gives the bandwidth and FLOP/s a target latency needs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurips26.methods.solar.bounds import (
    FIDELITIES,
    Bounds,
    Tiling,
    compute_bounds,
    compute_seconds,
    total_conventional_macs,
    total_macs,
)
from neurips26.methods.solar.frontend_torch import OpRecord, Trace, trace_program
from neurips26.methods.solar.hardware import HardwareSpec, load_hardware
from neurips26.methods.solar.ir import IRGraph
from neurips26.methods.solar.validation import Validation, validate_trace

UNKNOWN_HINT = (
    "register a rule: neurips26.methods.solar.register_rule('{op}', lambda call: OpCost(kind, "
    "macs={{dtype: n}}, flops=n)); until then its compute counts as zero (bounds stay lower bounds)"
)


@dataclass
class SOLReport:
    """Everything ``analyze`` found for one program on one hardware spec.

    ``bounds`` holds seconds per fidelity (``flop_only <= fused <= cache_aware``; ``unfused`` models
    op-by-op DRAM round trips; ``target`` is attainable within the searched tilings, not a bound).
    ``macs`` is the exact count the bounds use (taps over zero padding and masked attention entries left
    out); ``macs_conventional`` counts them as FlopCounterMode, fvcore and most papers do.
    """

    program: str
    hardware: HardwareSpec
    bounds: Bounds
    macs: dict[str, int]
    other_flops: int
    ops: list[OpRecord]
    unknown_ops: dict[str, int]
    validation: Validation
    tilings: list[Tiling]
    analysis_seconds: float
    frontend: str
    graph: IRGraph | None = field(default=None, repr=False)
    trace: Trace | None = field(default=None, repr=False)
    frontend_note: str = ""
    macs_conventional: dict[str, int] = field(default_factory=dict)

    @property
    def validated(self) -> bool:
        return self.validation.validated

    @property
    def complete(self) -> bool:
        """True when every op had a rule (no unknown op counted as zero)."""
        return not self.unknown_ops

    @property
    def flops(self) -> int:
        """2 x MACs (the convention of FlopCounterMode), exact domains."""
        return 2 * sum(self.macs.values())

    @property
    def flops_conventional(self) -> int:
        """2 x conventional MACs: what FlopCounterMode/fvcore report where they count the op."""
        return 2 * sum((self.macs_conventional or self.macs).values())

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per compulsory byte."""
        return self.flops / self.bounds.compulsory_bytes if self.bounds.compulsory_bytes else math.inf

    @property
    def bottleneck(self) -> str:
        compute = compute_seconds(self.macs, self.hardware)
        return (
            "compute"
            if compute >= self.bounds.compulsory_bytes / self.hardware.dram_bandwidth_Bps
            else "memory"
        )

    def bound(self, fidelity: str) -> float:
        if fidelity not in (*FIDELITIES, "target"):
            raise ValueError(f"fidelity={fidelity!r}; choose one of {[*FIDELITIES, 'target']}")
        return getattr(self.bounds, fidelity)

    def op_rows(self) -> list[dict[str, Any]]:
        """Per-op counts with arithmetic intensity, unfused roofline time and bottleneck."""
        rows = []
        bw = self.hardware.dram_bandwidth_Bps
        for op in self.ops:
            if op.kind == "view":
                continue
            compute = compute_seconds(op.macs, self.hardware)
            memory = op.bytes / bw
            flops = 2 * sum(op.macs.values()) + op.flops
            rows.append(
                {
                    "index": op.index,
                    "op": op.op,
                    "kind": op.kind,
                    "macs": dict(op.macs),
                    "other_flops": op.flops,
                    "read_bytes": op.read_bytes,
                    "write_bytes": op.write_bytes,
                    "arithmetic_intensity": flops / op.bytes if op.bytes else math.inf,
                    "unfused_seconds": max(compute, memory),
                    "bottleneck": "compute" if compute >= memory else "memory",
                    "nodes": list(op.nodes),
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "hardware": self.hardware.to_dict(),
            "bounds_seconds": self.bounds.as_dict(),
            "bounds_note": "flop_only <= fused <= cache_aware are lower bounds; unfused assumes every op "
            "round-trips DRAM; target is attainable within the searched tilings (not a bound)",
            "bytes": {
                "compulsory": self.bounds.compulsory_bytes,
                "cache_aware": self.bounds.cache_aware_bytes,
                "unfused": self.bounds.unfused_bytes,
                "target": self.bounds.target_bytes,
            },
            "macs_by_dtype": dict(self.macs),
            "macs_conventional_by_dtype": dict(self.macs_conventional or self.macs),
            "flops": self.flops,
            "flops_conventional": self.flops_conventional,
            "other_flops": self.other_flops,
            "arithmetic_intensity": self.arithmetic_intensity,
            "bottleneck": self.bottleneck,
            "validated": self.validated,
            "validation": self.validation.to_dict(),
            "complete": self.complete,
            "unknown_ops": [
                {"op": op, "count": n, "hint": UNKNOWN_HINT.format(op=op)}
                for op, n in sorted(self.unknown_ops.items())
            ],
            "tilings": [dataclasses.asdict(t) for t in self.tilings],
            "ops": self.op_rows(),
            "einsum_nodes": [
                n.equation() for n in (self.graph.nodes if self.graph else []) if hasattr(n, "equation")
            ],
            "analysis_seconds": self.analysis_seconds,
            "frontend": self.frontend,
            "frontend_note": self.frontend_note,
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """Strict JSON (infinite intensities of byte-free ops become ``null``); written atomically."""
        text = json.dumps(_finite(self.to_dict()), indent=2, allow_nan=False)
        if path is not None:
            target = Path(path)
            tmp = target.with_suffix(target.suffix + ".tmp")
            tmp.write_text(text)
            tmp.replace(target)
        return text

    def summary(self) -> str:
        b = self.bounds
        lines = [
            f"SOLAR report: {self.program} on {self.hardware.name}"
            f" ({'measured' if self.hardware.measured else 'datasheet'})",
            f"  MACs {dict(self.macs)} (conventional {dict(self.macs_conventional or self.macs)})"
            f"  other FLOPs {self.other_flops:,}"
            f"  compulsory bytes {b.compulsory_bytes:,}",
            f"  bounds (s): flop_only {b.flop_only:.3e}  fused {b.fused:.3e}  cache_aware {b.cache_aware:.3e}"
            f"  unfused {b.unfused:.3e}  target {b.target:.3e}",
            f"  bottleneck {self.bottleneck}, intensity {self.arithmetic_intensity:.2f} FLOP/B, "
            f"validated {self.validated} ({self.validation.reason})",
            f"  frontend {self.frontend}" + (f" ({self.frontend_note})" if self.frontend_note else ""),
        ]
        for op, n in sorted(self.unknown_ops.items()):
            lines.append(f"  unknown op {op} (x{n}): {UNKNOWN_HINT.format(op=op)}")
        return "\n".join(lines)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def program_name(program: Any) -> str:
    if hasattr(program, "forward"):
        return type(program).__name__
    return getattr(program, "__name__", type(program).__name__)


def analyze(
    program: Callable[..., Any],
    example_inputs: Sequence[Any],
    hw: str | HardwareSpec = "H100-SXM",
    *,
    trace_device: str = "meta",
    validate: bool = True,
    seed: int = 0,
    frontend: str = "default",
    validate_max_bytes: int = 512 * 2**20,
    validate_max_macs: int = 2 * 10**9,
    loop_trips: bool = True,
) -> SOLReport:
    """Derive validated speed-of-light bounds for ``program(*example_inputs)`` on ``hw``.

    Parameters
    ----------
    program: an ``nn.Module`` (possibly built on ``meta``), a function of torch tensors, or a JAX function.
    example_inputs: the call's arguments; tensors may be on ``meta`` (shapes and dtypes are what count).
    hw: a spec name (see ``known_hardware()``), a YAML path or a :class:`HardwareSpec`.
    trace_device: ``"meta"`` (default, nothing allocated) or ``"cpu"`` for data-dependent programs.
    validate: run the validation gate (random inputs, IR vs program) when under the size caps.
    frontend: ``"default"`` (the fast path: JAX when an input is a JAX array or ShapeDtypeStruct,
        otherwise the dispatch tracer, ~10x faster than ``torch.export``, with the same MACs and lower
        bounds on the suite, and ``torch.export`` as its fallback when the tracer fails), ``"auto"``
        (JAX for JAX inputs, otherwise ``torch.export`` with the dispatch tracer as the fallback when
        export fails: one IR node per
        composite op and a graph to inspect), ``"export"`` (export only; a failure raises),
        ``"dispatch"`` (the dispatch-mode tracer only) or ``"jax"``. ``report.frontend`` says which one
        produced the IR and ``report.frontend_note`` why a fallback happened.
    loop_trips: count JAX loops (``scan``, ``while``) by their trips (default); ``False`` counts each body
        once, the ablation of the paper's loop handling (PyTorch graphs are already unrolled).
    """
    if not isinstance(example_inputs, (list, tuple)):
        raise TypeError(
            f"example_inputs must be a list or tuple of arguments, got {type(example_inputs).__name__}"
        )
    spec = load_hardware(hw)
    start = time.perf_counter()
    if frontend not in FRONTENDS:
        raise ValueError(f"frontend={frontend!r}; choose one of {list(FRONTENDS)}")
    if frontend == "jax" or (frontend in ("auto", "default") and _looks_like_jax(example_inputs)):
        from neurips26.methods.solar.frontend_jax import trace_jax
        from neurips26.methods.solar.validation_jax import validate_jax

        trace = trace_jax(program, example_inputs, count_trips=loop_trips)
        validation = validate_jax(program, example_inputs, trace, seed) if validate else None
    else:
        trace = _trace_torch(program, example_inputs, frontend, trace_device)
        validation = (
            validate_trace(program, example_inputs, trace, seed, validate_max_bytes, validate_max_macs)
            if validate
            else None
        )
    if validation is None:
        validation = Validation(False, "validation not requested")
    report = _report_from_trace(program_name(program), trace, spec, validation, 0.0)
    report.analysis_seconds = time.perf_counter() - start
    return report


FRONTENDS = ("default", "auto", "export", "dispatch", "jax")


def _trace_torch(
    program: Callable[..., Any], example_inputs: Sequence[Any], frontend: str, trace_device: str
) -> Trace:
    """``torch.export`` first (``auto``/``export``), the dispatch tracer when export fails (``auto``) or when
    asked for (``dispatch``); ``default`` is the dispatch tracer with ``torch.export`` as its fallback.
    ``trace.note`` says why a fallback happened."""
    if frontend == "dispatch":
        return trace_program(program, example_inputs, device=trace_device)
    from neurips26.methods.solar.frontend_export import ExportFailed, trace_export

    if frontend == "default":
        try:
            return trace_program(program, example_inputs, device=trace_device)
        except (ValueError, NotImplementedError, RuntimeError) as exc:
            # export traces on fake tensors, where library code that reads a value on meta (Hugging Face's
            # packed-sequence check with use_cache=False) sees a tracer and skips the check
            try:
                trace = trace_export(program, example_inputs, device=trace_device)
            except ExportFailed as export_exc:
                raise exc from export_exc
            trace.note = f"fell back to torch.export: the dispatch tracer failed: {str(exc).splitlines()[0]}"
            return trace

    try:
        return trace_export(program, example_inputs, device=trace_device)
    except ExportFailed as exc:
        if frontend == "export":
            raise ValueError(
                f"frontend='export': {exc}; use frontend='auto' (falls back to the dispatch tracer) or "
                "frontend='dispatch'"
            ) from exc
        trace = trace_program(program, example_inputs, device=trace_device)
        trace.note = f"fell back to the dispatch tracer: {exc}"
        return trace


class SOLARAnalyzer:
    """A reusable analyzer bound to one hardware spec and one set of options (``analyze`` with state).

    Example: ``SOLARAnalyzer("H200").analyze(model, [x]).bounds.fused``; ``.check(report, seconds)``.
    """

    def __init__(self, hw: str | HardwareSpec = "H100-SXM", **options: Any) -> None:
        self.hardware = load_hardware(hw)
        self.options = options

    def analyze(self, program: Callable[..., Any], example_inputs: Sequence[Any]) -> SOLReport:
        return analyze(program, example_inputs, hw=self.hardware, **self.options)

    def check(self, report: SOLReport, measured_seconds: float, tolerance: float = 0.0) -> ViolationAudit:
        return check(report, measured_seconds, tolerance)


def _looks_like_jax(example_inputs: Sequence[Any]) -> bool:
    import sys

    if "jax" not in sys.modules:
        return False
    import jax

    leaves = jax.tree_util.tree_leaves(tuple(example_inputs))
    return any(isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) for x in leaves)


def _report_from_trace(
    name: str, trace: Trace, spec: HardwareSpec, validation: Validation, seconds: float
) -> SOLReport:
    compulsory = compulsory_bytes(trace, spec)
    bounds, tilings = compute_bounds(trace.ops, trace.graph, compulsory, spec)
    return SOLReport(
        name,
        spec,
        bounds,
        total_macs(trace.ops),
        sum(op.flops for op in trace.ops),
        trace.ops,
        dict(trace.unknown_ops),
        validation,
        tilings,
        seconds,
        trace.frontend,
        trace.graph,
        trace,
        trace.note,
        total_conventional_macs(trace.ops),
    )


def compulsory_bytes(trace: Trace, spec: HardwareSpec) -> int:
    """Bytes every implementation must move: each program buffer it reads (inputs, weights, constants, at
    least the elements it touches), plus the output bytes that cannot stay on chip.

    Written outputs that fit in the on-chip capacity may still sit in a write-back cache (GPU L2, CPU LLC)
    when the timer stops, so only ``max(0, writes - S)`` is compulsory DRAM traffic.
    """
    reads = sum(trace.compulsory_read.values())
    writes = sum(trace.compulsory_write.values())
    return int(reads + max(0, writes - spec.onchip_bytes))


def rebound(report: SOLReport, hw: str | HardwareSpec) -> SOLReport:
    """The same program's bounds on another hardware spec, without re-tracing (cross-platform exploration)."""
    if report.trace is None:
        raise ValueError("report has no trace attached (it was loaded from JSON); re-run analyze")
    return _report_from_trace(
        report.program, report.trace, load_hardware(hw), report.validation, report.analysis_seconds
    )


@dataclass
class ViolationAudit:
    """``check``'s verdict: per fidelity the bound, measured/bound and whether it was violated, and the
    hardware spec the bounds used (with its calibration record), so a violation can be audited."""

    measured_seconds: float
    rows: dict[str, dict[str, Any]]
    violations: list[str]
    hardware: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


def check(report: SOLReport, measured_seconds: float, tolerance: float = 0.0) -> ViolationAudit:
    """Audit a measured time against every bound.

    A measurement below ``flop_only``, ``fused`` or ``cache_aware`` (by more than ``tolerance``, relative) is
    a **violation**: the hardware spec or the counts are wrong, or the timing is not cold (warm caches, reused
    results, a patched timer). Falling below ``unfused`` is reported (``below: true``) but is not a violation:
    that bound assumes every op round-trips DRAM, which fused or cache-resident implementations avoid.
    """
    if not (
        isinstance(measured_seconds, (int, float))
        and measured_seconds > 0
        and math.isfinite(measured_seconds)
    ):
        raise ValueError(f"measured_seconds must be a positive finite number, got {measured_seconds!r}")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    rows: dict[str, dict[str, Any]] = {}
    violations = []
    for fidelity in FIDELITIES:
        bound = report.bound(fidelity)
        below = measured_seconds < bound * (1 - tolerance)
        rows[fidelity] = {
            "bound_seconds": bound,
            "measured_over_bound": measured_seconds / bound if bound else math.inf,
            "below": below,
            "is_lower_bound": fidelity != "unfused",
        }
        if below and fidelity != "unfused":
            violations.append(
                f"measured {measured_seconds:.3e} s < {fidelity} bound {bound:.3e} s on "
                f"{report.hardware.name}: the model is wrong (peaks, counts) or the timing is not cold "
                "(warm cache, reused results, a timing hack)"
            )
    return ViolationAudit(float(measured_seconds), rows, violations, report.hardware.to_dict())


@dataclass
class InverseRoofline:
    """What hardware a target latency needs: bandwidth, FLOP/s per dtype and the scaled spec."""

    target_seconds: float
    fidelity: str
    required_bandwidth_Bps: float
    required_flops: dict[str, float]
    bandwidth_scale: float
    compute_scale: float
    provisioned: HardwareSpec


def inverse_roofline(report: SOLReport, target_seconds: float, fidelity: str = "fused") -> InverseRoofline:
    """Closed-form provisioning: ``BW = bytes / T`` and every FLOP rate scaled by ``compute_bound / T``.

    The provisioned spec reaches ``T`` exactly at this fidelity (``rebound`` round-trips it).
    """
    if not (target_seconds > 0 and math.isfinite(target_seconds)):
        raise ValueError(f"target_seconds must be a positive finite number, got {target_seconds!r}")
    byte_counts = {
        "fused": report.bounds.compulsory_bytes,
        "cache_aware": report.bounds.cache_aware_bytes,
        "target": report.bounds.target_bytes,
    }
    if fidelity not in byte_counts:
        raise ValueError(f"fidelity={fidelity!r}; choose one of {sorted(byte_counts)}")
    hw = report.hardware
    needed_bw = byte_counts[fidelity] / target_seconds
    compute = compute_seconds(report.macs, hw)
    compute_scale = compute / target_seconds if compute else 1.0
    bandwidth_scale = needed_bw / hw.dram_bandwidth_Bps if needed_bw else 1.0
    provisioned = hw.scaled(compute_scale, bandwidth_scale, name=f"{hw.name}-for-{target_seconds:.3g}s")
    required = {d: hw.flops_rate(d) * compute_scale for d in report.macs if report.macs[d]}
    return InverseRoofline(
        target_seconds, fidelity, needed_bw, required, bandwidth_scale, compute_scale, provisioned
    )
