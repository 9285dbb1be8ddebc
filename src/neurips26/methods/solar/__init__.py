"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — validated SOL bounds for PyTorch programs.

Public API::

    report = analyze(model, example_inputs, hw="H200")   # SOLReport: counts, bounds, validated
    audit = check(report, measured_seconds)               # violation audit
    need = inverse_roofline(report, target_seconds)       # bandwidth and FLOP/s for a target latency

PyTorch programs go through ``torch.export`` (trimmed decompositions) with the dispatch tracer as the
fallback, JAX programs through their jaxpr; generated lowerings plug in through :mod:`.plugins`.

The hardware model (:mod:`.hardware`), the IR (:mod:`.ir`) and the bounds (:mod:`.bounds`) are shared with
``solexecbench``.
"""

from __future__ import annotations

from neurips26.methods.solar.bounds import FIDELITIES, Bounds
from neurips26.methods.solar.core import (
    InverseRoofline,
    SOLARAnalyzer,
    SOLReport,
    ViolationAudit,
    analyze,
    check,
    inverse_roofline,
    rebound,
)
from neurips26.methods.solar.hardware import (
    PEAK_FACTOR,
    HardwareSpec,
    calibrate,
    calibrate_cpu_local,
    is_loaded,
    known_hardware,
    load_hardware,
    merge_calibrations,
    refresh_calibration,
    save_hardware,
)
from neurips26.methods.solar.ir import Access, Affine, EinsumNode, IRGraph, ReplayNode, execute_graph
from neurips26.methods.solar.plugins import RecordedLowerings, parse_description, rule_from_description
from neurips26.methods.solar.rules import OpCall, OpCost, load_rule_plugins, register_rule, unregister_rule
from neurips26.methods.solar.validation import Validation

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "exact iteration domains (guarded affine loops)": (
        "tests/methods/solar/test_solar.py::test_idea_causal_attention_counts_the_triangle"
    ),
    "a bound only from a validated lowering": (
        "tests/methods/solar/test_solar.py::test_idea_validation_gate_rejects_a_wrong_lowering"
    ),
    "the fused bound counts only compulsory traffic": (
        "tests/methods/solar/test_solar.py::test_idea_fused_bound_counts_only_the_programs_compulsory_traffic"
    ),
    "the cache-aware bound (Hong-Kung)": (
        "tests/methods/solar/test_solar.py::test_idea_cache_aware_bound_uses_hong_kung_when_cache_is_small"
    ),
}
# tests/test_conformance.py: no ecosystem API family fits this method's public API.
CONFORMANCE: tuple[tuple[str, str], ...] = ()
CONFORMANCE_REASON: str = (
    "SOLAR analyses torch/JAX programs into speed-of-light bounds; it consumes modules but exposes no "
    "module, optimizer, env, estimator or model-transform API itself."
)

__all__ = [
    "CONFORMANCE",
    "CONFORMANCE_REASON",
    "FIDELITIES",
    "IDEAS",
    "PEAK_FACTOR",
    "Access",
    "Affine",
    "Bounds",
    "EinsumNode",
    "HardwareSpec",
    "IRGraph",
    "InverseRoofline",
    "OpCall",
    "OpCost",
    "RecordedLowerings",
    "ReplayNode",
    "SOLARAnalyzer",
    "SOLReport",
    "Validation",
    "ViolationAudit",
    "analyze",
    "calibrate",
    "calibrate_cpu_local",
    "check",
    "execute_graph",
    "inverse_roofline",
    "is_loaded",
    "known_hardware",
    "load_hardware",
    "load_rule_plugins",
    "merge_calibrations",
    "parse_description",
    "rebound",
    "refresh_calibration",
    "register_rule",
    "rule_from_description",
    "save_hardware",
    "unregister_rule",
]
