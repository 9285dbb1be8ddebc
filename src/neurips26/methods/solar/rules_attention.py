"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — attention rules (SDPA -> two einsums).

Scaled dot-product attention lowers to a score einsum, a masked softmax (replayed, restricted to the score
einsum's guarded domain) and a value einsum; a causal mask is a guard, so the MACs are the triangle. The
conventional count (the full square, as FlopCounterMode counts it) is ``OpRecord.conventional_macs``.
Registered by :func:`neurips26.methods.solar.rules._install_defaults`.
"""

from __future__ import annotations

import math

import torch

from neurips26.methods.solar.ir import Access, Affine, EinsumNode, ReplayNode, ValueRef, guard_mask
from neurips26.methods.solar.rules import OpCall, OpCost, _dt, _ranks


def _attention_softmax(scores: torch.Tensor, qk: EinsumNode, mask: torch.Tensor | None) -> torch.Tensor:
    """Row softmax over the last axis restricted to the score einsum's domain (its guards, read when the
    node runs, so a wrong guard changes the output and fails the gate), plus an optional attention mask."""
    if qk.guards:
        keep, ranks = guard_mask(qk.ranks, qk.guards)
        if ranks != ["m", "n"]:
            keep = keep.permute([ranks.index("m"), ranks.index("n")]) if set(ranks) == {"m", "n"} else keep
        scores = scores.masked_fill(~keep, -math.inf)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores.to(torch.float64), dim=-1).to(scores.dtype)


def rule_sdpa_aten(call: OpCall) -> OpCost:
    """ATen-level fused attention kernels (``_scaled_dot_product_*_attention``), seen when a module calls them
    below the Python function (e.g. ``nn.MultiheadAttention``'s fast path, or a CPU trace)."""
    schema = call.func._schema
    named = {
        a.name: (call.args[i] if i < len(call.args) else call.kwargs.get(a.name, a.default_value))
        for i, a in enumerate(schema.arguments)
    }
    adapted = OpCall(
        call.index,
        call.op,
        call.func,
        (named["query"], named["key"], named["value"]),
        {
            "attn_mask": named.get("attn_mask", named.get("attn_bias")),
            "dropout_p": named.get("dropout_p", 0.0),
            "is_causal": named.get("is_causal", False),
            "scale": named.get("scale"),
        },
        call.outputs[:1],
        call.output_names[:1],
        call.value_of,
    )
    return rule_sdpa(adapted)


def rule_sdpa(call: OpCall) -> OpCost:
    """Scaled dot-product attention as two einsums around a masked softmax.

    ``S[z, h, m, n] = scale * Σ_d Q[z, h, m, d] K[z, h', n, d]`` with guard ``m - n >= 0`` when causal, then
    ``O[z, h, m, e] = Σ_n P[z, h, m, n] V[z, h', n, e]``; grouped-query heads split ``h = h'·rep + j``.
    MACs are the guarded domain sizes: a causal mask gives the triangle ``M(M+1)/2`` (for M = N).
    """
    q, k, v = call.arg(0, "query"), call.arg(1, "key"), call.arg(2, "value")
    mask = call.arg(3, "attn_mask")
    dropout = call.arg(4, "dropout_p", 0.0)
    causal = bool(call.arg(5, "is_causal", False))
    scale = call.arg(6, "scale")
    if dropout:
        raise NotImplementedError(
            "scaled_dot_product_attention with dropout_p > 0 is random; trace in eval mode"
        )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    nb = q.dim() - 2
    zs = _ranks("z", nb)
    ranks: dict[str, int] = {z: int(s) for z, s in zip(zs, q.shape[:nb], strict=True)}
    q_head, kv_head = list(map(Affine.of, zs)), list(map(Affine.of, zs))
    out_batch: list[tuple[str, ...]] = [(z,) for z in zs]
    if nb >= 1 and k.shape[nb - 1] != q.shape[nb - 1]:
        rep = q.shape[nb - 1] // k.shape[nb - 1]
        hz = zs[-1]
        ranks[hz] = int(k.shape[nb - 1])
        ranks["j"] = rep
        q_head[-1] = Affine(((hz, rep), ("j", 1)))
        out_batch[-1] = (hz, "j")
    ranks.update({"m": int(q.shape[-2]), "n": int(k.shape[-2]), "d": int(q.shape[-1]), "e": int(v.shape[-1])})
    guards = (Affine((("m", 1), ("n", -1))),) if causal else ()
    scores, probs, out = (
        call.output_names[0] + ".scores",
        call.output_names[0] + ".probs",
        call.output_names[0],
    )
    qk = EinsumNode(
        call.node_name(".qk"),
        call.op,
        {r: ranks[r] for r in ranks if r != "e"},
        [
            Access(call.name(q), (*q_head, Affine.of("m"), Affine.of("d"))),
            Access(call.name(k), (*kv_head, Affine.of("n"), Affine.of("d"))),
        ],
        scores,
        (*out_batch, ("m",), ("n",)),
        guards=guards,
        scale=scale,
        compute_dtype=_dt(q),
    )
    soft = ReplayNode(
        call.node_name(".softmax"),
        call.op,
        "normalization",
        lambda s, m_: _attention_softmax(s, qk, m_),
        (ValueRef(scores), ValueRef(call.name(mask)) if mask is not None else None),
        {},
        [probs],
    )
    pv_ranks = {r: ranks[r] for r in ranks if r != "d"}
    pv = EinsumNode(
        call.node_name(".pv"),
        call.op,
        pv_ranks,
        [
            Access(probs, (*q_head, Affine.of("m"), Affine.of("n"))),
            Access(call.name(v), (*kv_head, Affine.of("n"), Affine.of("e"))),
        ],
        out,
        (*out_batch, ("m",), ("e",)),
        guards=guards,
        compute_dtype=_dt(q),
    )
    score_points = qk.points() // ranks["d"]
    macs = qk.points() + pv.points()
    return OpCost("attention", {_dt(q): macs}, 5 * score_points, [qk, soft, pv])
