"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the validation gate.

The paper accepts a lowering only if the IR, *executed*, reproduces the program's outputs. Here: draw
random inputs (and random weights when the module lives on ``meta``), run the program eagerly on CPU,
execute the traced IR graph on the same values (:func:`~neurips26.methods.solar.ir.execute_graph`) and
compare every output. Contractions, attention and sum/mean/max reductions run from the IR's own affine
einsums (so a wrong equation, operand or mask fails the gate); pointwise and data-movement nodes replay
their ATen op on IR buffers (the gate checks their dataflow, not their arithmetic). The report records the
fraction of MACs whose arithmetic was checked independently.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from neurips26.methods.solar.frontend_torch import Trace, call_program, module_state, trace_program
from neurips26.methods.solar.ir import EinsumNode, execute_graph

_TOLERANCE = {
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-9),
    torch.bfloat16: (2e-2, 1e-3),
    torch.float16: (1e-2, 1e-3),
}


# "validated" requires this share of the MACs to be checked independently (issue #33): by an einsum the
# gate executed against the program, and for loop bodies with the trip count checked by a counter.
MIN_CHECKED_SHARE = 0.95


@dataclass
class Validation:
    """The gate's verdict: ``validated`` plus why, the worst error and the independently checked MACs.

    ``loop_checks`` (JAX): per loop, the trips the count used and the trips a counter executed, the body's
    MACs per iteration and how many of them one validated iteration checked."""

    validated: bool
    reason: str
    max_error: float = float("nan")
    tolerance: float = float("nan")
    checked_mac_fraction: float = 0.0
    seconds: float = 0.0
    loop_checks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _random_like(t: torch.Tensor, generator: torch.Generator, positive: bool = False) -> torch.Tensor:
    if t.dtype.is_floating_point:
        x = torch.randn(t.shape, generator=generator, dtype=torch.float32)
        x = x.abs() + 0.5 if positive else x
        return x.to(t.dtype)
    if t.device.type != "meta":
        return t.detach().cpu().clone()
    return torch.zeros(t.shape, dtype=t.dtype)


def _feeds(
    program: Callable[..., Any],
    example_inputs: Sequence[Any],
    trace: Trace,
    seed: int,
) -> tuple[list[Any], Any, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    leaves, spec = tree_flatten(tuple(example_inputs))
    feeds: dict[str, torch.Tensor] = {}
    new_leaves = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            value = _random_like(leaf, generator)
            feeds[f"input{i}"] = value
            new_leaves.append(value)
        else:
            new_leaves.append(leaf)
    state: dict[str, torch.Tensor] = {}
    if isinstance(program, torch.nn.Module):
        params = {n for n, _ in program.named_parameters()}
        for name, tensor in module_state(program).items():
            if tensor.device.type == "meta":
                value = _random_like(tensor, generator, positive=name not in params)
            else:
                value = tensor.detach().cpu()
            state[name] = value
            if name in trace.graph.weights:
                feeds[name] = value
    for name, tensor in trace.constants.items():
        if tensor.device.type == "meta" and tensor.numel() == 0:  # e.g. an empty KV cache: no values needed
            feeds[name] = torch.empty(tensor.shape, dtype=tensor.dtype)
            continue
        if tensor.device.type == "meta":
            raise _Skip(f"constant {name} lives on meta; its values are unknown")
        feeds[name] = tensor.detach().cpu()
    return new_leaves, spec, state, feeds


def _cpu_retrace(
    program: Callable[..., Any], example_inputs: Sequence[Any], trace: Trace, seed: int
) -> Trace:
    """Re-trace on CPU with the gate's random values when the meta trace holds meta constants (tensors the
    program built outside the dispatcher, e.g. ``torch.tensor(-inf, device=x.device)``). The CPU trace must
    match the meta trace op for op (same ops, same MACs) for its validation to carry over."""
    generator = torch.Generator().manual_seed(seed)
    leaves, spec = tree_flatten(tuple(example_inputs))
    cpu_leaves = [_random_like(x, generator) if isinstance(x, torch.Tensor) else x for x in leaves]
    state = None
    if isinstance(program, torch.nn.Module):
        params = {n for n, _ in program.named_parameters()}
        state = {
            n: (
                _random_like(t, generator, positive=n not in params)
                if t.device.type == "meta"
                else t.detach().cpu()
            )
            for n, t in module_state(program).items()
        }
    if trace.frontend == "torch-export":
        from neurips26.methods.solar.frontend_export import trace_export

        tracer = trace_export
    else:
        tracer = trace_program
    cpu = tracer(program, tree_unflatten(cpu_leaves, spec), device="cpu", state_override=state)
    if [(o.op, o.macs) for o in cpu.ops if o.macs] != [(o.op, o.macs) for o in trace.ops if o.macs]:
        raise _Skip(
            "the CPU re-trace's contractions differ from the meta trace's; validation would not carry over"
        )
    return cpu


def _gathered_elements(node: EinsumNode) -> int:
    """Elements the executor materialises for the node's non-projection operands (windows, merged ranks)."""
    total = 0
    for acc in node.operands:
        if not all(a.is_projection for a in acc.index):
            ranks = {r for a in acc.index for r in a.ranks}
            total = max(total, int(math.prod(node.ranks[r] for r in ranks)))
    return total


class _Skip(Exception):
    pass


def validate_trace(
    program: Callable[..., Any],
    example_inputs: Sequence[Any],
    trace: Trace,
    seed: int = 0,
    max_bytes: int = 512 * 2**20,
    max_macs: int = 2 * 10**9,
) -> Validation:
    """Run the gate; programs above ``max_bytes`` of values or ``max_macs`` are reported as not validated."""
    start = time.perf_counter()
    graph = trace.graph
    total_bytes = sum(v.nbytes for v in graph.values.values())
    macs = sum(sum(op.macs.values()) for op in trace.ops)
    checked = sum(n.points() for n in graph.nodes if isinstance(n, EinsumNode) and n.is_contraction)
    fraction = checked / macs if macs else 1.0
    gathered = max((_gathered_elements(n) for n in graph.nodes if isinstance(n, EinsumNode)), default=0)
    if gathered * 8 > max_bytes:
        return Validation(
            False,
            f"not executed: an affine gather would materialise {gathered:.3g} float64 "
            f"elements (cap {max_bytes / 2**20:.0f} MiB); analyse a scaled-down instance",
            checked_mac_fraction=fraction,
        )
    if total_bytes > max_bytes or macs > max_macs:
        return Validation(
            False,
            f"not executed: {total_bytes / 2**20:.0f} MiB of values / {macs:.3g} MACs exceed "
            f"the gate's cap ({max_bytes / 2**20:.0f} MiB, {max_macs:.3g}); analyse a scaled-down "
            "instance to validate the lowering",
            checked_mac_fraction=fraction,
        )
    retraced = ""
    try:
        if any(t.device.type == "meta" and t.numel() for t in trace.constants.values()):
            trace = _cpu_retrace(program, example_inputs, trace, seed)
            graph = trace.graph
            retraced = " (on a CPU re-trace with the same contractions as the meta trace)"
        leaves, spec, state, feeds = _feeds(program, example_inputs, trace, seed)
    except _Skip as exc:
        return Validation(False, f"not executed: {exc}", checked_mac_fraction=fraction)
    with torch.no_grad():
        reference = call_program(program, tree_unflatten(leaves, spec), state)
        ref_outputs = [t for t in tree_flatten(reference)[0] if isinstance(t, torch.Tensor)]
        try:
            ir_outputs = execute_graph(graph, feeds)
        except Exception as exc:  # a lowering that cannot even run is a failed lowering
            return Validation(
                False,
                f"IR execution failed: {type(exc).__name__}: {exc}",
                checked_mac_fraction=fraction,
                seconds=time.perf_counter() - start,
            )
    if len(ir_outputs) != len(ref_outputs):
        return Validation(
            False,
            f"IR has {len(ir_outputs)} outputs, the program {len(ref_outputs)}",
            checked_mac_fraction=fraction,
            seconds=time.perf_counter() - start,
        )
    worst, worst_tol = 0.0, 0.0
    for i, (got, want) in enumerate(zip(ir_outputs, ref_outputs, strict=True)):
        if tuple(got.shape) != tuple(want.shape):
            return Validation(
                False,
                f"output {i}: IR shape {tuple(got.shape)} != program {tuple(want.shape)}",
                checked_mac_fraction=fraction,
                seconds=time.perf_counter() - start,
            )
        if not want.dtype.is_floating_point:
            if not torch.equal(got, want):
                return Validation(
                    False,
                    f"output {i}: integer outputs differ",
                    checked_mac_fraction=fraction,
                    seconds=time.perf_counter() - start,
                )
            continue
        rtol, atol = _TOLERANCE.get(want.dtype, (1e-4, 1e-5))
        want64, got64 = want.double(), got.double()
        scale = want64.abs().max().item() if want64.numel() else 0.0
        error = (got64 - want64).abs().max().item() if want64.numel() else 0.0
        tol = atol + rtol * scale
        if not error <= tol:  # NaN fails too
            return Validation(
                False,
                f"output {i}: max |IR - program| = {error:.3g} > tolerance {tol:.3g}",
                error,
                tol,
                fraction,
                time.perf_counter() - start,
            )
        if error / max(tol, 1e-300) >= worst / max(worst_tol, 1e-300):
            worst, worst_tol = error, tol
    if fraction < MIN_CHECKED_SHARE:  # the rest was replayed through the program's own ops
        return Validation(
            False,
            f"IR outputs match the program{retraced}, but only {fraction:.1%} of the MACs were checked "
            f"independently (run as einsums); 'validated' needs {MIN_CHECKED_SHARE:.0%}",
            worst,
            worst_tol,
            fraction,
            time.perf_counter() - start,
        )
    return Validation(
        True,
        "IR outputs match the program on random inputs" + retraced,
        worst,
        worst_tol,
        fraction,
        time.perf_counter() - start,
    )
