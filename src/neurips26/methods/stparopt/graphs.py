"""Per-loop program graphs (static branch input) and access-site tokens (dynamic branch input).

Graph (Graph2Par-style augmented AST, ours in detail): one node per named tree-sitter node of the loop;
identifiers are typed by role (loop variable, pointer, read-only / private / carried / reduction
scalar); operators are folded into their expression's type. Relations: 0 child->parent, 1
parent->child, 2 next statement (control flow), 3 def-use (each read from its reaching write, and
the loop-carried back edge from the last write to a read before the first write), 4 consecutive
accesses of the same base array. Every relation is linear in the nodes.

Tokens: one per access site, from a :class:`~neurips26.methods.stparopt.profiler.LoopProfile`: kind
fractions, the stride histogram (0, +1, -1, constant, irregular), address span per trip, the
reservoir's distinct share, the indirect flag and the loop's sampled RAW/WAR/WAW rates and minimum
distance. The exact dependence verdict is never a feature (counts are sampled, on profiling inputs).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import torch
from torch_geometric.data import Data

from neurips26.methods.stparopt.frontend import ACCESS_TYPES, CFunction, Loop

N_RELATIONS = 5
_TYPES = [
    "for_statement",
    "compound_statement",
    "expression_statement",
    "declaration",
    "init_declarator",
    "primitive_type",
    "type_qualifier",
    "if_statement",
    "else_clause",
    "parenthesized_expression",
    "call_expression",
    "argument_list",
    "unary_expression",
    "cast_expression",
    "type_descriptor",
    "conditional_expression",
    "while_statement",
    "field_identifier",
    "number_literal",
    "subscript_expression",
    "field_expression",
    "pointer_declarator",
    "sized_type_specifier",
    "comma_expression",
    "condition_clause",
]
_OPS = [
    "=",
    "+=",
    "-=",
    "*=",
    "/=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "<",
    ">",
    "<=",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "++",
    "--",
    "!",
    "&",
    "|",
    "^",
    "<<",
    ">>",
]
_ROLES = ("loopvar", "pointer", "read_only", "private", "carried", "reduction", "local", "other")
VOCAB: dict[str, int] = {
    name: k
    for k, name in enumerate(
        ["<other>", *_TYPES, *(f"id:{r}" for r in _ROLES)]
        + [
            f"{t}:{op}"
            for t in ("binary_expression", "assignment_expression", "update_expression", "pointer_expression")
            for op in _OPS
        ]
    )
}
N_NODE_FEATURES = 6
N_TOKEN_FEATURES = 17


def _affine(index: str, var: str | None) -> tuple[float, float]:
    """(coefficient, is_affine) of ``index`` in the loop variable: ``3 * i + 1`` -> (3, 1)."""
    if var is None:
        return 0.0, 0.0
    text = index.replace(" ", "")
    if re.fullmatch(r"-?\d+", text):
        return 0.0, 1.0
    match = re.fullmatch(rf"(?:(\d+)\*)?{re.escape(var)}(?:[+-]\d+)?", text)
    if match:
        return float(match.group(1) or 1), 1.0
    return 0.0, 0.0


def _role(name: str, loop: Loop, function: CFunction) -> str:
    if name == loop.var:
        return "loopvar"
    for role, names in (
        ("read_only", loop.read_only_scalars),
        ("private", loop.private_scalars),
        ("carried", loop.carried_scalars),
        ("reduction", loop.reduction_scalars),
    ):
        if name in names:
            return role
    param = function.param(name)
    if (param is not None and param.pointer) or function.local_types.get(name, ("", False))[1]:
        return "pointer"
    return "local" if name in function.local_types else "other"


def _label(node: Any, loop: Loop, function: CFunction) -> str:
    if node.type == "identifier":
        return f"id:{_role(node.text.decode(), loop, function)}"
    op = node.child_by_field_name("operator")
    if node.type == "update_expression":
        op = next((c for c in node.children if not c.is_named), None)
    key = f"{node.type}:{op.text.decode()}" if op is not None else node.type
    return key if key in VOCAB else node.type


def loop_graph(function: CFunction, loop: Loop) -> Data:
    """The loop's graph: ``x`` (N,) vocabulary ids, ``feat`` (N, 6) numeric features, ``edge_index``
    (2, E), ``edge_type`` (E,), ``site_node`` (S,) the node of each access site."""
    nodes: list[Any] = []
    index_of: dict[int, int] = {}
    edges: list[tuple[int, int, int]] = []
    site_keys = {(s.start, s.end): s.site for s in loop.sites}
    site_node = [0] * len(loop.sites)

    def visit(node: Any, parent: int | None, depth: int) -> None:
        me = len(nodes)
        nodes.append((node, depth))
        index_of[node.id] = me
        if parent is not None:
            edges.append((me, parent, 0))
            edges.append((parent, me, 1))
        if node.type in ACCESS_TYPES and (node.start_byte, node.end_byte) in site_keys:
            site_node[site_keys[(node.start_byte, node.end_byte)]] = me
        previous_statement = None
        for child in node.named_children:
            if child.type in ("comment",):
                continue
            child_index = len(nodes)
            visit(child, me, depth + 1)
            if node.type == "compound_statement":
                if previous_statement is not None:
                    edges.append((previous_statement, child_index, 2))
                previous_statement = child_index

    visit(loop.node, None, 0)
    # def-use: every write of a name to the later reads; the last write to the first read (carried)
    occurrences: dict[str, list[tuple[int, bool]]] = {}
    for k, (node, _) in enumerate(nodes):
        if node.type == "identifier":
            parent = node.parent
            written = (
                parent.type in ("assignment_expression", "update_expression")
                and (
                    parent.child_by_field_name("left") is None
                    or parent.child_by_field_name("left").id == node.id
                )
            ) or parent.type == "init_declarator"
            occurrences.setdefault(node.text.decode(), []).append((k, written))
    for uses in occurrences.values():  # reaching definitions: each read from the latest write (linear)
        last_write = None
        for k, written in uses:
            if written:
                last_write = k
            elif last_write is not None:
                edges.append((last_write, k, 3))
        writes = [k for k, w in uses if w]
        reads = [k for k, w in uses if not w]
        if writes and reads and reads[0] < writes[0]:
            edges.append((writes[-1], reads[0], 3))  # the loop-carried back edge
    by_base: dict[str, list[int]] = {}
    for site in loop.sites:
        by_base.setdefault(site.base, []).append(site_node[site.site])
    for members in by_base.values():  # accesses of one array, chained in source order (linear)
        for a, b in itertools.pairwise(members):
            edges += [(a, b, 4), (b, a, 4)]
    x = torch.tensor([VOCAB.get(_label(n, loop, function), 0) for n, _ in nodes], dtype=torch.long)
    feat = torch.zeros(len(nodes), N_NODE_FEATURES)
    site_by_node = {site_node[s.site]: s for s in loop.sites}
    for k, (_, depth) in enumerate(nodes):
        feat[k, 0] = depth / 10.0
        site = site_by_node.get(k)
        if site is not None:
            coefficient, affine = _affine(site.index_text, loop.var)
            feat[k, 1] = affine
            feat[k, 2] = math.log1p(coefficient)
            feat[k, 3] = float(site.indirect)
            feat[k, 4] = float(site.kind in ("write", "update", "rw"))
            feat[k, 5] = float(site.kind == "update")
    edge = torch.tensor(edges, dtype=torch.long).reshape(-1, 3)
    return Data(
        x=x,
        feat=feat,
        edge_index=edge[:, :2].t().contiguous(),
        edge_type=edge[:, 2].contiguous(),
        site_node=torch.tensor(site_node, dtype=torch.long),
        num_nodes=len(nodes),
    )


def site_tokens(loop: Loop, profile: Any | None) -> torch.Tensor:
    """(S, 17) access-site tokens from ``profile`` (zeros but the static flags when it is None)."""
    tokens = torch.zeros(len(loop.sites), N_TOKEN_FEATURES)
    for site in loop.sites:
        row = tokens[site.site]
        row[11] = float(site.indirect)
        if profile is None:
            continue
        stats = profile.sites[site.site]
        count = max(stats["count"], 1)
        for k in range(4):
            row[k] = stats["kinds"][k] / count
        strides = max(sum(stats["hist"]), 1)
        for k in range(5):
            row[4 + k] = stats["hist"][k] / strides
        trips = max(getattr(profile, "observed", profile.trips), 1.0)  # iterations actually traced
        row[9] = math.log1p(stats["span"] / profile.runs / trips)
        row[10] = stats["distinct"] / max(stats["sample"], 1)
        row[12] = math.log1p(profile.raw / trips / profile.runs)
        row[13] = math.log1p(profile.war / trips / profile.runs)
        row[14] = math.log1p(profile.waw / trips / profile.runs)
        row[15] = 1.0 / profile.min_dist if profile.min_dist > 0 else 0.0
        row[16] = math.log10(trips) / 6.0
    return tokens
