"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the LLM plug-in slot for lowerings.

The paper's LLM frontend writes the loop-nest IR of an op. Here that is an optional plug-in: something
(an LLM, a person, a file) produces a **lowering description** — plain data, one extended einsum per op —
and :func:`rule_from_description` turns it into an ordinary rule (:func:`~.rules.register_rule`). Nothing
it emits is trusted: the description is checked against a schema (every rank has an extent, every index is
affine in declared ranks, operand arguments exist) and the resulting IR node must pass the same validation
gate as the built-in lowerings — the program and the IR run on random inputs and must agree, so a wrong
response makes ``report.validated`` False.

:class:`RecordedLowerings` is the plug-in CI uses: it replays responses recorded as JSON files (no model).
A package ships a plug-in through the entry-point group ``neurips26.solar.rules`` (see
:func:`~.rules.load_rule_plugins`); the entry point is a callable that registers its rules.

A description (JSON)::

    {"op": "mylib::bilinear", "kind": "contraction",
     "ranks": {"b": "arg0.shape[0]", "i": "arg0.shape[1]", "o": "arg1.shape[0]", "j": "arg1.shape[2]"},
     "operands": [{"arg": 0, "index": ["b", "i"]}, {"arg": 1, "index": ["o", "i", "j"]},
                  {"arg": 2, "index": ["b", "j"]}],
     "output": ["b", "o"], "guards": [], "reduce": "add", "scale": 1.0}

Indices and guards are affine strings (``"2*p + r - 1"``); a guard means ``expression >= 0``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from neurips26.methods.solar.ir import Access, Affine, EinsumNode, dtype_name
from neurips26.methods.solar.rules import OpCall, OpCost, Rule, register_rule

_EXTENT = re.compile(r"^arg(\d+)\.shape\[(-?\d+)\]$")
_TERM = re.compile(r"^(?:(-?\d+)\s*\*\s*)?([A-Za-z_]\w*)$|^(-?\d+)$")
KINDS = ("contraction", "reduction")


@dataclass(frozen=True)
class LoweringDescription:
    """A parsed, schema-checked lowering: one extended einsum over the op's tensor arguments."""

    op: str
    kind: str
    ranks: dict[str, Any]  # rank -> (arg index, dim) or a fixed int extent
    operands: tuple[tuple[int, tuple[Affine, ...]], ...]
    output: tuple[tuple[str, ...], ...]
    guards: tuple[Affine, ...]
    reduce: str
    scale: float


def parse_affine(text: str, ranks: Mapping[str, Any], where: str) -> Affine:
    """``"2*p + r - 1"`` -> ``Affine((("p", 2), ("r", 1)), -1)``; every name must be a declared rank."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: an affine index must be a non-empty string, got {text!r}")
    terms: dict[str, int] = {}
    const = 0
    for sign, part in re.findall(r"([+-]?)\s*([^+-]+)", text.replace(" ", "")):
        match = _TERM.match(part)
        if match is None:
            raise ValueError(f"{where}: {text!r} is not affine (terms are 'c*rank', 'rank' or integers)")
        factor = -1 if sign == "-" else 1
        if match.group(3) is not None:
            const += factor * int(match.group(3))
            continue
        rank = match.group(2)
        if rank not in ranks:
            raise ValueError(f"{where}: {text!r} uses rank {rank!r}, not among the declared {sorted(ranks)}")
        terms[rank] = terms.get(rank, 0) + factor * int(match.group(1) or 1)
    return Affine(tuple((r, c) for r, c in terms.items() if c), const)


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], op: str) -> Any:
    if key not in data:
        raise ValueError(f"lowering description for {op!r}: missing field {key!r}")
    if not isinstance(data[key], kind):
        raise ValueError(f"lowering description for {op!r}: field {key!r} has the wrong type ({data[key]!r})")
    return data[key]


def parse_description(data: Mapping[str, Any]) -> LoweringDescription:
    """Check a description against the schema; errors name the op, the field and what is allowed."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a lowering description must be a JSON object, got {type(data).__name__}")
    op = data.get("op")
    if not isinstance(op, str) or "::" not in op:
        raise ValueError(f"lowering description: field 'op' must be 'namespace::name', got {op!r}")
    kind = data.get("kind", "contraction")
    if kind not in KINDS:
        raise ValueError(f"lowering description for {op!r}: kind={kind!r}; allowed {list(KINDS)}")
    ranks: dict[str, Any] = {}
    for rank, extent in _require(data, "ranks", Mapping, op).items():
        if isinstance(extent, int) and extent > 0:
            ranks[rank] = extent
            continue
        match = _EXTENT.match(str(extent))
        if match is None:
            raise ValueError(
                f"lowering description for {op!r}: rank {rank!r} has extent {extent!r}; use a positive "
                "integer or 'argN.shape[d]'"
            )
        ranks[rank] = (int(match.group(1)), int(match.group(2)))
    operands = []
    for i, operand in enumerate(_require(data, "operands", list, op)):
        where = f"lowering description for {op!r}, operand {i}"
        if not isinstance(operand, Mapping) or not isinstance(operand.get("arg"), int):
            raise ValueError(f"{where}: needs an integer 'arg' and an 'index' list")
        index = tuple(parse_affine(a, ranks, where) for a in operand.get("index", []))
        operands.append((int(operand["arg"]), index))
    if not operands:
        raise ValueError(f"lowering description for {op!r}: 'operands' is empty")
    output = []
    for group in _require(data, "output", list, op):
        names = (group,) if isinstance(group, str) else tuple(group)
        for name in names:
            if name not in ranks:
                raise ValueError(f"lowering description for {op!r}: output rank {name!r} is not declared")
        output.append(names)
    guards = tuple(
        parse_affine(g, ranks, f"lowering description for {op!r}, guard") for g in data.get("guards", [])
    )
    reduce = data.get("reduce", "add")
    if reduce not in ("add", "max"):
        raise ValueError(f"lowering description for {op!r}: reduce={reduce!r}; allowed ['add', 'max']")
    return LoweringDescription(
        op, kind, ranks, tuple(operands), tuple(output), guards, reduce, float(data.get("scale", 1.0))
    )


def rule_from_description(description: LoweringDescription | Mapping[str, Any]) -> Rule:
    """A rule that lowers the op to the described einsum (MACs = its exact guarded domain size)."""
    desc = description if isinstance(description, LoweringDescription) else parse_description(description)

    def rule(call: OpCall) -> OpCost:
        tensors = [a for a in call.args if isinstance(a, torch.Tensor)]

        def arg(i: int) -> torch.Tensor:
            if not 0 <= i < len(tensors):
                raise ValueError(
                    f"lowering for {desc.op!r} refers to tensor argument {i}; the call has {len(tensors)}"
                )
            return tensors[i]

        extents = {
            r: (e if isinstance(e, int) else int(arg(e[0]).shape[e[1]])) for r, e in desc.ranks.items()
        }
        node = EinsumNode(
            call.node_name(".described"),
            call.op,
            extents,
            [Access(call.name(arg(i)), index) for i, index in desc.operands],
            call.output_names[0],
            desc.output,
            reduce=desc.reduce,
            guards=desc.guards,
            scale=desc.scale,
            compute_dtype=dtype_name(arg(desc.operands[0][0]).dtype),
            kind="einsum" if desc.kind == "contraction" else "reduction",
        )
        if desc.kind == "contraction":
            return OpCost("contraction", {node.compute_dtype: node.points()}, 0, [node])
        return OpCost("reduction", {}, node.points(), [node])

    return rule


class RecordedLowerings:
    """The plug-in that replays recorded lowering responses (one JSON object, or a list, per file).

    ``RecordedLowerings(path)()`` registers a rule per recorded op and returns the op names; use it as the
    callable behind a ``neurips26.solar.rules`` entry point, or call it directly.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise ValueError(f"path={str(self.path)!r}: no recorded lowering responses there")

    def descriptions(self) -> list[LoweringDescription]:
        files = sorted(self.path.glob("*.json")) if self.path.is_dir() else [self.path]
        found = []
        for file in files:
            data = json.loads(file.read_text())
            found.extend(parse_description(d) for d in (data if isinstance(data, list) else [data]))
        return found

    def __call__(self) -> list[str]:
        registered = []
        for desc in self.descriptions():
            register_rule(desc.op, rule_from_description(desc))
            registered.append(desc.op)
        return registered
