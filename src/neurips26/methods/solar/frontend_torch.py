"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the PyTorch frontend.

A dispatch-mode tracer (``TorchDispatchMode``, the mechanism ``FlopCounterMode`` uses) records every ATen
op the program executes, by default on ``meta`` tensors so no weight or activation memory is allocated.
A ``TorchFunctionMode`` keeps a few high-level functions whole (``scaled_dot_product_attention`` would
otherwise decompose on meta into bmm, softmax *and* mask-building ops that inflate the byte counts).
Each op goes through its rule (:mod:`~neurips26.methods.solar.rules`) to IR nodes plus counts.

This is the default frontend of ``analyze`` (~10x faster than ``torch.export``), the fallback of the
``torch.export`` frontend (:mod:`.frontend_export`) under ``frontend="auto"``, and the only frontend of
``analyze(..., frontend="dispatch")``: it follows any program that runs, including Python side effects and
data-dependent control flow (with ``trace_device="cpu"``) that ``torch.export`` rejects.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from neurips26.methods.solar.ir import EinsumNode, IRGraph, dtype_name
from neurips26.methods.solar.rules import OpCall, OpCost, find_rule, op_key, tensors_in

PRESERVED_FUNCTIONS: dict[Any, str] = {
    F.scaled_dot_product_attention: "torch.nn.functional.scaled_dot_product_attention",
}


@dataclass
class OpRecord:
    """One program op with its counts: MACs by dtype, other FLOPs, unfused DRAM bytes, its IR nodes."""

    index: int
    op: str
    kind: str
    macs: dict[str, int]
    flops: int
    read_bytes: int
    write_bytes: int
    nodes: list[str] = field(default_factory=list)
    macs_conventional: dict[str, int] | None = None

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def conventional_macs(self) -> dict[str, int]:
        """MACs as FlopCounterMode, fvcore and papers count them: every tap of a padded convolution and the
        full rectangle of a masked attention (``macs`` leaves out what the guards exclude)."""
        return self.macs if self.macs_conventional is None else self.macs_conventional


def conventional_macs(macs: dict[str, int], nodes: list[Any]) -> dict[str, int] | None:
    """``macs`` plus, for every guarded contraction among ``nodes``, the points its guards exclude (padded
    taps, masked attention entries): the count over the rectangular domain. None when nothing differs."""
    extra: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, EinsumNode) and node.is_contraction and node.guards:
            excluded = math.prod(node.ranks.values()) - node.points()
            if excluded:
                extra[node.compute_dtype] = extra.get(node.compute_dtype, 0) + excluded
    if not extra:
        return None
    return {d: macs.get(d, 0) + extra.get(d, 0) for d in {*macs, *extra}}


@dataclass
class Trace:
    """What the frontend hands to the backend."""

    graph: IRGraph
    ops: list[OpRecord]
    compulsory_read: dict[str, int]
    compulsory_write: dict[str, int]
    unknown_ops: dict[str, int]
    constants: dict[str, torch.Tensor]
    frontend: str = "torch-dispatch"
    note: str = ""  # e.g. why the export frontend fell back to the dispatch tracer
    # JAX: (primitive, trips the count multiplied the body by) per loop, in program order (pre-order)
    loops: list[tuple[str, int]] = field(default_factory=list)


def distinct_elements(t: torch.Tensor) -> int:
    """Elements a strided view touches: expanded (stride-0) dimensions count once, and overlapping windows
    (``unfold``, ``as_strided``) count at most the span ``1 + Σ (size - 1)·|stride|`` they cover."""
    if t.numel() == 0:
        return 0
    product = math.prod(s for s, st in zip(t.shape, t.stride(), strict=True) if st != 0)
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))
    return min(product, span)


def _storage_key(t: torch.Tensor) -> Any:
    try:
        return StorageWeakRef(t.untyped_storage())
    except (RuntimeError, NotImplementedError):
        return None


def _is_view(func: Any) -> bool:
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


class _Recorder:
    """Shared state of the two modes: value names, roots (program buffers), records."""

    def __init__(self) -> None:
        self.graph = IRGraph()
        self.ops: list[OpRecord] = []
        self.names: dict[int, str] = {}
        self.keep: list[torch.Tensor] = []  # keeps traced tensors alive so ids stay unique
        self.roots: dict[Any, str] = {}
        self.compulsory_read: dict[str, int] = {}
        self.compulsory_write: dict[str, int] = {}
        self.unknown_ops: dict[str, int] = {}
        self.constants: dict[str, torch.Tensor] = {}
        self.suspended = 0
        self.counter = 0

    def bind(self, tensor: torch.Tensor, name: str, role: str) -> None:
        self.names[id(tensor)] = name
        self.keep.append(tensor)
        self.graph.add_value(name, tensor.shape, dtype_name(tensor.dtype), role)
        key = _storage_key(tensor)
        if key is not None:
            self.roots.setdefault(key, name)
        (self.graph.inputs if role == "input" else self.graph.weights).append(name)

    def value_of(self, tensor: torch.Tensor) -> str:
        name = self.names.get(id(tensor))
        if name is None:  # a tensor from outside the program's arguments (a closure or attribute constant)
            name = f"const{len(self.constants)}"
            self.constants[name] = tensor
            self.bind(tensor, name, "constant")
        return name

    def new_output(self, tensor: torch.Tensor) -> str:
        self.counter += 1
        name = f"v{self.counter}"
        self.names[id(tensor)] = name
        self.keep.append(tensor)
        value = self.graph.add_value(name, tensor.shape, dtype_name(tensor.dtype), "temp")
        if tensor.layout == torch.strided:
            value.stride = tuple(tensor.stride())
        return name

    def record(self, func: Any, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        inputs = tensors_in(args, kwargs)
        snapshot = {id(t): self.value_of(t) for t in inputs}
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        out_names = [self.new_output(t) for t in outputs]

        def value_of(t: torch.Tensor) -> str:
            return snapshot.get(id(t)) or self.names[id(t)]

        call = OpCall(len(self.ops), op, func, tuple(args), dict(kwargs), outputs, out_names, value_of)
        cost = self._cost(call)
        if cost.nodes is None:  # a rule that only counts: the IR replays the op
            cost.nodes = [call.replay(cost.kind)]
        self.graph.nodes.extend(cost.nodes or [])
        self._register_temps(cost.nodes or [], outputs[0].dtype if outputs else torch.float32)
        if cost.kind in ("view", "creation"):
            read = 0
        else:
            read = sum(cost.read_elements.get(id(t), distinct_elements(t)) * t.element_size() for t in inputs)
        write = 0 if cost.kind == "view" else sum(distinct_elements(t) * t.element_size() for t in outputs)
        self.ops.append(
            OpRecord(
                call.index,
                op,
                cost.kind,
                cost.macs,
                cost.flops,
                read,
                write,
                [n.name for n in cost.nodes or []],
                (
                    cost.conventional
                    if cost.conventional is not None
                    else conventional_macs(cost.macs, cost.nodes or [])
                ),
            )
        )
        if cost.kind == "view":
            return
        if cost.kind != "creation":
            for t in inputs:
                root = self.roots.get(_storage_key(t))
                if root is not None:
                    needed = cost.compulsory_elements.get(id(t), distinct_elements(t)) * t.element_size()
                    self.compulsory_read[root] = max(self.compulsory_read.get(root, 0), needed)
        for t in outputs:  # in-place writes into a program buffer must reach DRAM
            root = self.roots.get(_storage_key(t))
            if root is not None:
                self.compulsory_write[root] = max(
                    self.compulsory_write.get(root, 0), distinct_elements(t) * t.element_size()
                )

    def _register_temps(self, nodes: list[Any], dtype: torch.dtype) -> None:
        """Give node-internal temporaries (``op.scores``, ``op.mm``...) a value entry with shape and dtype."""
        for node in nodes:
            outs = [node.output] if isinstance(node, EinsumNode) else [n for n in node.outputs if n]
            for name in outs:
                if name in self.graph.values:
                    continue
                if isinstance(node, EinsumNode):
                    shape = [math.prod(node.ranks[r] for r in group) for group in node.out_ranks]
                else:
                    first = next((self.graph.values[i] for i in node.inputs if i in self.graph.values), None)
                    shape = list(first.shape) if first else []
                self.graph.add_value(name, shape, dtype_name(dtype), "temp")

    def _cost(self, call: OpCall) -> OpCost:
        rule = find_rule(call.func) if not isinstance(call.func, str) else None
        if rule is None and call.op in PRESERVED_FUNCTIONS.values():
            rule = find_rule(call.op)
        if rule is not None:
            return rule(call)
        if not isinstance(call.func, str) and (_is_view(call.func) or call.op == "aten::_unsafe_view"):
            return OpCost("view", {}, 0, [call.replay("view")])
        if not isinstance(call.func, str) and torch.Tag.pointwise in call.func.tags:
            flops = sum(t.numel() for t in call.outputs)
            return OpCost("pointwise", {}, flops, [call.replay("pointwise")])
        self.unknown_ops[call.op] = self.unknown_ops.get(call.op, 0) + 1
        return OpCost("unknown", {}, 0, [call.replay("unknown")])


class _DispatchRecorder(TorchDispatchMode):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.recorder.suspended:
            self.recorder.record(func, op_key(func), args, kwargs, out)
        return out


class _FunctionKeeper(TorchFunctionMode):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        key = PRESERVED_FUNCTIONS.get(func)
        if key is None or self.recorder.suspended:
            return func(*args, **kwargs)
        self.recorder.suspended += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self.recorder.suspended -= 1
        self.recorder.record(key, key, args, kwargs, out)
        return out


def module_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by qualified name (shared ones once)."""
    state: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            state[name] = tensor
    return state


def call_program(
    program: Callable[..., Any],
    inputs: Sequence[Any],
    state: Mapping[str, torch.Tensor] | None,
) -> Any:
    """Call a module with substituted parameters/buffers (``functional_call``) or a plain function."""
    if isinstance(program, torch.nn.Module):
        return torch.func.functional_call(program, dict(state or {}), tuple(inputs), strict=False)
    return program(*inputs)


def prepare_call(
    program: Callable[..., Any],
    example_inputs: Sequence[Any],
    device: str = "meta",
    cpu_trace_cap_bytes: int = 2**30,
    state_override: Mapping[str, torch.Tensor] | None = None,
) -> tuple[tuple[Any, ...], dict[str, torch.Tensor]]:
    """Check the arguments and move the inputs and the module's parameters/buffers to ``device``."""
    if device not in ("meta", "cpu"):
        raise ValueError(f"device must be 'meta' or 'cpu', got {device!r}")
    if not callable(program):
        raise TypeError(f"program must be an nn.Module or a callable, got {type(program).__name__}")

    def move(x: Any) -> Any:
        return x.detach().to(device) if isinstance(x, torch.Tensor) else x

    if device == "cpu":
        size = sum(
            x.numel() * x.element_size()
            for x in tree_flatten(tuple(example_inputs))[0]
            if isinstance(x, torch.Tensor)
        )
        if isinstance(program, torch.nn.Module):
            size += sum(t.numel() * t.element_size() for t in module_state(program).values())
        if size > cpu_trace_cap_bytes:
            raise ValueError(
                f"trace_device='cpu' would execute {size / 2**20:.0f} MiB of inputs and weights (cap "
                f"{cpu_trace_cap_bytes / 2**20:.0f} MiB); trace a smaller workload, or annotate the "
                "data-dependent op's cost with register_rule and trace on meta"
            )
    inputs = tree_map(move, tuple(example_inputs))
    state = (
        {k: v.detach().to(device) for k, v in (state_override or module_state(program)).items()}
        if isinstance(program, torch.nn.Module)
        else {}
    )
    return inputs, state


@contextlib.contextmanager
def meta_autocast_tolerated() -> Iterator[None]:
    """While tracing, ``torch.is_autocast_enabled("meta")`` answers False instead of raising.

    Hugging Face models ask ``torch.is_autocast_enabled(x.device.type)`` (``maybe_autocast`` around the
    rotary embedding of Llama, Qwen2, Gemma 3...), and torch raises "unknown device type for autocast" for
    ``meta``: without this, no HF model built on meta (the headline use, a bound for a real model shape
    without its weights) could be traced. Autocast cannot be enabled on meta, so False is the true answer;
    every other device type goes to the original function, and the original is restored on exit.
    """
    original = torch.is_autocast_enabled

    def is_autocast_enabled(*args: Any, **kwargs: Any) -> bool:
        device = args[0] if args else kwargs.get("device_type")
        if isinstance(device, (str, torch.device)) and torch.device(device).type == "meta":
            return False
        return original(*args, **kwargs)

    torch.is_autocast_enabled = is_autocast_enabled  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.is_autocast_enabled = original  # type: ignore[assignment]


def bind_program_buffers(
    recorder: _Recorder, inputs: tuple[Any, ...], state: Mapping[str, torch.Tensor]
) -> None:
    """Name the program's buffers: ``input{i}`` by flattened leaf index, weights by qualified name."""
    for i, x in enumerate(tree_flatten(inputs)[0]):
        if isinstance(x, torch.Tensor):
            recorder.bind(x, f"input{i}", "input")
    for name, tensor in state.items():
        if id(tensor) not in recorder.names:
            recorder.bind(tensor, name, "weight")


def trace_program(
    program: Callable[..., Any],
    example_inputs: Sequence[Any],
    device: str = "meta",
    cpu_trace_cap_bytes: int = 2**30,
    state_override: Mapping[str, torch.Tensor] | None = None,
) -> Trace:
    """Trace ``program(*example_inputs)`` op by op on ``device`` (``meta`` by default, ``cpu`` for
    data-dependent programs) and return the IR graph with per-op counts.
    """
    inputs, state = prepare_call(program, example_inputs, device, cpu_trace_cap_bytes, state_override)
    recorder = _Recorder()
    bind_program_buffers(recorder, inputs, state)
    try:
        with (
            meta_autocast_tolerated(),
            torch.no_grad(),
            _FunctionKeeper(recorder),
            _DispatchRecorder(recorder),
        ):
            result = call_program(program, inputs, state)
    except (NotImplementedError, RuntimeError) as exc:
        if device == "meta":
            raise ValueError(
                "the program cannot run on meta tensors (a data-dependent op such as .item(), nonzero or "
                f"routing, or code that needs a real device: {str(exc).splitlines()[0]}); call analyze(..., "
                "trace_device='cpu') with real inputs under the size cap, or register a rule that annotates "
                "the op's cost"
            ) from exc
        raise
    return finish_trace(recorder, [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)])


def finish_trace(
    recorder: _Recorder, outputs: Sequence[torch.Tensor], frontend: str = "torch-dispatch"
) -> Trace:
    """Mark the program outputs (their bytes are compulsory writes) and package the trace."""
    if not outputs:
        raise ValueError("the program returned no tensor; SOL bounds need at least one output")
    for t in outputs:
        name = recorder.value_of(t)
        value = recorder.graph.values[name]
        root = recorder.roots.get(_storage_key(t))
        if root is not None and root not in recorder.compulsory_write:
            pass  # an unmodified view of a program buffer: nothing has to be written
        elif value.role == "temp":
            value.role = "output"
            recorder.compulsory_write[name] = max(
                recorder.compulsory_write.get(name, 0), distinct_elements(t) * t.element_size()
            )
        recorder.graph.outputs.append(name)
    return Trace(
        recorder.graph,
        recorder.ops,
        recorder.compulsory_read,
        recorder.compulsory_write,
        recorder.unknown_ops,
        recorder.constants,
        frontend=frontend,
    )
