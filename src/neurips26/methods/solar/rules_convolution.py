"""SOLAR: the convolution rules (``aten::convolution``, plain and transposed) — ATen -> IR + exact counts.

A plain convolution is an einsum whose input access is affine in the output position and the kernel tap.
A transposed convolution scatters each input position over the output; we count it exactly by guarding
the taps that land inside the output (the full rectangle is kept beside it as the conventional count).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from neurips26.methods.solar.ir import Access, Affine, EinsumNode, ReplayNode, ValueRef
from neurips26.methods.solar.rules import OpCall, OpCost, _dt, _ranks


def rule_convolution(call: OpCall) -> OpCost:
    """Sliding-window einsum ``Y[b, g*O+o, p] += X[b, g*C+c, p*s + r*d - pad] * W[g*O+o, c, r]``.

    Guards keep only taps that read inside the input, so padded zeros are not counted as MACs (an
    implementation can skip them; counting them would not be a lower bound). Transposed convolutions are
    :func:`_transposed_convolution_node`.
    """
    x, w, bias = call.args[0], call.args[1], call.args[2]
    stride, padding, dilation = call.args[3], call.args[4], call.args[5]
    transposed, groups = call.args[6], int(call.args[8])
    out = call.outputs[0]
    nd = x.dim() - 2
    target = call.output_names[0] if bias is None else call.output_names[0] + ".conv"
    if transposed:
        node = _transposed_convolution_node(call, target)
        # FlopCounterMode/fvcore: every input pixel times every kernel tap, cropped outputs included
        full = math.prod(node.ranks[r] for r in node.ranks if not r.startswith("q"))
        nodes, flops = _with_bias(call, node, target, nd)
        return OpCost("contraction", {_dt(x): node.points()}, flops, nodes, conventional={_dt(x): full})
    cg, og = w.shape[1], w.shape[0] // groups
    ps, rs = _ranks("p", nd), _ranks("r", nd)
    ranks = {"b": x.shape[0], "g": groups, "o": og, "c": cg}
    ranks.update({p: int(out.shape[2 + i]) for i, p in enumerate(ps)})
    ranks.update({r: int(w.shape[2 + i]) for i, r in enumerate(rs)})
    x_idx = [Affine.of("b"), Affine((("g", cg), ("c", 1)))]
    guards = []
    for i in range(nd):
        spatial = Affine(((ps[i], int(stride[i])), (rs[i], int(dilation[i]))), -int(padding[i]))
        x_idx.append(spatial)
        guards.append(spatial)  # index >= 0
        guards.append(
            Affine(
                ((ps[i], -int(stride[i])), (rs[i], -int(dilation[i]))),
                int(padding[i]) + int(x.shape[2 + i]) - 1,
            )
        )  # index <= H-1
    w_idx = [Affine((("g", og), ("o", 1))), Affine.of("c"), *[Affine.of(r) for r in rs]]
    node = EinsumNode(
        call.node_name(".mac"),
        call.op,
        {k: int(v) for k, v in ranks.items()},
        [Access(call.name(x), tuple(x_idx)), Access(call.name(w), tuple(w_idx))],
        target,
        (("b",), ("g", "o"), *[(p,) for p in ps]),
        guards=tuple(guards),
        compute_dtype=_dt(x),
    )
    nodes, flops = _with_bias(call, node, target, nd)
    return OpCost("contraction", {_dt(x): node.points()}, flops, nodes)


def _transposed_convolution_node(call: OpCall, target: str) -> EinsumNode:
    """``Y[b, g*O+o, q] += X[b, g*C+c, p] * W[g*C+c, o, r]`` over the points with ``q = p*s + r*d - pad``.

    Each input pixel ``p`` scatters through each tap ``r`` to output ``q``; the equality is two guards
    (``>= 0`` both ways) and ``q``'s range ``[0, out)`` crops the taps that ``padding`` cuts away, so the
    point count is the exact MACs (``output_padding`` only widens ``out``). Every access is a projection:
    the executor multiplies ``X``, ``W`` and the per-dimension 0/1 masks over ``(q, p, r)``.
    """
    x, w = call.args[0], call.args[1]
    stride, padding, dilation = call.args[3], call.args[4], call.args[5]
    groups = int(call.args[8])
    out = call.outputs[0]
    nd = x.dim() - 2
    cg, og = int(w.shape[0]) // groups, int(w.shape[1])
    ps, qs, rs = _ranks("p", nd), _ranks("q", nd), _ranks("r", nd)
    ranks = {"b": int(x.shape[0]), "g": groups, "c": cg, "o": og}
    guards = []
    for i in range(nd):
        ranks.update({ps[i]: int(x.shape[2 + i]), qs[i]: int(out.shape[2 + i]), rs[i]: int(w.shape[2 + i])})
        s, d, pad = int(stride[i]), int(dilation[i]), int(padding[i])
        guards.append(Affine(((qs[i], 1), (ps[i], -s), (rs[i], -d)), pad))  # q >= p*s + r*d - pad
        guards.append(Affine(((qs[i], -1), (ps[i], s), (rs[i], d)), -pad))  # q <= p*s + r*d - pad
    channel = Affine((("g", cg), ("c", 1)))
    return EinsumNode(
        call.node_name(".mac"),
        call.op,
        ranks,
        [
            Access(call.name(x), (Affine.of("b"), channel, *[Affine.of(p) for p in ps])),
            Access(call.name(w), (channel, Affine.of("o"), *[Affine.of(r) for r in rs])),
        ],
        target,
        (("b",), ("g", "o"), *[(q,) for q in qs]),
        guards=tuple(guards),
        compute_dtype=_dt(x),
    )


def _with_bias(call: OpCall, node: EinsumNode, target: str, nd: int) -> tuple[list[Any], int]:
    """The convolution's nodes and other FLOPs: the einsum, then ``+ bias`` per output channel if any."""
    bias = call.args[2]
    if bias is None:
        return [node], 0

    def add_bias(y: torch.Tensor, b_t: torch.Tensor) -> torch.Tensor:
        return y + b_t.reshape(1, -1, *([1] * nd))

    epilogue = ReplayNode(
        call.node_name(".bias"),
        call.op,
        "pointwise",
        add_bias,
        (ValueRef(target), ValueRef(call.name(bias))),
        {},
        [call.output_names[0]],
    )
    return [node, epilogue], call.outputs[0].numel()
