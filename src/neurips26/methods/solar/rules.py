"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — per-op lowering rules (ATen -> IR + counts).

A rule maps one recorded op call to an :class:`OpCost`: its kind, MACs by dtype, other FLOPs and the IR
nodes that compute it. Contractions (mm/addmm/bmm/baddbmm/mv/dot; convolutions in ``rules_convolution``),
attention (``rules_attention``) and the plain reductions lower to
:class:`~neurips26.methods.solar.ir.EinsumNode` (their arithmetic is checked by the validation gate);
everything else replays its ATen op. An op with no rule, no ``pointwise`` tag and no view schema is
*unknown*: it is listed by name, never silently counted as zero. :func:`register_rule` adds rules (the
hook mirrors ``torch.utils.flop_counter.register_flop_formula``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from neurips26.methods.solar.ir import (
    Access,
    Affine,
    EinsumNode,
    ReplayNode,
    ValueRef,
    dtype_name,
)

aten = torch.ops.aten


@dataclass
class OpCost:
    """What a rule returns for one op call.

    ``nodes=None`` asks for the default replay node. ``read_elements`` overrides the elements read from an
    argument (keyed by ``id(tensor)``) for the unfused bytes; ``compulsory_elements`` overrides what counts
    as compulsory traffic from a program buffer (gathers read only the rows they index). ``conventional``
    overrides the conventional MACs (by default derived from the guarded nodes, see
    :func:`~neurips26.methods.solar.frontend_torch.conventional_macs`).
    """

    kind: str
    macs: dict[str, int] = field(default_factory=dict)
    flops: int = 0
    nodes: list[Any] | None = None
    read_elements: dict[int, int] = field(default_factory=dict)
    compulsory_elements: dict[int, int] = field(default_factory=dict)
    conventional: dict[str, int] | None = None


@dataclass
class OpCall:
    """One recorded call, as a rule sees it: the op, its arguments, its outputs and the IR value names."""

    index: int
    op: str
    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[torch.Tensor]
    output_names: list[str]
    value_of: Callable[[torch.Tensor], str]

    def arg(self, i: int, name: str, default: Any = None) -> Any:
        if i < len(self.args):
            return self.args[i]
        return self.kwargs.get(name, default)

    def name(self, tensor: torch.Tensor) -> str:
        return self.value_of(tensor)

    def node_name(self, suffix: str = "") -> str:
        return f"op{self.index}.{self.op}{suffix}"

    def replay(self, kind: str) -> ReplayNode:
        """The default node: re-run the ATen op on the IR's buffers."""

        def to_ref(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return ValueRef(self.value_of(x))
            if isinstance(x, (list, tuple)):
                return type(x)(to_ref(y) for y in x)
            return x

        inputs = [self.value_of(t) for t in tensors_in(self.args, self.kwargs)]
        kwargs = {k: to_ref(v) for k, v in self.kwargs.items()}
        if isinstance(kwargs.get("device"), torch.device) and kwargs["device"].type == "meta":
            kwargs["device"] = torch.device("cpu")  # creation ops traced on meta execute on CPU in the IR
        return ReplayNode(
            self.node_name(),
            self.op,
            kind,
            self.func,
            to_ref(self.args),
            kwargs,
            list(self.output_names),
            inputs,
        )


Rule = Callable[[OpCall], OpCost]
_RULES: dict[str, Rule] = {}


def op_key(op: Any) -> str:
    """Canonical key: ``"aten::addmm"`` (packet) or ``"aten::sum.dim_IntList"`` (overload)."""
    if isinstance(op, str):
        return op.removesuffix(".default")
    if isinstance(op, torch._ops.OpOverload):
        return op.name().replace(".default", "")
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op._qualified_op_name
    if callable(op):
        return f"{op.__module__}.{op.__qualname__}"
    raise TypeError(f"op must be a string, an OpOverload(Packet) or a function, got {type(op).__name__}")


def register_rule(op: Any, rule: Rule | None = None) -> Any:
    """Register (or replace) the rule for ``op``; usable as a decorator.

    Example: ``register_rule("mylib::fused_gelu", lambda call: OpCost("pointwise", flops=...))``.
    """

    def decorate(fn: Rule) -> Rule:
        _RULES[op_key(op)] = fn
        return fn

    return decorate(rule) if rule is not None else decorate


def unregister_rule(op: Any) -> None:
    _RULES.pop(op_key(op), None)


PLUGIN_GROUP = "neurips26.solar.rules"
_PLUGINS_LOADED = False


def load_rule_plugins() -> list[str]:
    """Call every installed entry point of group ``neurips26.solar.rules`` once (each registers rules).

    This is the plug-in slot for generated lowerings (the paper's LLM frontend): a plug-in package ships
    its rules, and they pass the same validation gate as the built-in ones.
    """
    global _PLUGINS_LOADED
    from importlib.metadata import entry_points

    loaded = []
    if not _PLUGINS_LOADED:
        _PLUGINS_LOADED = True
        for entry in entry_points(group=PLUGIN_GROUP):
            entry.load()()
            loaded.append(entry.name)
    return loaded


def find_rule(func: Any) -> Rule | None:
    if not _PLUGINS_LOADED:
        load_rule_plugins()
    key = op_key(func)
    if key in _RULES:
        return _RULES[key]
    packet = key.split(".")[0]
    return _RULES.get(packet)


def tensors_in(args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            if all(x is not t for t in found):
                found.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)

    walk(args)
    walk(list(kwargs.values()))
    return found


def _ranks(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _proj(*ranks: str) -> tuple[Affine, ...]:
    return tuple(Affine.of(r) for r in ranks)


def _dt(t: torch.Tensor) -> str:
    return dtype_name(t.dtype)


# --------------------------------------------------------------------------------------------------------
# Contractions
# --------------------------------------------------------------------------------------------------------


def _matmul_node(call: OpCall, a: torch.Tensor, b: torch.Tensor, out: str, batch: int) -> EinsumNode:
    """``[*batch, m, k] x [*batch, k, n] -> [*batch, m, n]`` (mv/dot drop m or n)."""
    bs = _ranks("b", batch)
    a_r = [*bs, *(["m"] if a.dim() - batch == 2 else []), "k"]
    b_r = [*bs, "k", *(["n"] if b.dim() - batch == 2 else [])]
    ranks = {r: int(s) for r, s in zip(a_r, a.shape, strict=True)}
    ranks.update({r: int(s) for r, s in zip(b_r, b.shape, strict=True)})
    out_r = [r for r in ranks if r != "k"]
    return EinsumNode(
        call.node_name(".mac"),
        call.op,
        ranks,
        [Access(call.name(a), _proj(*a_r)), Access(call.name(b), _proj(*b_r))],
        out,
        tuple((r,) for r in out_r),
        compute_dtype=_dt(a),
    )


def rule_matmul(call: OpCall) -> OpCost:
    a, b = call.args[0], call.args[1]
    batch = a.dim() - 2 if call.op in ("aten::bmm",) else 0
    node = _matmul_node(call, a, b, call.output_names[0], batch)
    return OpCost("contraction", {_dt(a): node.points()}, 0, [node])


def rule_addmm(call: OpCall) -> OpCost:
    """``beta * bias + alpha * (a @ b)`` for addmm / baddbmm / addmv: one einsum plus a pointwise epilogue."""
    bias, a, b = call.args[0], call.args[1], call.args[2]
    beta = call.kwargs.get("beta", 1)
    alpha = call.kwargs.get("alpha", 1)
    batch = a.dim() - 2 if call.op == "aten::baddbmm" else 0
    temp = call.output_names[0] + ".mm"
    node = _matmul_node(call, a, b, temp, batch)

    def epilogue(bias_t: torch.Tensor, mm_t: torch.Tensor) -> torch.Tensor:
        return beta * bias_t + alpha * mm_t

    add = ReplayNode(
        call.node_name(".epilogue"),
        call.op,
        "pointwise",
        epilogue,
        (ValueRef(call.name(bias)), ValueRef(temp)),
        {},
        [call.output_names[0]],
    )
    out = call.outputs[0]
    return OpCost("contraction", {_dt(a): node.points()}, out.numel(), [node, add])


def rule_linear(call: OpCall) -> OpCost:
    """``aten::linear`` kept whole by the export frontend: ``Y[*b, n] = Σ_k X[*b, k] W[n, k] (+ bias[n])``.

    Same MACs and epilogue FLOPs as the dispatch path's ``t`` + ``addmm``/``mm`` it replaces.
    """
    x, w = call.args[0], call.args[1]
    bias = call.arg(2, "bias")
    bs = _ranks("b", x.dim() - 1)
    ranks = {r: int(s) for r, s in zip(bs, x.shape[:-1], strict=True)}
    ranks.update({"k": int(x.shape[-1]), "n": int(w.shape[0])})
    target = call.output_names[0] if bias is None else call.output_names[0] + ".mm"
    node = EinsumNode(
        call.node_name(".mac"),
        call.op,
        ranks,
        [Access(call.name(x), _proj(*bs, "k")), Access(call.name(w), _proj("n", "k"))],
        target,
        (*[(b,) for b in bs], ("n",)),
        compute_dtype=_dt(x),
    )
    if bias is None:
        return OpCost("contraction", {_dt(x): node.points()}, 0, [node])
    add = ReplayNode(
        call.node_name(".bias"),
        call.op,
        "pointwise",
        torch.add,
        (ValueRef(target), ValueRef(call.name(bias))),
        {},
        [call.output_names[0]],
    )
    return OpCost("contraction", {_dt(x): node.points()}, call.outputs[0].numel(), [node, add])


def rule_linalg_solve(call: OpCall) -> OpCost:
    """``A X = B`` by LU: ``n³/3`` MACs to factor plus ``n²·k`` for the two triangular solves (classical
    algorithms; the bound is for them)."""
    a, b = call.args[0], call.args[1]
    n = int(a.shape[-1])
    batch = math.prod(a.shape[:-2])
    k = int(b.shape[-1]) if b.dim() == a.dim() else 1
    macs = batch * (n**3 // 3 + n * n * k)
    return OpCost("contraction", {_dt(a): macs}, 0, [call.replay("contraction")])


# --------------------------------------------------------------------------------------------------------
# Reductions (einsum with one operand), normalisations, movement, creation
# --------------------------------------------------------------------------------------------------------


def _reduce_dims(x: torch.Tensor, dims: Any) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.dim()))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % max(x.dim(), 1) for d in dims)


def rule_reduction_einsum(call: OpCall) -> OpCost:
    """sum / mean / amax over dims as a one-operand einsum (``reduce`` add or max, mean scales by 1/N)."""
    x = call.args[0]
    out = call.outputs[0]
    packet = call.op.split(".")[0]
    dims = _reduce_dims(x, call.arg(1, "dim") if call.op not in ("aten::sum", "aten::mean") else None)
    keep = bool(call.arg(2, "keepdim", False)) if call.op not in ("aten::sum", "aten::mean") else False
    rs = _ranks("a", x.dim())
    ranks = {r: int(s) for r, s in zip(rs, x.shape, strict=True)}
    out_r: list[tuple[str, ...]] = []
    for i, r in enumerate(rs):
        if i not in dims:
            out_r.append((r,))
        elif keep:
            out_r.append(())
    n = math.prod(x.shape[d] for d in dims) if x.dim() else 1
    scale = 1.0 / n if packet == "aten::mean" and n else 1.0
    node = EinsumNode(
        call.node_name(),
        call.op,
        ranks,
        [Access(call.name(x), _proj(*rs))],
        call.output_names[0],
        tuple(out_r),
        reduce="max" if packet == "aten::amax" else "add",
        scale=scale,
        compute_dtype=_dt(out),
        kind="reduction",
        out_dtype=_dt(out),
    )
    return OpCost("reduction", {}, x.numel(), [node])


def _flops_per_input(factor: int, kind: str) -> Rule:
    def rule(call: OpCall) -> OpCost:
        return OpCost(kind, {}, factor * call.args[0].numel(), [call.replay(kind)])

    return rule


def _movement(call: OpCall) -> OpCost:
    return OpCost("movement", {}, 0, [call.replay("movement")])


def _creation(call: OpCall) -> OpCost:
    return OpCost("creation", {}, 0, [call.replay("creation")])


def _gather_source(src_arg: int, index_arg: int, row_elements: Callable[[torch.Tensor], int]) -> Rule:
    """Gathers read only the indexed rows: unfused bytes use ``min(src, gathered)``; compulsory traffic from
    the source is one row (a lower bound: the indices are unknown on meta tensors)."""

    def rule(call: OpCall) -> OpCost:
        src = call.args[src_arg]
        out = call.outputs[0]
        gathered = min(src.numel(), out.numel())
        return OpCost(
            "movement",
            {},
            0,
            [call.replay("movement")],
            read_elements={id(src): gathered},
            compulsory_elements={id(src): min(gathered, row_elements(src))},
        )

    return rule


def rule_pooling(call: OpCall) -> OpCost:
    x, out = call.args[0], call.outputs[0]
    kernel = call.arg(1, "kernel_size")
    window = math.prod(kernel) if isinstance(kernel, (list, tuple)) and kernel else 1
    flops = max(out.numel() * window, x.numel()) if "adaptive" in call.op else out.numel() * window
    return OpCost("reduction", {}, int(flops), [call.replay("reduction")])


def _install_defaults() -> None:
    from neurips26.methods.solar.rules_attention import rule_sdpa, rule_sdpa_aten  # registered here
    from neurips26.methods.solar.rules_convolution import rule_convolution

    for op in ("aten::mm", "aten::bmm", "aten::mv", "aten::dot"):
        register_rule(op, rule_matmul)
    for op in ("aten::addmm", "aten::baddbmm", "aten::addmv"):
        register_rule(op, rule_addmm)
    register_rule("aten::convolution", rule_convolution)
    register_rule("torch.nn.functional.scaled_dot_product_attention", rule_sdpa)
    # composite ops the export frontend keeps whole (see frontend_export.trimmed_decomposition_table)
    register_rule("aten::scaled_dot_product_attention", rule_sdpa)
    register_rule("aten::linear", rule_linear)
    for op in (
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
    ):
        register_rule(op, rule_sdpa_aten)
    register_rule("aten::_linalg_solve_ex", rule_linalg_solve)
    for op in (  # checks that compute nothing (export inserts the metadata assertions)
        "aten::_linalg_check_errors",
        "aten::_assert_tensor_metadata",
        "aten::_assert_async",
        "aten::_assert_scalar",
        "aten::_functional_assert_async",
        "aten::sym_constrain_range_for_size",
    ):
        register_rule(op, lambda call: OpCost("view", {}, 0, []))
    for op in ("aten::sum.dim_IntList", "aten::sum", "aten::mean.dim", "aten::mean", "aten::amax"):
        register_rule(op, rule_reduction_einsum)
    for op in (
        "aten::native_layer_norm",
        "aten::native_batch_norm",
        "aten::_native_batch_norm_legit_no_training",
        "aten::_native_batch_norm_legit",
        "aten::native_group_norm",
        "aten::_fused_rms_norm",
        "aten::layer_norm",
        "aten::rms_norm",
        "aten::group_norm",
    ):
        register_rule(op, _flops_per_input(5, "normalization"))
    for op in (
        "aten::_softmax",
        "aten::_log_softmax",
        "aten::_safe_softmax",
        "aten::logsumexp",
        "aten::softmax",
        "aten::log_softmax",
    ):
        register_rule(op, _flops_per_input(5, "normalization"))
    for op in (
        "aten::cumsum",
        "aten::cumprod",
        "aten::var",
        "aten::var_mean",
        "aten::std",
        "aten::argmax",
        "aten::argmin",
        "aten::max.dim",
        "aten::min.dim",
        "aten::max",
        "aten::min",
        "aten::amin",
        "aten::prod",
        "aten::linalg_vector_norm",
        "aten::any",
        "aten::all",
        "aten::topk",
        "aten::sort",
    ):
        register_rule(op, _flops_per_input(1, "reduction"))
    for op in (
        "aten::max_pool2d_with_indices",
        "aten::max_pool1d_with_indices",
        "aten::avg_pool2d",
        "aten::avg_pool1d",
        "aten::max_pool2d",
        "aten::_adaptive_avg_pool2d",
        "aten::adaptive_avg_pool2d",
        "aten::max_pool3d_with_indices",
        "aten::avg_pool3d",
    ):
        register_rule(op, rule_pooling)
    for op in (
        "aten::clone",
        "aten::_to_copy",
        "aten::copy_",
        "aten::cat",
        "aten::stack",
        "aten::tril",
        "aten::triu",
        "aten::constant_pad_nd",
        "aten::repeat",
        "aten::flip",
        "aten::roll",
        "aten::slice_scatter",
        "aten::select_scatter",
        "aten::index_put",
        "aten::index_put_",
        "aten::lift_fresh_copy",
        "aten::expand_copy",
        "aten::permute_copy",
        "aten::contiguous",
        "aten::_unsafe_index",
        "aten::masked_scatter",
        "aten::scatter",
        "aten::scatter_add",
        "aten::fill_",
        "aten::zero_",
    ):
        register_rule(op, _movement)
    register_rule("aten::embedding", _gather_source(0, 1, lambda w: int(w.shape[-1]) if w.dim() else 1))
    register_rule("aten::index_select", _gather_source(0, 2, lambda s: int(s[0].numel()) if s.dim() else 1))
    register_rule("aten::gather", _gather_source(0, 2, lambda s: 1))
    register_rule("aten::index.Tensor", _gather_source(0, 1, lambda s: int(s[0].numel()) if s.dim() else 1))
    for op in (
        "aten::empty",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::arange",
        "aten::scalar_tensor",
        "aten::empty_like",
        "aten::zeros_like",
        "aten::ones_like",
        "aten::full_like",
        "aten::new_empty",
        "aten::new_zeros",
        "aten::new_ones",
        "aten::new_full",
        "aten::eye",
        "aten::linspace",
        "aten::empty_strided",
        "aten::empty_permuted",
    ):
        register_rule(op, _creation)


_install_defaults()
