"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the validation gate for JAX programs.

``validate_jax`` draws random inputs, runs the function and the IR of its jaxpr (``dot_general`` and
convolutions as einsums executed by torch, other equations replayed through JAX) and compares them. Loops
are checked independently (issue #33): for each ``scan``/``while`` below the top level, **one unrolled
iteration** of the body runs as IR against JAX, and the **trip count** the frontend used is compared with a
counter carried through the loop and executed by XLA on the example inputs. ``validated`` needs
``MIN_CHECKED_SHARE`` of the MACs checked this way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from neurips26.methods.solar.frontend_jax import (
    _INLINE,
    _build_graph,
    _evaluate,
    _is_literal,
    conv_macs,
    dot_general_macs,
)
from neurips26.methods.solar.frontend_torch import Trace
from neurips26.methods.solar.ir import EinsumNode


def _direct_macs(jaxpr: Any) -> int:
    """MACs of one pass over ``jaxpr``'s own equations (nested loops and calls are checked separately)."""
    total = 0
    for eqn in jaxpr.eqns:
        avals = [v.aval for v in eqn.invars]
        if eqn.primitive.name == "dot_general":
            total += dot_general_macs(avals[0], avals[1], eqn.params)
        elif eqn.primitive.name == "conv_general_dilated":
            total += conv_macs(avals[0], avals[1], eqn.outvars[0].aval, eqn.params)
    return total


def _region_check(closed: Any, values: Sequence[Any]) -> tuple[bool, int, str]:
    """Execute one pass of ``closed`` (a loop body or a called function) as IR — its ``dot_general`` and
    convolutions as einsums run by torch — on ``values`` and compare with JAX. Returns (outputs match, MACs
    of the executed einsums, reason)."""
    from jax.extend.core import jaxpr_as_fun

    from neurips26.methods.solar.ir import execute_graph

    graph, _ = _build_graph(closed, values)
    feeds = {f"input{i}": torch.from_numpy(np.array(v)) for i, v in enumerate(values)}
    feeds.update({f"const{i}": torch.from_numpy(np.array(c)) for i, c in enumerate(closed.consts)})
    try:
        got = execute_graph(graph, feeds)
    except Exception as exc:
        return False, 0, f"IR execution failed: {type(exc).__name__}: {exc}"
    wanted = [
        w
        for v, w in zip(closed.jaxpr.outvars, jaxpr_as_fun(closed)(*values), strict=True)
        if not _is_literal(v)
    ]
    for i, (g, want) in enumerate(zip(got, wanted, strict=True)):
        want64 = np.asarray(want, dtype=np.float64)
        error = float(np.max(np.abs(g.double().numpy() - want64))) if want64.size else 0.0
        tol = 1e-5 + 1e-4 * (float(np.max(np.abs(want64))) if want64.size else 0.0)
        if not error <= tol:
            return False, 0, f"output {i}: max |IR - JAX| = {error:.3g} > {tol:.3g}"
    points = sum(n.points() for n in graph.nodes if isinstance(n, EinsumNode) and n.is_contraction)
    return True, points, "one iteration matches JAX"


def _count_scan_trips(eqn: Any, inputs: Sequence[Any]) -> int:
    """Run the ``scan`` with a counter in its carry (compiled by XLA) and return how often the body ran."""
    import jax.numpy as jnp
    from jax import lax
    from jax.extend.core import jaxpr_as_fun

    p = eqn.params
    body = jaxpr_as_fun(p["jaxpr"])
    nc, ncarry = p["num_consts"], p["num_carry"]
    consts, carry, xs = list(inputs[:nc]), list(inputs[nc : nc + ncarry]), list(inputs[nc + ncarry :])

    def step(state: Any, x: Any) -> Any:
        count, c = state
        out = body(*consts, *c, *x)
        return (count + 1, list(out[:ncarry])), None

    (count, _), _ = lax.scan(step, (jnp.int32(0), carry), xs, length=p["length"], reverse=p["reverse"])
    return int(count)


def _count_while_trips(eqn: Any, inputs: Sequence[Any]) -> int:
    """Run the ``while`` with a counter in its carry (compiled by XLA) and return how often the body ran."""
    import jax.numpy as jnp
    from jax import lax
    from jax.extend.core import jaxpr_as_fun

    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, carry = list(inputs[:cn]), list(inputs[cn : cn + bn]), list(inputs[cn + bn :])
    cond, body = jaxpr_as_fun(p["cond_jaxpr"]), jaxpr_as_fun(p["body_jaxpr"])
    count, _ = lax.while_loop(
        lambda s: cond(*cond_consts, *s[1])[0],
        lambda s: (s[0] + 1, list(body(*body_consts, *s[1]))),
        (jnp.int32(0), carry),
    )
    return int(count)


def check_loops(
    fn: Callable[..., Any], example_inputs: Sequence[Any], counted_loops: Sequence[tuple[str, int]]
) -> tuple[int, list[dict[str, Any]]]:
    """Independent checks of every loop (and called function) below the top level of ``fn``'s jaxpr.

    For each ``scan``/``while`` (``fori_loop`` lowers to one of them): the trips the count used
    (``counted_loops``, the frontend's record, in program order) against the trips a **counter** executed
    by XLA on the example inputs; and **one unrolled iteration** of the
    body run as IR (its contractions as einsums) against JAX. A loop's MACs count as checked when both
    agree: ``outer trips x counted trips x MACs of the validated einsums``. Nested loops are checked on the
    first outer iteration. Returns the checked MACs and one record per loop or call.
    """
    import jax

    closed = jax.make_jaxpr(fn)(*example_inputs)
    leaves = jax.tree_util.tree_leaves(tuple(example_inputs))
    if not all(hasattr(x, "shape") and not isinstance(x, jax.ShapeDtypeStruct) for x in leaves):
        return 0, [{"loop": "*", "ok": False, "reason": "abstract example inputs: trips cannot be counted"}]
    records: list[dict[str, Any]] = []
    checked = _walk_regions(closed.jaxpr, list(closed.consts), list(leaves), 1, list(counted_loops), records)
    return checked, records


def _walk_regions(
    jaxpr: Any, consts: Sequence[Any], values: Sequence[Any], outer: int, used: list, records: list
) -> int:
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=False))
    env.update(zip(jaxpr.invars, values, strict=True))
    checked = 0
    for eqn in jaxpr.eqns:
        inputs = [v.val if _is_literal(v) else env.get(v) for v in eqn.invars]
        name = eqn.primitive.name
        if any(x is None for x in inputs):
            break  # a value we could not compute: later loops stay unchecked
        if name in _INLINE:
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr") or eqn.params.get("fun_jaxpr")
            if hasattr(inner, "consts"):
                ok, points, reason = _region_check(inner, inputs)
                direct = _direct_macs(inner.jaxpr)
                good = ok and points == direct
                checked += outer * points if good else 0
                if direct:
                    records.append(
                        {
                            "loop": name,
                            "trips_used": 1,
                            "trips_counted": 1,
                            "body_macs": direct,
                            "body_checked": points if good else 0,
                            "outer": outer,
                            "ok": good,
                            "reason": reason,
                        }
                    )
                checked += _walk_regions(inner.jaxpr, list(inner.consts), inputs, outer, used, records)
        elif name in ("scan", "while"):
            checked += _check_loop(eqn, inputs, outer, used, records)
        outs = _evaluate(eqn, inputs)
        if outs is None:
            break
        env.update(zip(eqn.outvars, outs, strict=True))
    return checked


def _check_loop(eqn: Any, inputs: Sequence[Any], outer: int, counted_loops: list, records: list) -> int:
    p = eqn.params
    name, used = counted_loops.pop(0) if counted_loops else ("?", -1)
    if name != eqn.primitive.name:  # the count saw a different loop structure: nothing here is checked
        used = -1
    if eqn.primitive.name == "scan":
        body = p["jaxpr"]
        counted = _count_scan_trips(eqn, inputs)
        nc, ncarry = p["num_consts"], p["num_carry"]
        index = -1 if p["reverse"] else 0
        first = [*inputs[: nc + ncarry], *(x[index] for x in inputs[nc + ncarry :])]
    else:
        body = p["body_jaxpr"]
        counted = _count_while_trips(eqn, inputs)
        first = list(inputs[p["cond_nconsts"] :])
    direct = _direct_macs(body.jaxpr)
    if counted == 0:
        ok, points, reason = True, direct, "the body never runs"
    else:
        ok, points, reason = _region_check(body, first)
    good = ok and points == direct and counted == used
    if counted != used:
        reason = f"trip count {used} used, {counted} executed"
    records.append(
        {
            "loop": eqn.primitive.name,
            "trips_used": used,
            "trips_counted": counted,
            "body_macs": direct,
            "body_checked": points if good else 0,
            "outer": outer,
            "ok": good,
            "reason": reason,
        }
    )
    checked = outer * counted * points if good else 0
    if counted:
        checked += _walk_regions(
            body.jaxpr, list(body.consts), first, outer * counted, counted_loops, records
        )
    return checked


def validate_jax(fn: Callable[..., Any], example_inputs: Sequence[Any], trace: Trace, seed: int = 0) -> Any:
    """The gate for JAX: random inputs, ``fn`` vs the IR (einsums in torch, other equations replayed)."""
    import time

    import jax
    import jax.numpy as jnp

    from neurips26.methods.solar.validation import Validation

    start = time.perf_counter()
    leaves, treedef = jax.tree_util.tree_flatten(tuple(example_inputs))
    rng = np.random.default_rng(seed)
    values = [
        rng.standard_normal(np.shape(x)).astype(np.asarray(x).dtype)
        if np.issubdtype(np.asarray(x).dtype, np.floating)
        else np.asarray(x)
        for x in leaves
    ]
    feeds = {f"input{i}": torch.from_numpy(np.array(v)) for i, v in enumerate(values)}
    feeds.update(trace.constants)
    checked = sum(n.points() for n in trace.graph.nodes if isinstance(n, EinsumNode) and n.is_contraction)
    try:
        loop_checked, loops = check_loops(fn, example_inputs, trace.loops)
    except Exception as exc:  # a loop we cannot re-run leaves its MACs unchecked, never fails the analysis
        loop_checked, loops = 0, [{"loop": "*", "ok": False, "reason": f"{type(exc).__name__}: {exc}"}]
    macs = sum(sum(op.macs.values()) for op in trace.ops)
    fraction = min(1.0, (checked + loop_checked) / macs) if macs else 1.0
    reference = jax.tree_util.tree_leaves(
        fn(*jax.tree_util.tree_unflatten(treedef, [jnp.asarray(v) for v in values]))
    )
    from neurips26.methods.solar.ir import execute_graph

    try:
        got = execute_graph(trace.graph, feeds)
    except Exception as exc:
        return Validation(
            False,
            f"IR execution failed: {type(exc).__name__}: {exc}",
            checked_mac_fraction=fraction,
            loop_checks=loops,
        )
    worst = 0.0
    for i, (g, want) in enumerate(zip(got, reference, strict=True)):
        want64 = np.asarray(want, dtype=np.float64)
        error = float(np.max(np.abs(g.double().numpy() - want64))) if want64.size else 0.0
        tol = 1e-5 + 1e-4 * (float(np.max(np.abs(want64))) if want64.size else 0.0)
        if not error <= tol:
            return Validation(
                False,
                f"output {i}: max |IR - program| = {error:.3g} > {tol:.3g}",
                error,
                tol,
                fraction,
                time.perf_counter() - start,
                loops,
            )
        worst = max(worst, error)
    from neurips26.methods.solar.validation import MIN_CHECKED_SHARE

    share = f"{fraction:.1%} of the MACs checked independently (loops: one iteration + a trip counter)"
    if fraction < MIN_CHECKED_SHARE:
        failed = [f"{r['loop']}: {r['reason']}" for r in loops if not r.get("ok")]
        return Validation(
            False,
            f"IR outputs match, but only {share}; 'validated' needs {MIN_CHECKED_SHARE:.0%}"
            + (f" ({'; '.join(failed[:3])})" if failed else ""),
            worst,
            float("nan"),
            fraction,
            time.perf_counter() - start,
            loops,
        )
    return Validation(
        True,
        f"IR outputs match the JAX function on random inputs; {share}",
        worst,
        float("nan"),
        fraction,
        time.perf_counter() - start,
        loops,
    )
