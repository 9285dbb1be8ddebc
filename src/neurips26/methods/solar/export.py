"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — SOLAR-compatible einsum-graph YAML export.

Field names follow NVlabs/SOLAR's ``einsum_graph.yaml`` layout (one entry per layer with ``type``,
``einsum_equation``, ``tensor_names``/``tensor_types``/``tensor_shapes``, ``elementwise_op``,
``reduction_op``, ``is_real_einsum``, ``connections``), so downstream tools that read that layout can read
ours; SOLAR's rank letters are replaced by our rank names and affine indices (e.g. ``p0+r0+-1``).
"""

from __future__ import annotations

from typing import Any

import yaml

from neurips26.methods.solar.core import SOLReport
from neurips26.methods.solar.ir import EinsumNode, IRGraph


def _role(graph: IRGraph, name: str) -> str:
    value = graph.values.get(name)
    return {"input": "input", "weight": "weight", "constant": "weight", "output": "output"}.get(
        value.role if value else "temp", "intermediate"
    )


def einsum_graph(report: SOLReport) -> dict[str, Any]:
    """The report's IR as a SOLAR-style ``{"layers": {...}}`` mapping."""
    if report.graph is None:
        raise ValueError("report has no IR graph attached (it was loaded from JSON); re-run analyze")
    graph = report.graph
    producers: dict[str, str] = {}
    layers: dict[str, Any] = {}
    alias: dict[str, str] = {}  # a view's value -> the buffer it views
    for node in graph.nodes:
        if not isinstance(node, EinsumNode) and node.kind == "view" and node.inputs:
            for out in node.outputs:
                if out:
                    alias[out] = alias.get(node.inputs[0], node.inputs[0])
    for node in graph.nodes:
        if isinstance(node, EinsumNode):
            names = [*node.inputs, node.output]
            entry = {
                "type": node.op,
                "einsum_equation": node.equation(),
                "elementwise_op": "mul" if node.is_contraction else "copy",
                "reduction_op": node.reduce if len(node.out_ranks) < len(node.ranks) else "none",
                "is_real_einsum": node.is_contraction,
                "macs": node.points() if node.is_contraction else 0,
                "rank_sizes": dict(node.ranks),
            }
        else:
            if node.kind == "view":
                continue
            names = [*node.inputs, *[n for n in node.outputs if n]]
            entry = {
                "type": node.op,
                "einsum_equation": None,
                "elementwise_op": node.kind,
                "reduction_op": "none",
                "is_real_einsum": False,
                "macs": 0,
            }
        names = [alias.get(n, n) for n in names]
        entry["tensor_names"] = names
        entry["tensor_types"] = [_role(graph, n) for n in names[:-1]] + ["output"]
        entry["tensor_shapes"] = [list(graph.values[n].shape) if n in graph.values else None for n in names]
        entry["connections"] = sorted({producers[n] for n in names[:-1] if n in producers})
        for out in names[len(names) - 1 :]:
            producers[out] = node.name
        layers[node.name] = entry
    return {"program": report.program, "layers": layers}


def to_solar_yaml(report: SOLReport) -> str:
    """YAML text of :func:`einsum_graph` plus the bounds (seconds) on the report's hardware."""
    data = einsum_graph(report)
    data["hardware"] = report.hardware.name
    data["bounds_seconds"] = report.bounds.as_dict()
    return yaml.safe_dump(data, sort_keys=False)
