"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the ``torch.export`` frontend.

``torch.export.export`` captures the program as an ATen graph on fake tensors (the module and the example
inputs may live on ``meta``: nothing is allocated). ``run_decompositions`` with a **trimmed table** then
lowers only the ops SOLAR has no rule for: every op with a rule (:mod:`~neurips26.methods.solar.rules`) stays
one node, so attention (``aten.scaled_dot_product_attention``), the norms (``layer_norm``, ``rms_norm``,
``group_norm``, inference batch norm), softmax, convolution (``aten.convolution``) and ``linear`` are single
nodes, and ``mv``/``dot`` are not split into multiply + sum. The graph is then interpreted node by node on
meta tensors and each node goes through the same recorder and rules as the dispatch tracer
(:mod:`~neurips26.methods.solar.frontend_torch`), so both frontends produce the same IR and pass the same
validation gate.

When export fails (graph breaks, data-dependent control flow, unsupported higher-order ops) ``analyze(...,
frontend="auto")`` falls back to the dispatch tracer and records why in ``report.frontend_note``.
"""

from __future__ import annotations

import copy
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from neurips26.methods.solar.frontend_torch import (
    Trace,
    _Recorder,
    bind_program_buffers,
    finish_trace,
    meta_autocast_tolerated,
    prepare_call,
)
from neurips26.methods.solar.rules import find_rule, op_key

aten = torch.ops.aten

KEPT_WHOLE = (
    aten.scaled_dot_product_attention.default,
    aten.linear.default,
    aten.layer_norm.default,
    aten.rms_norm.default,
    aten.group_norm.default,
    aten.softmax.int,
    aten.log_softmax.int,
)
"""Composite ops the export frontend must not decompose (each has a rule; listed for documentation and
checked by the tests). Convolutions decompose to the single core op ``aten.convolution`` and eval-mode batch
norm to ``_native_batch_norm_legit_no_training``, both single nodes with rules."""


class ExportFailed(Exception):
    """``torch.export`` (or the lowering of its graph) could not handle the program."""


def trimmed_decomposition_table() -> dict[Any, Callable[..., Any]]:
    """``torch.export.default_decompositions()`` minus every op that has a SOLAR rule or is pointwise.

    Ops with a rule are lowered directly (one IR op per graph node, exact counts); pointwise ops (``silu``,
    ``gelu``...) stay one elementwise node (splitting them would only add unfused traffic); everything else
    is decomposed to core ATen, whose pointwise and view ops the recorder handles generically.
    """
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op in KEPT_WHOLE or find_rule(op) is not None or torch.Tag.pointwise in op.tags:
            table.pop(op)
    return table


class _FunctionModule(torch.nn.Module):
    """Wraps a plain function so ``torch.export`` (which takes modules) accepts it."""

    def __init__(self, function: Callable[..., Any]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *inputs: Any) -> Any:
        return self.function(*inputs)


def export_program(program: Callable[..., Any], inputs: tuple[Any, ...]) -> torch.export.ExportedProgram:
    """``torch.export.export`` (non-strict) then the trimmed decompositions; raises :class:`ExportFailed`."""
    module = program if isinstance(program, torch.nn.Module) else _FunctionModule(program)
    devices = {t.device for t in [*module.parameters(), *module.buffers()]}
    target = {x.device for x in tree_flatten(inputs)[0] if isinstance(x, torch.Tensor)}
    if len(target) == 1 and devices - target:
        # e.g. a meta-built module re-traced on CPU with random weights: export only needs shapes and
        # dtypes, and the placeholders are bound to the substituted state afterwards
        module = copy.deepcopy(module).to_empty(device=next(iter(target)))
    try:
        with warnings.catch_warnings(), meta_autocast_tolerated():  # pytree deprecation noise on every export
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            exported = torch.export.export(module, inputs, strict=False)
            return exported.run_decompositions(trimmed_decomposition_table())
    except Exception as exc:  # export raises many types (UserError, GuardOnDataDependentSymNode, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ExportFailed(f"torch.export failed: {type(exc).__name__}: {first[:200]}") from exc


def _state_aliases(program: Any) -> dict[str, str]:
    """Every qualified name of a parameter/buffer -> the name ``module_state`` keeps for it (tied weights such
    as ``lm_head.weight`` = ``transformer.wte.weight`` appear once in the state, under their first name)."""
    if not isinstance(program, torch.nn.Module):
        return {}
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    named = [
        *program.named_parameters(remove_duplicate=False),
        *program.named_buffers(remove_duplicate=False),
    ]
    for name, tensor in named:
        aliases[name] = first.setdefault(id(tensor), name)
    return aliases


def _placeholder_values(
    program: Any,
    exported: torch.export.ExportedProgram,
    inputs: tuple[Any, ...],
    state: Mapping[str, torch.Tensor],
) -> dict[str, Any]:
    """The tensor each placeholder stands for: our own input and state tensors (so storage roots and names
    match the dispatch tracer's), lifted constants from the exported program."""
    from torch.export.graph_signature import InputKind

    tensors = [x for x in tree_flatten(inputs)[0] if isinstance(x, torch.Tensor)]
    user = iter(tensors)
    aliases = _state_aliases(program)
    values: dict[str, Any] = {}
    for spec in exported.graph_signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            values[name] = next(user, None)
            if values[name] is None:
                raise ExportFailed("the exported graph has more tensor inputs than the call")
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            canonical = aliases.get(spec.target, spec.target)
            if canonical not in state:
                raise ExportFailed(f"exported state {spec.target!r} is not among the module's parameters")
            values[name] = state[canonical]
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            values[name] = exported.constants[spec.target]
        elif spec.kind == InputKind.TOKEN:
            values[name] = None  # effect tokens order side effects; they carry no data
        else:  # pragma: no cover - future input kinds
            raise ExportFailed(f"unsupported exported input kind {spec.kind}")
    return values


def _lower_node(recorder: _Recorder, node: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> Any:
    """Run one graph node on meta tensors and record it through its rule."""

    def load(x: Any) -> Any:
        return env[x] if isinstance(x, torch.fx.Node) else x

    args = tree_map(load, tuple(node.args))
    kwargs = tree_map(load, dict(node.kwargs))
    target = node.target
    if target is operator.getitem:
        return args[0][args[1]]
    if target is torch.ops.higher_order.with_effects:  # (token, op, *args): a side-effecting op
        op, op_args = args[1], tuple(args[2:])
        with torch.no_grad():
            out = op(*op_args, **kwargs)
        recorder.record(op, op_key(op), op_args, kwargs, out)
        return (None, *out) if isinstance(out, (tuple, list)) else (None, out)
    if not isinstance(target, torch._ops.OpOverload):
        raise ExportFailed(f"cannot lower graph node {node.name} with target {target} (a higher-order op)")
    with torch.no_grad():
        out = target(*args, **kwargs)
    recorder.record(target, op_key(target), args, kwargs, out)
    return out


def trace_export(
    program: Callable[..., Any],
    example_inputs: Sequence[Any],
    device: str = "meta",
    cpu_trace_cap_bytes: int = 2**30,
    state_override: Mapping[str, torch.Tensor] | None = None,
) -> Trace:
    """Export ``program(*example_inputs)``, keep ruled ops whole and lower the graph to the IR.

    Raises :class:`ExportFailed` when ``torch.export`` or the lowering of its graph fails.
    """
    inputs, state = prepare_call(program, example_inputs, device, cpu_trace_cap_bytes, state_override)
    exported = export_program(program, inputs)
    from torch.export.graph_signature import OutputKind

    recorder = _Recorder()
    bind_program_buffers(recorder, inputs, state)
    placeholders = _placeholder_values(program, exported, inputs, state)
    env: dict[torch.fx.Node, Any] = {}
    outputs: list[Any] = []
    try:
        for node in exported.graph_module.graph.nodes:
            if node.op == "placeholder":
                env[node] = placeholders[node.name]
            elif node.op == "call_function":
                env[node] = _lower_node(recorder, node, env)
            elif node.op == "get_attr":
                env[node] = getattr(exported.graph_module, str(node.target))
            elif node.op == "output":
                outputs = [env[n] if isinstance(n, torch.fx.Node) else n for n in node.args[0]]
    except ExportFailed:
        raise
    except (NotImplementedError, RuntimeError, KeyError, TypeError) as exc:
        raise ExportFailed(f"lowering the exported graph failed: {type(exc).__name__}: {exc}") from exc
    user_outputs = []
    for spec, value in zip(exported.graph_signature.output_specs, outputs, strict=True):
        if spec.kind == OutputKind.USER_OUTPUT:
            if isinstance(value, torch.Tensor):
                user_outputs.append(value)
        elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            # a functionalised in-place write into a program buffer must reach DRAM
            # (a user-input mutation names the input's placeholder, a buffer mutation the buffer's FQN)
            mutated = placeholders.get(spec.target) if spec.target in placeholders else state.get(spec.target)
            root = recorder.names.get(id(mutated)) if mutated is not None else None
            if root is not None and isinstance(value, torch.Tensor):
                recorder.compulsory_write[root] = max(
                    recorder.compulsory_write.get(root, 0), value.numel() * value.element_size()
                )
    return finish_trace(recorder, user_outputs, frontend="torch-export")
