"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — validated SOL bounds for PyTorch programs.

Public API::

    report = analyze(model, example_inputs, hw="H200")   # SOLReport: counts, bounds, validated
    audit = check(report, measured_seconds)               # violation audit
    need = inverse_roofline(report, target_seconds)       # bandwidth and FLOP/s for a target latency

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
    HardwareSpec,
    calibrate_cpu_local,
    known_hardware,
    load_hardware,
    save_hardware,
)
from neurips26.methods.solar.ir import Access, Affine, EinsumNode, IRGraph, ReplayNode, execute_graph
from neurips26.methods.solar.rules import OpCall, OpCost, register_rule, unregister_rule
from neurips26.methods.solar.validation import Validation

__all__ = [
    "FIDELITIES",
    "Access",
    "Affine",
    "Bounds",
    "EinsumNode",
    "HardwareSpec",
    "IRGraph",
    "InverseRoofline",
    "OpCall",
    "OpCost",
    "ReplayNode",
    "SOLARAnalyzer",
    "SOLReport",
    "Validation",
    "ViolationAudit",
    "analyze",
    "calibrate_cpu_local",
    "check",
    "execute_graph",
    "inverse_roofline",
    "known_hardware",
    "load_hardware",
    "rebound",
    "register_rule",
    "save_hardware",
    "unregister_rule",
]
