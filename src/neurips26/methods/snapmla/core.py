"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — the numerics.

Everything here works on plain tensors. The pieces, in the order of the decode pipeline:

1. FP8 E4M3 quantization with explicit scales (``quantize_e4m3``), one scale per token (or per tile, or
   per tensor) computed from the absolute maximum (``amax_scales``). Values beyond +-448 after scaling are
   clamped explicitly and counted: torch's CPU cast saturates silently, while a GPU conversion without
   saturation gives NaN, so the clamp makes the result backend-independent and the overflow visible.
2. The absorbed MLA decode (DeepSeek-V2/V3): with the latent cache c (B, T, d_c) and the RoPE key
   k_R (B, T, d_r), the head-h logits are ``(q_h^C W_UK,h) . c_t + q_h^R . k_R,t`` and the output is
   ``W_UV,h sum_t p_t c_t`` (``absorb_query``, ``project_latent_output``).
3. Pre-scaled domain alignment: with the content operands quantized as ``q~ = s_q * q8`` and
   ``c = s_t * c8``, the RoPE operands are divided by the same scales (``q_R / s_q``, ``k_R / s_t``) so that
   ``s_q s_t (q8 . c8 + (q_R/s_q) . (k_R/s_t))`` equals the logit: one accumulator, one rescale
   (``align_rope_to_quant_domain``).
4. The quantized PV pipeline inside an online-softmax loop over KV blocks (``online_latent_attention``): the
   per-token V scales (MLA's V is the latent c, so they are the K scales) lie on the reduction axis of
   P.V and cannot be applied after the GEMM, so they are fused into P (``P' = P * s_t``); P' is quantized
   to FP8 per row and per 64-token block with a dynamic scale ``s_P = amax(P')/448``; the FP8 product is
   rescaled by ``s_P`` before it enters the running output.

FP8 products are emulated exactly: the product of two E4M3 (or BF16) numbers is exact in float32, so a
float32 matmul of the cast values is an FP8 GEMM with a float32 accumulator (Hopper's accumulator keeps
fewer bits; that is not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

__all__ = [
    "E4M3_MAX",
    "KeyOperands",
    "PMode",
    "QueryOperands",
    "ScaleMode",
    "absorb_query",
    "align_rope_to_quant_domain",
    "amax_scales",
    "bf16_round",
    "e4m3_round",
    "latent_attention_reference",
    "online_latent_attention",
    "project_latent_output",
    "quantize_e4m3",
    "quantize_p_block",
    "split_kv_b_weight",
]

E4M3_MAX = 448.0  # largest finite float8_e4m3fn value (OCP FP8 spec)
_TINY_AMAX = 1e-12  # an all-zero group gets scale 1 instead of 0 (its codes are 0 either way)
# x / (amax / 448) can land a few ulps above 448 in float32; that is rounding, not overflow
_OVERFLOW_SLACK = 1.0 + 2.0**-16

ScaleMode = Literal["float", "pow2"]
PMode = Literal["exact", "bf16", "fp8_block", "fp8_static"]


def e4m3_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest E4M3 value (values must already lie in [-448, 448]); returns x's dtype."""
    return x.to(torch.float8_e4m3fn).to(x.dtype)


def bf16_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest BF16 value; returns x's dtype (exact products in float32 afterwards)."""
    return x.to(torch.bfloat16).to(x.dtype)


def amax_scales(amax: torch.Tensor, mode: ScaleMode = "float") -> torch.Tensor:
    """Dequantization scales ``s = amax / 448`` (``pow2``: rounded up to a power of two, UE8M0-style).

    A group whose amax is 0 gets ``s = 1``. The scale maps the group's largest magnitude onto E4M3's
    largest finite value, so dynamic scales never overflow.
    """
    safe = torch.where(amax > _TINY_AMAX, amax, torch.ones_like(amax))
    scale = safe / E4M3_MAX
    if mode == "pow2":
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    elif mode != "float":
        raise ValueError(f"scale_mode={mode!r} is not allowed; choose 'float' or 'pow2'")
    return scale


def quantize_e4m3(x: torch.Tensor, scale: torch.Tensor, *, enabled: bool = True) -> tuple[torch.Tensor, int]:
    """FP8 E4M3 codes of ``x / scale`` (as x's dtype), clamped to +-448, and the number of clamped values.

    ``scale`` broadcasts against ``x``. With ``enabled=False`` the scaled values are returned uncast (the
    degenerate, quantization-free pipeline).
    """
    scaled = x / scale
    overflow = int((scaled.abs() > E4M3_MAX * _OVERFLOW_SLACK).sum())
    clamped = scaled.clamp(-E4M3_MAX, E4M3_MAX)
    return (e4m3_round(clamped) if enabled else clamped), overflow


def split_kv_b_weight(
    weight: torch.Tensor, num_heads: int, qk_nope_head_dim: int, v_head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``kv_b_proj.weight`` (H*(d_nope+d_v), d_c) into W_UK (H, d_nope, d_c) and W_UV (H, d_v, d_c)."""
    expected = num_heads * (qk_nope_head_dim + v_head_dim)
    if weight.ndim != 2 or weight.shape[0] != expected:
        raise ValueError(
            f"kv_b_proj weight has shape {tuple(weight.shape)}; expected ({expected}, kv_lora_rank) for "
            f"num_heads={num_heads}, qk_nope_head_dim={qk_nope_head_dim}, v_head_dim={v_head_dim}"
        )
    per_head = weight.view(num_heads, qk_nope_head_dim + v_head_dim, weight.shape[1])
    return per_head[:, :qk_nope_head_dim], per_head[:, qk_nope_head_dim:]


def absorb_query(q_nope: torch.Tensor, w_uk: torch.Tensor) -> torch.Tensor:
    """q~_h = W_UK,h^T q_h^C: (B, H, Tq, d_nope) x (H, d_nope, d_c) -> (B, H, Tq, d_c).

    Then q~_h . c_t = q_h^C . (W_UK,h c_t) = q_h^C . k_h,t^C: the up-projected key is never formed.
    """
    return torch.matmul(q_nope, w_uk.to(q_nope.dtype))


def project_latent_output(o_latent: torch.Tensor, w_uv: torch.Tensor) -> torch.Tensor:
    """o_h = W_UV,h (sum_t p_t c_t): (B, H, Tq, d_c) x (H, d_v, d_c) -> (B, H, Tq, d_v)."""
    return torch.matmul(o_latent, w_uv.to(o_latent.dtype).transpose(-1, -2))


def latent_attention_reference(
    q_content: torch.Tensor,
    q_rope: torch.Tensor,
    content: torch.Tensor,
    rope: torch.Tensor,
    scaling: float,
    mask: torch.Tensor | None = None,
    *,
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Full-precision absorbed MLA attention over a latent cache, one softmax over all tokens.

    ``logits = scaling (q~ c^T + q_R k_R^T)``; ``o_latent = softmax(logits + mask) c``.

    Shapes: q_content (B, H, Tq, d_c), q_rope (B, H, Tq, d_r), content (B, T, d_c), rope (B, T, d_r),
    mask additive, broadcastable to (B, H, Tq, T); a row it masks entirely gets output 0. Returns o_latent
    (B, H, Tq, d_c) [and the logits].
    """
    logits = (
        torch.matmul(q_content, content.unsqueeze(1).transpose(-1, -2))
        + torch.matmul(q_rope, rope.unsqueeze(1).transpose(-1, -2))
    ) * scaling
    if mask is not None:
        logits = logits + mask
    probs = torch.softmax(logits, dim=-1)
    # a fully masked row (a pad position of a left-padded batch) attends to nothing: 0, not NaN
    probs = probs.masked_fill((logits == float("-inf")).all(dim=-1, keepdim=True), 0.0)
    out = torch.matmul(probs, content.unsqueeze(1))
    return (out, logits) if return_logits else out


@dataclass
class KeyOperands:
    """The cached key/value side of one layer as the decode kernel reads it.

    ``content`` (B, T, d_c) and ``rope`` (B, T, d_r) hold the stored values (FP8 codes or BF16 numbers) as
    a float dtype; both live in the domain of ``scale`` (B, T): the real key is ``scale_t * [content; rope]``.
    MLA's value is the latent itself, so ``content`` with ``scale`` is also V.
    """

    content: torch.Tensor
    rope: torch.Tensor
    scale: torch.Tensor


@dataclass
class QueryOperands:
    """The query side: ``content`` = absorbed query q~ (B, H, Tq, d_c), ``rope`` (B, H, Tq, d_r), both in the
    domain of ``scale`` (B, H, Tq)."""

    content: torch.Tensor
    rope: torch.Tensor
    scale: torch.Tensor


def align_rope_to_quant_domain(
    rope: torch.Tensor, scale: torch.Tensor, *, round_bf16: bool = True
) -> torch.Tensor:
    """Pre-scaled domain alignment: divide a BF16 RoPE operand by its row's content scale.

    With q~ = s_q q8 and c_t = s_t c8_t, the logit is
    ``s_q s_t (q8 . c8_t + (q_R / s_q) . (k_R,t / s_t))``: the BF16 RoPE product joins the FP8 content
    product in one accumulator and one post-GEMM rescale by ``s_q s_t`` covers both (paper: "pre-posed
    scale domain alignment"). ``rope`` (..., d_r), ``scale`` (...).
    """
    aligned = rope / scale.unsqueeze(-1)
    return bf16_round(aligned) if round_bf16 else aligned


def quantize_p_block(
    p_scaled: torch.Tensor,
    p_mode: PMode,
    static_scale: float | None,
    scale_mode: ScaleMode,
    fp8_enabled: bool,
) -> tuple[torch.Tensor, torch.Tensor | float]:
    """The P operand of the PV GEMM for one KV block and the scale to apply after the GEMM.

    ``fp8_block``: dynamic per-row scale over the block, ``s_P = amax(P')/448`` (paper: block 64).
    ``fp8_static``: one fixed scale (FA3-style ``P * 448`` for per-tensor V scales).
    """
    if p_mode == "exact":
        return p_scaled, 1.0
    if p_mode == "bf16":
        return bf16_round(p_scaled), 1.0
    if p_mode == "fp8_block":
        s_p = amax_scales(p_scaled.amax(dim=-1, keepdim=True), scale_mode)
    elif p_mode == "fp8_static":
        if static_scale is None:
            raise ValueError("p_mode='fp8_static' needs static_p_scale")
        s_p = static_scale
    else:
        raise ValueError(f"p_mode={p_mode!r} is not allowed; choose exact, bf16, fp8_block or fp8_static")
    p_codes, _ = quantize_e4m3(p_scaled, s_p, enabled=fp8_enabled)
    return p_codes, s_p


def online_latent_attention(
    query: QueryOperands,
    keys: KeyOperands,
    scaling: float,
    mask: torch.Tensor | None = None,
    *,
    block_size: int = 64,
    p_mode: PMode = "fp8_block",
    static_p_scale: float | None = None,
    scale_mode: ScaleMode = "float",
    fp8_enabled: bool = True,
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The SnapMLA decode kernel (CPU reference): online softmax over KV blocks with scale-fused FP8 PV.

    Per block b of ``block_size`` tokens (all heads and queries at once):

    - ``S = scaling * s_q s_t * (q8 . c8 + q_R' . k_R')`` — one accumulator, one rescale;
    - online softmax: ``m' = max(m, rowmax S)``, ``P = exp(S - m')``, ``l = l e^(m - m') + rowsum P``;
    - scale fusion: ``P' = P * s_t`` (V's per-token scale on the reduction axis moves into P);
    - block FP8 P: ``s_P = amax_row(P') / 448``, ``P8 = e4m3(P' / s_P)``;
    - ``o = o e^(m - m') + s_P (P8 @ c8)``; finally ``o / l``.

    Parameters
    ----------
    query, keys: operands (see :class:`QueryOperands`, :class:`KeyOperands`).
    scaling: the softmax scale (1/sqrt(d_nope + d_r) in DeepSeek-V3).
    mask: additive, broadcastable to (B, H, Tq, T), or None.
    block_size: KV tokens per block; also the P quantization block (paper: 64).
    p_mode: ``fp8_block`` (SnapMLA), ``fp8_static``, ``bf16`` or ``exact``.
    static_p_scale: the fixed P scale for ``fp8_static``.
    scale_mode: ``float`` or ``pow2`` for the dynamic P scales.
    fp8_enabled: False replaces every FP8 cast by the identity (the degenerate pipeline).
    return_logits: also return the full logits S (B, H, Tq, T), for KL metrics.

    Returns
    -------
    o_latent (B, H, Tq, d_c) in the query's dtype [, logits].
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    q_c, q_r, s_q = query.content, query.rope, query.scale
    batch, heads, n_query, d_c = q_c.shape
    total = keys.content.shape[1]
    if keys.content.shape[-1] != d_c or keys.rope.shape[-1] != q_r.shape[-1]:
        raise ValueError(
            f"query dims (content {d_c}, rope {q_r.shape[-1]}) do not match the cache layout "
            f"(content {keys.content.shape[-1]}, rope {keys.rope.shape[-1]})"
        )
    dtype = q_c.dtype
    device = q_c.device
    running_max = torch.full((batch, heads, n_query), float("-inf"), dtype=dtype, device=device)
    denominator = torch.zeros((batch, heads, n_query), dtype=dtype, device=device)
    output = torch.zeros((batch, heads, n_query, d_c), dtype=dtype, device=device)
    all_logits = []
    for start in range(0, total, block_size):
        stop = min(start + block_size, total)
        c_blk = keys.content[:, start:stop].unsqueeze(1)  # (B, 1, blk, d_c)
        r_blk = keys.rope[:, start:stop].unsqueeze(1)
        s_blk = keys.scale[:, start:stop][:, None, None, :]  # (B, 1, 1, blk)
        # one accumulator for content and RoPE, one post-GEMM rescale
        accumulator = torch.matmul(q_c, c_blk.transpose(-1, -2)) + torch.matmul(q_r, r_blk.transpose(-1, -2))
        logits = accumulator * s_q.unsqueeze(-1) * s_blk * scaling
        if mask is not None:
            logits = logits + mask[..., start:stop]
        if return_logits:
            all_logits.append(logits)
        new_max = torch.maximum(running_max, logits.amax(dim=-1))
        safe_max = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
        correction = torch.exp(running_max - safe_max)
        probs = torch.exp(logits - safe_max.unsqueeze(-1))
        denominator = denominator * correction + probs.sum(dim=-1)
        probs_scaled = probs * s_blk  # fuse V's per-token scales into P
        p_operand, p_scale = quantize_p_block(probs_scaled, p_mode, static_p_scale, scale_mode, fp8_enabled)
        output = output * correction.unsqueeze(-1) + torch.matmul(p_operand, c_blk) * p_scale
        running_max = new_max
    # a query row that sees no key at all (a pad position of a left-padded batch) has no mass: its output
    # is 0, as in the Triton kernel, not 0/0 = NaN that the next layer would spread over its real tokens
    has_mass = denominator > 0
    result = output / torch.where(has_mass, denominator, torch.ones_like(denominator)).unsqueeze(-1)
    if return_logits:
        return result, torch.cat(all_logits, dim=-1)
    return result
