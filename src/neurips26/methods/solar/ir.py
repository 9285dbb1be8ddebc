"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the executable einsum-graph IR.

The IR is a list of nodes over named values (buffers with a role: input, weight, output, temp):

* :class:`EinsumNode` — an extended einsum with **affine accesses**: ``Out[merge(out_ranks)] ⊕= ∏_i
  In_i[a_i0(r), a_i1(r), ...]`` over the iteration domain ``{r ∈ ∏[0, extent) : g(r) >= 0 for each guard g}``.
  Each index ``a(r) = Σ c_v·r_v + c0`` is affine, so strides, dilation and padding (out-of-range reads are 0)
  are coefficients; guards give non-rectangular domains (a causal mask is ``m - n >= 0``). ``⊕`` is ``add``
  or ``max``. The MAC count is the number of domain points — exact for triangles.
* :class:`ReplayNode` — a zero-, pointwise- or data-movement op that the IR executes by re-running the
  recorded ATen op on the IR's own buffers (its dataflow is checked by the gate, not its arithmetic).

:func:`execute_graph` runs the graph on concrete tensors; the validation gate compares that with the program.
Shared with ``solexecbench`` (issue #6).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

ROLES = ("input", "weight", "output", "temp", "constant")


@dataclass(frozen=True)
class Affine:
    """``Σ coeff·rank + const`` over the ranks (loop variables) of a node."""

    terms: tuple[tuple[str, int], ...]
    const: int = 0

    @staticmethod
    def of(rank: str) -> Affine:
        return Affine(((rank, 1),))

    @property
    def ranks(self) -> tuple[str, ...]:
        return tuple(r for r, _ in self.terms)

    @property
    def is_projection(self) -> bool:
        """True when the index is a single rank with coefficient 1 and no offset."""
        return len(self.terms) == 1 and self.terms[0][1] == 1 and self.const == 0

    def __str__(self) -> str:
        parts = [(r if c == 1 else f"{c}*{r}") for r, c in self.terms]
        if self.const:
            parts.append(str(self.const))
        return "+".join(parts) or "0"


@dataclass(frozen=True)
class Access:
    """``value[index_0, index_1, ...]`` with affine indices."""

    value: str
    index: tuple[Affine, ...]

    def __str__(self) -> str:
        return f"{self.value}[{', '.join(str(a) for a in self.index)}]"


@dataclass
class Value:
    """A tensor of the program: name, shape, dtype name and role."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str = "temp"
    stride: tuple[int, ...] | None = None  # the traced layout; IR-computed values are laid out the same

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * dtype_bytes(self.dtype)


def dtype_bytes(dtype: str | torch.dtype) -> int:
    """Bytes per element of a torch dtype (given as a dtype or its name)."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return torch.empty((), dtype=dtype).element_size()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass
class EinsumNode:
    """An extended einsum with affine accesses and guards (see the module docstring)."""

    name: str
    op: str
    ranks: dict[str, int]
    operands: list[Access]
    output: str
    out_ranks: tuple[tuple[str, ...], ...]
    reduce: str = "add"
    guards: tuple[Affine, ...] = ()
    scale: float = 1.0
    compute_dtype: str = "float32"
    kind: str = "einsum"
    out_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.reduce not in ("add", "max"):
            raise ValueError(f"EinsumNode.reduce must be 'add' or 'max', got {self.reduce!r}")
        used = {r for acc in self.operands for a in acc.index for r in a.ranks}
        used |= {r for group in self.out_ranks for r in group} | {r for g in self.guards for r in g.ranks}
        unknown = used - set(self.ranks)
        if unknown:
            raise ValueError(f"EinsumNode {self.name}: ranks {sorted(unknown)} have no extent")

    @property
    def inputs(self) -> list[str]:
        return [acc.value for acc in self.operands]

    @property
    def outputs(self) -> list[str]:
        return [self.output]

    @property
    def is_contraction(self) -> bool:
        """A MAC-producing node: two or more operands multiplied and summed."""
        return self.reduce == "add" and len(self.operands) >= 2

    def points(self) -> int:
        """Number of iteration-domain points (MACs for a contraction), exact under the guards."""
        return count_domain_points(self.ranks, self.guards)

    def is_matmul_like(self) -> bool:
        """Two projection operands and an output where every rank appears in at least two of the three.

        These are the contractions the Loomis–Whitney / Irony–Toledo–Tiskin I/O lower bound applies to.
        """
        if not (self.is_contraction and len(self.operands) == 2):
            return False
        if not all(a.is_projection for acc in self.operands for a in acc.index):
            return False
        sets = [{a.ranks[0] for a in acc.index} for acc in self.operands]
        sets.append({r for group in self.out_ranks for r in group})
        return all(sum(r in s for s in sets) >= 2 for r in self.ranks)

    def equation(self) -> str:
        """A SOLAR-style extended einsum string, e.g. ``A[m, k], B[k, n] -> C[m, n]``."""
        lhs = ", ".join(str(acc) for acc in self.operands)
        out = ", ".join("*".join(group) for group in self.out_ranks)
        guard = (" | " + ", ".join(f"{g} >= 0" for g in self.guards)) if self.guards else ""
        return f"{lhs} -> {self.output}[{out}]{guard}"

    def execute(self, env: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Run the einsum on concrete tensors (independently of the ATen op it came from)."""
        rank_names = list(self.ranks)
        letters = dict(zip(rank_names, string.ascii_letters, strict=False))
        if len(rank_names) > len(string.ascii_letters):
            raise ValueError(f"EinsumNode {self.name}: too many ranks ({len(rank_names)})")
        fill = 0.0 if self.reduce == "add" else -math.inf
        tensors, specs = [], []
        for acc in self.operands:
            tensor, ranks = gather_access(env[acc.value], acc, self.ranks, fill)
            tensors.append(tensor.to(torch.float64))
            specs.append("".join(letters[r] for r in ranks))
        out_order = [r for group in self.out_ranks for r in group]
        if self.guards and self.reduce == "add":  # one 0/1 factor per independent guard group
            if any(not g.terms and g.const < 0 for g in self.guards):  # an empty domain
                tensors.append(torch.zeros((), dtype=torch.float64))
                specs.append("")
            for group, _ in guard_components([g for g in self.guards if g.terms]):
                part, ranks = guard_mask(self.ranks, group)
                tensors.append(part.to(torch.float64))
                specs.append("".join(letters[r] for r in ranks))
        elif self.guards:
            mask, ranks = guard_mask(self.ranks, self.guards)
        if self.reduce == "add":
            result = torch.einsum(",".join(specs) + "->" + "".join(letters[r] for r in out_order), *tensors)
        else:
            if len(tensors) != 1:
                raise ValueError(f"EinsumNode {self.name}: reduce='max' takes one operand")
            full = _broadcast_to_ranks(tensors[0], specs[0], rank_names, letters, self.ranks)
            if self.guards:
                full = full.masked_fill(
                    ~_broadcast_to_ranks(
                        mask, "".join(letters[r] for r in ranks), rank_names, letters, self.ranks
                    ),
                    -math.inf,
                )
            reduced = [i for i, r in enumerate(rank_names) if r not in out_order]
            result = full.amax(dim=reduced) if reduced else full
            kept = [r for r in rank_names if r in out_order]
            result = result.permute([kept.index(r) for r in out_order])
        shape = [math.prod(self.ranks[r] for r in group) for group in self.out_ranks]
        dtype = getattr(torch, self.out_dtype) if self.out_dtype else env[self.operands[0].value].dtype
        return (result * self.scale).reshape(shape).to(dtype)


def _broadcast_to_ranks(
    tensor: torch.Tensor,
    spec: str,
    rank_names: list[str],
    letters: dict[str, str],
    extents: Mapping[str, int],
) -> torch.Tensor:
    order = [letters[r] for r in rank_names]
    perm = sorted(range(len(spec)), key=lambda i: order.index(spec[i]))
    tensor = tensor.permute(perm)
    present = sorted(spec, key=order.index)
    shape = [extents[r] if letters[r] in present else 1 for r in rank_names]
    return tensor.reshape(shape).expand([extents[r] for r in rank_names])


def gather_access(
    value: torch.Tensor, acc: Access, extents: Mapping[str, int], fill: float
) -> tuple[torch.Tensor, list[str]]:
    """Materialise ``value[acc.index]`` over the ranks the access uses (out-of-range reads give ``fill``).

    Returns the gathered tensor and its rank order. Pure distinct projections take a permute/no-copy path.
    """
    if len(acc.index) != value.dim():
        raise ValueError(f"access {acc} has {len(acc.index)} indices for a {value.dim()}-d tensor")
    if all(a.is_projection for a in acc.index) and len({a.ranks[0] for a in acc.index}) == len(acc.index):
        return value, [a.ranks[0] for a in acc.index]
    ranks: list[str] = []
    for a in acc.index:
        for r in a.ranks:
            if r not in ranks:
                ranks.append(r)
    grids = torch.meshgrid(*[torch.arange(extents[r]) for r in ranks], indexing="ij") if ranks else []
    by_rank = dict(zip(ranks, grids, strict=True))
    shape = [extents[r] for r in ranks]
    valid = torch.ones(shape, dtype=torch.bool)
    indices = []
    for dim, a in enumerate(acc.index):
        idx = torch.full(shape, a.const, dtype=torch.long)
        for r, c in a.terms:
            idx = idx + c * by_rank[r]
        valid &= (idx >= 0) & (idx < value.shape[dim])
        indices.append(idx.clamp(0, value.shape[dim] - 1))
    gathered = value[tuple(indices)]
    return gathered.masked_fill(~valid, fill), ranks


def guard_mask(extents: Mapping[str, int], guards: Sequence[Affine]) -> tuple[torch.Tensor, list[str]]:
    """Boolean mask over the ranks the guards mention: True where every guard is >= 0."""
    ranks: list[str] = []
    for g in guards:
        for r in g.ranks:
            if r not in ranks:
                ranks.append(r)
    grids = torch.meshgrid(*[torch.arange(extents[r]) for r in ranks], indexing="ij")
    by_rank = dict(zip(ranks, grids, strict=True))
    mask = torch.ones([extents[r] for r in ranks], dtype=torch.bool)
    for g in guards:
        expr = torch.full(mask.shape, g.const, dtype=torch.long)
        for r, c in g.terms:
            expr = expr + c * by_rank[r]
        mask &= expr >= 0
    return mask, ranks


def guard_components(guards: Sequence[Affine]) -> list[tuple[list[Affine], list[str]]]:
    """Split guards into independent groups: two guards share a group when they share a rank.

    The domain is the product of the groups' domains (the spatial dimensions of a convolution are
    independent), so its points and its mask factor over the groups. Groups keep the guards' order.
    """
    groups: list[tuple[list[Affine], list[str]]] = []
    for g in guards:
        ranks = list(dict.fromkeys(g.ranks))
        joined = [grp for grp in groups if set(grp[1]) & set(ranks)]
        merged_guards = [x for grp in joined for x in grp[0]] + [g]
        merged_ranks = list(dict.fromkeys([r for grp in joined for r in grp[1]] + ranks))
        groups = [grp for grp in groups if grp not in joined]
        groups.append((merged_guards, merged_ranks))
    return groups


def count_domain_points(extents: Mapping[str, int], guards: Sequence[Affine], cap: int = 10**8) -> int:
    """Exact number of integer points of ``∏[0, extent)`` with every guard ``>= 0``.

    Ranks no guard mentions multiply in, and independent guard groups (:func:`guard_components`) are
    counted separately and multiplied. Within a group, every rank but the one with the largest extent is
    enumerated (vectorised, up to ``cap`` points) and that one is counted in closed form: each guard is
    linear in it, so it cuts ``[0, extent)`` to an interval.
    """
    if any(not g.terms and g.const < 0 for g in guards):
        return 0
    guard_ranks = {r for g in guards for r in g.ranks}
    total = math.prod(v for r, v in extents.items() if r not in guard_ranks)
    for group, ranks in guard_components([g for g in guards if g.terms]):
        total *= _count_group_points(extents, group, ranks, cap)
    return total


def _count_group_points(
    extents: Mapping[str, int], guards: Sequence[Affine], ranks: Sequence[str], cap: int
) -> int:
    last = max(ranks, key=lambda r: extents[r])
    outer = [r for r in ranks if r != last]
    n_outer = math.prod(extents[r] for r in outer)
    if n_outer > cap:
        raise ValueError(
            f"guarded domain over {outer} has {n_outer} points (> cap {cap}); annotate the count"
        )
    grids = (
        np.meshgrid(*[np.arange(extents[r], dtype=np.int64) for r in outer], indexing="ij") if outer else []
    )
    by_rank = {r: g.ravel() for r, g in zip(outer, grids, strict=True)}
    lo = np.zeros(max(n_outer, 1), dtype=np.int64)
    hi = np.full(max(n_outer, 1), extents[last] - 1, dtype=np.int64)
    for g in guards:
        rest = np.full(lo.shape, g.const, dtype=np.int64)
        coeff = 0
        for r, c in g.terms:
            if r == last:
                coeff += c
            else:
                rest = rest + c * by_rank[r]
        if coeff > 0:  # coeff*z + rest >= 0  <=>  z >= ceil(-rest / coeff)
            lo = np.maximum(lo, -np.floor_divide(rest, coeff))
        elif coeff < 0:  # z <= floor(rest / -coeff)
            hi = np.minimum(hi, np.floor_divide(rest, -coeff))
        else:
            hi = np.where(rest >= 0, hi, -1)
    return int(np.clip(hi - lo + 1, 0, None).sum())


@dataclass(frozen=True)
class ValueRef:
    """A placeholder for an IR value inside a recorded op's arguments."""

    name: str


@dataclass
class ReplayNode:
    """An op the IR executes by re-running the recorded ATen op on IR buffers.

    ``kind`` is ``view`` (aliasing, no traffic), ``pointwise``, ``reduction``, ``movement`` (copies, gathers,
    concatenation), ``normalization``, ``creation`` or ``custom``.
    """

    name: str
    op: str
    kind: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[str | None]
    inputs: list[str] = field(default_factory=list)

    def execute(self, env: Mapping[str, torch.Tensor]) -> Any:
        def resolve(x: Any) -> Any:
            if isinstance(x, ValueRef):
                return env[x.name]
            if isinstance(x, (list, tuple)):
                return type(x)(resolve(y) for y in x)
            return x

        return self.func(*resolve(self.args), **{k: resolve(v) for k, v in self.kwargs.items()})


Node = EinsumNode | ReplayNode


@dataclass
class IRGraph:
    """Values plus nodes in execution order; ``inputs``/``weights``/``outputs`` name program buffers."""

    values: dict[str, Value] = field(default_factory=dict)
    nodes: list[Any] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    weights: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def add_value(self, name: str, shape: Sequence[int], dtype: str, role: str = "temp") -> Value:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        value = Value(name, tuple(int(s) for s in shape), dtype, role)
        self.values[name] = value
        return value


def execute_graph(graph: IRGraph, feeds: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """Execute ``graph`` on concrete inputs/weights and return its outputs in order."""
    missing = [n for n in (*graph.inputs, *graph.weights) if n not in feeds]
    if missing:
        raise ValueError(f"execute_graph: feeds lack {missing}")
    env: dict[str, Any] = dict(feeds)
    for node in graph.nodes:
        result = node.execute(env)
        if isinstance(node, EinsumNode):
            env[node.output] = _as_traced_layout(result, graph.values.get(node.output))
            continue
        ours = not isinstance(node.func, torch._ops.OpOverload)  # our own python epilogues, softmax, ...
        flat = list(result) if isinstance(result, (list, tuple)) else [result]
        for name, tensor in zip(node.outputs, flat, strict=False):
            if name is not None:
                env[name] = _as_traced_layout(tensor, graph.values.get(name)) if ours else tensor
    return [env[name] for name in graph.outputs]


def _as_traced_layout(tensor: Any, value: Value | None) -> Any:
    """Lay an IR-computed tensor out with the traced strides, so later view ops replay as in the program."""
    if value is None or value.stride is None or not isinstance(tensor, torch.Tensor):
        return tensor
    if tuple(tensor.shape) != value.shape or tuple(tensor.stride()) == value.stride:
        return tensor
    if not _is_dense(value.shape, value.stride):
        return tensor
    out = torch.empty_strided(value.shape, value.stride, dtype=tensor.dtype)
    return out.copy_(tensor)


def _is_dense(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """True for a non-overlapping, dense layout (a permutation of a contiguous one)."""
    expected = 1
    for size, st in sorted(zip(shape, stride, strict=True), key=lambda p: p[1]):
        if size == 1:
            continue
        if st != expected:
            return False
        expected *= size
    return True
