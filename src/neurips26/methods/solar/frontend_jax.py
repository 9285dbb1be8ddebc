"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the JAX frontend (``jax.make_jaxpr``).

The jaxpr is walked equation by equation, inlining ``jit``/``pjit``/``closed_call``/``custom_jvp_call``/
``custom_vjp_call`` bodies. Loops are counted by their trips: a ``scan`` body is multiplied by its static
``length``; a ``while`` loop's trips are counted by running it on the concrete example inputs (inside a
``scan``, or with abstract inputs, a ``while`` counts one trip and the report says ``trip-unknown``); a
``cond`` contributes the cheapest branch (an implementation runs only one). ``dot_general`` lowers to an
:class:`~neurips26.methods.solar.ir.EinsumNode`; every other top-level equation (loops included) replays
through ``jax`` so the validation gate can run the IR against the function.

XLA's ``cost_analysis`` counts a ``scan``/``while`` body once and ``jax.experimental.roofline`` counts a
``scan`` body once and a ``while``/``cond`` as zero (research notes §4; :mod:`.baselines`); this frontend is
the fix. Optional: import only when ``jax`` is installed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from neurips26.methods.solar.frontend_torch import OpRecord, Trace
from neurips26.methods.solar.ir import Access, Affine, EinsumNode, IRGraph, ReplayNode, ValueRef

_INLINE = (
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "custom_jvp_call",
    "custom_vjp_call",
    "remat",
    "checkpoint",
)
_SLICES = ("slice", "dynamic_slice", "gather", "squeeze", "index_in_dim")
_ZERO_COST = ("reshape", "squeeze", "expand_dims", "broadcast_in_dim", "transpose", "iota", "copy_p")
_MOVEMENT = (
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "concatenate",
    "pad",
    "gather",
    "scatter",
    "scatter-add",
    "scatter_add",
    "rev",
    "select_n",
    "convert_element_type",
    "copy",
    "clamp",
    "sort",
)
_REDUCTIONS = (
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "argmax",
    "argmin",
    "reduce_and",
    "reduce_or",
    "cumsum",
    "cumprod",
    "cummax",
    "cumlogsumexp",
)
_ELEMENTWISE = (
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "exp",
    "exp2",
    "log",
    "log1p",
    "tanh",
    "logistic",
    "sin",
    "cos",
    "tan",
    "sqrt",
    "rsqrt",
    "cbrt",
    "pow",
    "integer_pow",
    "max",
    "min",
    "abs",
    "sign",
    "floor",
    "ceil",
    "round",
    "erf",
    "erfc",
    "erf_inv",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "and",
    "or",
    "not",
    "xor",
    "atan2",
    "square",
    "rem",
    "is_finite",
    "expm1",
    "nextafter",
    "stop_gradient",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "reduce_precision",
    "shift_left",
    "shift_right_logical",
    "shift_right_arithmetic",
    "population_count",
    "imag",
    "real",
    "conj",
)


def _size(aval: Any) -> int:
    return int(math.prod(aval.shape)) if aval.shape else 1


def _nbytes(aval: Any) -> int:
    return _size(aval) * np.dtype(aval.dtype).itemsize


def _dtype(aval: Any) -> str:
    return str(np.dtype(aval.dtype)) if np.dtype(aval.dtype).name != "bfloat16" else "bfloat16"


def _is_literal(v: Any) -> bool:
    from jax.extend.core import Literal

    return isinstance(v, Literal)


def dot_general_macs(lhs: Any, rhs: Any, params: dict[str, Any]) -> int:
    """``∏ batch x ∏ lhs free x ∏ rhs free x ∏ contracted`` from ``dimension_numbers``."""
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lhs_free = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rhs_free = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    return int(
        math.prod(lhs.shape[d] for d in lb)
        * math.prod(lhs.shape[d] for d in lhs_free)
        * math.prod(rhs.shape[d] for d in rhs_free)
        * math.prod(lhs.shape[d] for d in lc)
    )


def conv_macs(lhs: Any, rhs: Any, out: Any, params: dict[str, Any]) -> int:
    """Valid (non-padding) taps of ``conv_general_dilated``: ``N x O x C/G x ∏_d #{(p, r) in range}``."""
    dn = params["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    strides, padding = params["window_strides"], params["padding"]
    rhs_dil = params.get("rhs_dilation") or (1,) * len(strides)
    if any(d != 1 for d in (params.get("lhs_dilation") or ())):
        taps = math.prod(rhs.shape[rhs_spec[2 + i]] * out.shape[out_spec[2 + i]] for i in range(len(strides)))
    else:
        taps = 1
        for i in range(len(strides)):
            size, k = lhs.shape[lhs_spec[2 + i]], rhs.shape[rhs_spec[2 + i]]
            n_out = out.shape[out_spec[2 + i]]
            lo = padding[i][0]
            taps *= sum(
                1 for p in range(n_out) for r in range(k) if 0 <= p * strides[i] + r * rhs_dil[i] - lo < size
            )
    n, o = lhs.shape[lhs_spec[0]], rhs.shape[rhs_spec[0]]
    c_per_group = rhs.shape[rhs_spec[1]]
    return int(n * o * c_per_group * taps // max(1, params.get("batch_group_count", 1)))


def conv_macs_conventional(lhs: Any, rhs: Any, out: Any, params: dict[str, Any]) -> int:
    """Every tap of ``conv_general_dilated``, padding included (FlopCounterMode's and fvcore's count):
    ``N x O x C/G x ∏ output spatial x ∏ kernel spatial``."""
    dn = params["dimension_numbers"]
    spatial = len(params["window_strides"])
    n, o = lhs.shape[dn.lhs_spec[0]], rhs.shape[dn.rhs_spec[0]]
    c_per_group = rhs.shape[dn.rhs_spec[1]]
    taps = math.prod(rhs.shape[dn.rhs_spec[2 + i]] * out.shape[dn.out_spec[2 + i]] for i in range(spatial))
    return int(n * o * c_per_group * taps // max(1, params.get("batch_group_count", 1)))


def _evaluate(eqn: Any, inputs: Sequence[Any]) -> list[Any] | None:
    """Concrete outputs of one equation (call-like primitives run their inner jaxpr); None if it fails."""
    from jax.extend.core import jaxpr_as_fun

    try:
        if eqn.primitive.name in _INLINE:
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr") or eqn.params.get("fun_jaxpr")
            return list(jaxpr_as_fun(inner)(*inputs))
        outs = eqn.primitive.bind(*inputs, **eqn.params)
        return list(outs) if eqn.primitive.multiple_results else [outs]
    except Exception:  # an equation we cannot run concretely only costs us while-loop trip counts below it
        return None


class _Walker:
    """Counts a jaxpr (recursively) into op records; builds the top-level IR."""

    def __init__(self, count_trips: bool = True) -> None:
        self.count_trips = count_trips  # False: every loop body once (the ablation / naive-walker control)
        self.ops: list[OpRecord] = []
        self.unknown: dict[str, int] = {}
        self.trip_unknown = False
        self.loops: list[tuple[str, int]] = []  # (primitive, trips used) per loop, pre-order

    def add(
        self,
        name: str,
        kind: str,
        macs: dict[str, int],
        flops: int,
        read: int,
        write: int,
        conventional: dict[str, int] | None = None,
    ) -> None:
        record = OpRecord(len(self.ops), f"jax::{name}", kind, macs, flops, read, write, [], conventional)
        self.ops.append(record)

    def count(
        self, jaxpr: Any, scale: int, concrete: Sequence[Any] | None = None, consts: Sequence[Any] = ()
    ) -> None:
        """Add the records of ``jaxpr`` times ``scale``; ``concrete`` are input values when known."""
        env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=False))
        if concrete is not None:
            env.update(zip(jaxpr.invars, concrete, strict=True))
        for eqn in jaxpr.eqns:
            inputs = [v.val if _is_literal(v) else env.get(v) for v in eqn.invars]
            known = concrete is not None and all(x is not None for x in inputs)
            self.count_eqn(eqn, scale, inputs if known else None)
            if known:
                outs = _evaluate(eqn, inputs)
                if outs is not None:
                    env.update(zip(eqn.outvars, outs, strict=True))

    def count_eqn(self, eqn: Any, scale: int, inputs: Sequence[Any] | None) -> None:
        name = eqn.primitive.name
        in_avals = [v.aval for v in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        read = sum(_nbytes(a) for a in in_avals if hasattr(a, "shape"))
        write = sum(_nbytes(a) for a in out_avals if hasattr(a, "shape"))
        if name in _INLINE:
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr") or eqn.params.get("fun_jaxpr")
            inner_jaxpr = getattr(inner, "jaxpr", inner)
            consts = list(getattr(inner, "consts", []))
            self.count(inner_jaxpr, scale, None if inputs is None else list(inputs), consts)
        elif name == "scan":
            length = int(eqn.params["length"]) if self.count_trips else 1
            self.loops.append(("scan", length))
            self.count(eqn.params["jaxpr"].jaxpr, scale * length)
        elif name == "while":
            trips = self.while_trips(eqn, inputs) if self.count_trips else 1
            self.loops.append(("while", trips))
            self.count(eqn.params["cond_jaxpr"].jaxpr, scale * (trips + 1))
            self.count(eqn.params["body_jaxpr"].jaxpr, scale * trips)
        elif name == "cond":
            self.count_cheapest_branch(eqn, scale)
        elif name == "dot_general":
            macs = dot_general_macs(in_avals[0], in_avals[1], eqn.params)
            self.add(name, "contraction", {_dtype(in_avals[0]): scale * macs}, 0, scale * read, scale * write)
        elif name == "conv_general_dilated":
            macs = conv_macs(in_avals[0], in_avals[1], out_avals[0], eqn.params)
            full = conv_macs_conventional(in_avals[0], in_avals[1], out_avals[0], eqn.params)
            dtype = _dtype(in_avals[0])
            conventional = {dtype: scale * full} if full != macs else None
            self.add(name, "contraction", {dtype: scale * macs}, 0, scale * read, scale * write, conventional)
        elif name in _ZERO_COST:
            self.add(name, "view", {}, 0, 0, 0)
        elif name in _MOVEMENT:
            self.add(name, "movement", {}, 0, scale * read, scale * write)
        elif name in _REDUCTIONS:
            self.add(
                name,
                "reduction",
                {},
                scale * sum(_size(a) for a in in_avals[:1]),
                scale * read,
                scale * write,
            )
        elif name in _ELEMENTWISE or name.startswith("random_"):
            self.add(name, "pointwise", {}, scale * _size(out_avals[0]), scale * read, scale * write)
        else:
            self.unknown[f"jax::{name}"] = self.unknown.get(f"jax::{name}", 0) + 1
            self.add(name, "unknown", {}, 0, scale * read, scale * write)

    def while_trips(self, eqn: Any, inputs: Sequence[Any] | None) -> int:
        """Run the loop on concrete values and count its trips (1 and ``trip_unknown`` when abstract)."""
        if inputs is None:
            self.trip_unknown = True
            return 1
        from jax.extend.core import jaxpr_as_fun

        p = eqn.params
        cond_consts = list(inputs[: p["cond_nconsts"]])
        body_consts = list(inputs[p["cond_nconsts"] : p["cond_nconsts"] + p["body_nconsts"]])
        carry = list(inputs[p["cond_nconsts"] + p["body_nconsts"] :])
        cond, body = jaxpr_as_fun(p["cond_jaxpr"]), jaxpr_as_fun(p["body_jaxpr"])
        trips = 0
        while bool(cond(*cond_consts, *carry)[0]):
            carry = list(body(*body_consts, *carry))
            trips += 1
        return trips

    def count_cheapest_branch(self, eqn: Any, scale: int) -> None:
        best: list[OpRecord] | None = None
        best_cost = math.inf
        for branch in eqn.params["branches"]:
            sub = _Walker()
            sub.count(branch.jaxpr, scale)
            cost = sum(sum(op.macs.values()) for op in sub.ops) + sum(op.bytes for op in sub.ops)
            if cost < best_cost:
                best, best_cost = sub.ops, cost
                self.unknown.update(sub.unknown)
        for op in best or []:
            self.ops.append(op)


def _build_graph(closed: Any, leaves: Sequence[Any]) -> tuple[IRGraph, dict[str, int]]:
    """IR for the validation gate: ``dot_general`` as einsums, every other equation replayed through jax."""
    import jax.numpy as jnp

    graph = IRGraph()
    names: dict[Any, str] = {}
    compulsory: dict[str, int] = {}
    for i, v in enumerate(closed.jaxpr.invars):
        names[v] = f"input{i}"
        graph.add_value(names[v], v.aval.shape, _dtype(v.aval), "input")
        graph.inputs.append(names[v])
    for i, (v, c) in enumerate(zip(closed.jaxpr.constvars, closed.consts, strict=True)):
        names[v] = f"const{i}"
        graph.add_value(names[v], np.shape(c), str(np.asarray(c).dtype), "constant")
        graph.weights.append(names[v])
    counter = 0
    for eqn in closed.jaxpr.eqns:
        outs = []
        for v in eqn.outvars:
            counter += 1
            names[v] = f"v{counter}"
            graph.add_value(names[v], v.aval.shape, _dtype(v.aval), "temp")
            outs.append(names[v])
        args = tuple(ValueRef(names[v]) if not _is_literal(v) else np.asarray(v.val) for v in eqn.invars)
        for v in eqn.invars:  # compulsory traffic: program inputs, sliced ones only for what is read
            if not _is_literal(v) and names[v].startswith(("input", "const")):
                touched = _nbytes(eqn.outvars[0].aval) if eqn.primitive.name in _SLICES else _nbytes(v.aval)
                compulsory[names[v]] = max(compulsory.get(names[v], 0), touched)
        if eqn.primitive.name == "dot_general" and all(isinstance(a, ValueRef) for a in args):
            graph.nodes.append(_dot_general_node(eqn, args, outs[0]))
            continue
        if eqn.primitive.name == "conv_general_dilated" and all(isinstance(a, ValueRef) for a in args):
            node = _conv_node(eqn, args, outs[0])
            if node is not None:
                graph.nodes.append(node)
                continue

        def replay(*xs: Any, _eqn: Any = eqn) -> Any:
            vals = [jnp.asarray(x.numpy()) if isinstance(x, torch.Tensor) else x for x in xs]
            out = _evaluate(_eqn, vals)
            if out is None:
                raise RuntimeError(f"cannot replay jax equation {_eqn.primitive.name}")
            return [torch.from_numpy(np.array(o)) for o in out]

        graph.nodes.append(
            ReplayNode(
                f"eqn{counter}.{eqn.primitive.name}",
                f"jax::{eqn.primitive.name}",
                "replay",
                replay,
                args,
                {},
                outs,
                [a.name for a in args if isinstance(a, ValueRef)],
            )
        )
    for v in closed.jaxpr.outvars:
        name = names[v] if not _is_literal(v) else None
        if name is not None:
            graph.outputs.append(name)
            if graph.values[name].role == "temp":
                graph.values[name].role = "output"
    return graph, compulsory


def _dot_general_node(eqn: Any, args: tuple[Any, ...], out: str) -> EinsumNode:
    lhs, rhs = (v.aval for v in eqn.invars)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    l_r = [f"l{d}" for d in range(len(lhs.shape))]
    r_r = [f"r{d}" for d in range(len(rhs.shape))]
    for i, (a, b) in enumerate(zip(lb, rb, strict=True)):
        l_r[a] = r_r[b] = f"b{i}"
    for i, (a, b) in enumerate(zip(lc, rc, strict=True)):
        l_r[a] = r_r[b] = f"k{i}"
    ranks = {r: int(s) for r, s in zip(l_r, lhs.shape, strict=True)}
    ranks.update({r: int(s) for r, s in zip(r_r, rhs.shape, strict=True)})
    out_r = [f"b{i}" for i in range(len(lb))]
    out_r += [r for r in l_r if r.startswith("l")] + [r for r in r_r if r.startswith("r")]
    return EinsumNode(
        f"{out}.dot_general",
        "jax::dot_general",
        ranks,
        [
            Access(args[0].name, tuple(Affine.of(r) for r in l_r)),
            Access(args[1].name, tuple(Affine.of(r) for r in r_r)),
        ],
        out,
        tuple((r,) for r in out_r),
        compute_dtype=_dtype(lhs),
    )


def _conv_node(eqn: Any, args: tuple[Any, ...], out: str) -> EinsumNode | None:
    """``conv_general_dilated`` as a guarded sliding-window einsum (the JAX twin of solar's PyTorch rule):
    ``Y[n, g*O+o, p] += X[n, g*C+c, p*s + r*d - lo] * W[g*O+o, c, r]``, guards keeping the taps inside the
    input. None (the equation is replayed) for input dilation or batch groups."""
    params = eqn.params
    if any(d != 1 for d in (params.get("lhs_dilation") or ())) or params.get("batch_group_count", 1) != 1:
        return None
    lhs, rhs = (v.aval for v in eqn.invars)
    out_aval = eqn.outvars[0].aval
    dn = params["dimension_numbers"]
    nd = len(params["window_strides"])
    groups = int(params.get("feature_group_count", 1))
    rhs_dil = params.get("rhs_dilation") or (1,) * nd
    c_per_group = int(rhs.shape[dn.rhs_spec[1]])
    o_per_group = int(rhs.shape[dn.rhs_spec[0]]) // groups
    ranks = {"n": int(lhs.shape[dn.lhs_spec[0]]), "g": groups, "o": o_per_group, "c": c_per_group}
    x_idx: list[Affine] = [Affine.of("n")] * lhs.ndim
    w_idx: list[Affine] = [Affine.of("c")] * rhs.ndim
    out_ranks: list[tuple[str, ...]] = [("n",)] * out_aval.ndim
    x_idx[dn.lhs_spec[0]] = Affine.of("n")
    x_idx[dn.lhs_spec[1]] = Affine((("g", c_per_group), ("c", 1)))
    w_idx[dn.rhs_spec[0]] = Affine((("g", o_per_group), ("o", 1)))
    w_idx[dn.rhs_spec[1]] = Affine.of("c")
    out_ranks[dn.out_spec[0]] = ("n",)
    out_ranks[dn.out_spec[1]] = ("g", "o")
    guards = []
    for i in range(nd):
        p, r = f"p{i}", f"r{i}"
        ranks[p] = int(out_aval.shape[dn.out_spec[2 + i]])
        ranks[r] = int(rhs.shape[dn.rhs_spec[2 + i]])
        stride, dilation = int(params["window_strides"][i]), int(rhs_dil[i])
        lo, size = int(params["padding"][i][0]), int(lhs.shape[dn.lhs_spec[2 + i]])
        spatial = Affine(((p, stride), (r, dilation)), -lo)
        x_idx[dn.lhs_spec[2 + i]] = spatial
        w_idx[dn.rhs_spec[2 + i]] = Affine.of(r)
        out_ranks[dn.out_spec[2 + i]] = (p,)
        guards += [spatial, Affine(((p, -stride), (r, -dilation)), lo + size - 1)]
    return EinsumNode(
        f"{out}.conv",
        "jax::conv_general_dilated",
        ranks,
        [Access(args[0].name, tuple(x_idx)), Access(args[1].name, tuple(w_idx))],
        out,
        tuple(out_ranks),
        guards=tuple(guards),
        compute_dtype=_dtype(lhs),
    )


def _has_while(jaxpr: Any) -> bool:
    from jax.extend.core import subjaxprs

    return any(eqn.primitive.name == "while" for eqn in jaxpr.eqns) or any(
        _has_while(sub) for sub in subjaxprs(jaxpr)
    )


def trace_jax(fn: Callable[..., Any], example_inputs: Sequence[Any], count_trips: bool = True) -> Trace:
    """Trace a JAX function with ``jax.make_jaxpr`` and count it (see the module docstring).

    ``count_trips=False`` counts every loop body once, as a walker blind to loops would (an ablation)."""
    import jax

    closed = jax.make_jaxpr(fn)(*example_inputs)
    leaves = jax.tree_util.tree_leaves(tuple(example_inputs))
    concrete = all(hasattr(x, "shape") and not isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
    walker = _Walker(count_trips)
    # concrete evaluation only matters for while-loop trip counts, and costs an eager dispatch per equation
    concrete = concrete and count_trips and _has_while(closed.jaxpr)
    walker.count(closed.jaxpr, 1, list(leaves) if concrete else None, list(closed.consts))
    graph, compulsory = _build_graph(closed, leaves)
    writes = {name: graph.values[name].nbytes for name in graph.outputs}
    constants = {f"const{i}": torch.from_numpy(np.array(c)) for i, c in enumerate(closed.consts)}
    frontend = "jax-jaxpr" + (" (trip-unknown: a while loop counted once)" if walker.trip_unknown else "")
    return Trace(
        graph,
        walker.ops,
        compulsory,
        writes,
        walker.unknown,
        constants,
        frontend=frontend,
        loops=walker.loops,
    )
