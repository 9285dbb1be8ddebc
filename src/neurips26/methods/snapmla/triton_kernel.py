"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — Triton decode.

The fused decode kernel of the SnapMLA recipe, written in Triton. It follows the same math as the CPU
reference :func:`neurips26.methods.snapmla.core.online_latent_attention`. For each batch entry, each block
of ``BLOCK_R`` query rows (heads x new tokens) and each split of the KV sequence, it loops over 64-token
KV blocks:

- ``acc = q8 . c8^T`` (FP8 x FP8 -> fp32), then ``acc += q_R' . k_R'^T`` (BF16, the same accumulator).
  Here ``k_R' = bf16(k_R / s_t)`` is aligned into the content's scale domain as the block is fetched;
- ``S = acc * s_q * s_t * scaling``: one post-GEMM rescale covers both logit parts;
- online softmax: ``m' = max(m, rowmax S)``, ``P = exp(S - m')``, ``l = l e^(m - m') + rowsum P``;
- ``P' = P * s_t``: V's per-token scales (MLA's V is c) are fused into P;
- ``s_P = amax_row(P') / 448`` and ``P8 = e4m3(P' / s_P)``: block-wise dynamic FP8 P;
- ``o = o e^(m - m') + s_P (P8 . c8)`` (FP8 x FP8 -> fp32).

Splits over the KV sequence are merged by their log-sum-exp (flash-decoding) in a second Triton kernel.
Split boundaries are multiples of 64 tokens, so the P quantization blocks stay the reference's blocks.
The query side (Fused-Q-Quant) runs in PyTorch in :func:`snapmla_decode_triton`.

**Interpreter mode.** The kernel runs on CPU tensors under Triton's interpreter when the environment
variable ``TRITON_INTERPRET=1`` is set *before this module is imported*. The tests do this in a
subprocess. Triton 3.9's interpreter gets three things wrong, so the kernel has a constexpr switch
``EMULATED_CASTS``, on by default under the interpreter:

- its fp32 -> E4M3 cast does not carry a rounded-up mantissa into the exponent (31.6 -> 16), rounds
  ties away from zero, and wraps values above 448;
- its fp32 -> BF16 cast truncates;
- its ``tl.dot`` reads BF16 operands as raw uint16 bits.

With ``EMULATED_CASTS`` the kernel rounds to the E4M3 and BF16 grids with integer and floor
arithmetic, so the later casts are exact. It also feeds the RoPE dot fp32 operands (``ieee`` precision).
On a GPU the default is off: native ``cvt`` casts (round-to-nearest-even, saturating) and a BF16
``tl.dot``. Both paths compute the same numbers in exact arithmetic.
``benchmarks/snapmla/gpu_check_snapmla_triton.py`` compares them on a GPU.

Only numerics were checked, under the interpreter on CPU. The kernel also compiles for sm_90 ahead of time
(``benchmarks/snapmla/snapmla_triton_sm90_compile.py``). It has never run on a GPU, so there is no GPU timing.
"""

from __future__ import annotations

import math

import torch

from neurips26.methods.snapmla.cache_format import EncodedLatent
from neurips26.methods.snapmla.core import E4M3_MAX
from neurips26.methods.snapmla.pipeline import SNAPMLA, DecodeRecipe, prepare_query

try:  # triton is optional (GPU extra); the module imports without it and says so when called
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised when triton is absent
    triton = None
    tl = None

__all__ = [
    "BLOCK_N",
    "TRITON_AVAILABLE",
    "causal_decode_mask",
    "grid_roundings_triton",
    "interpreter_active",
    "merge_splits_torch",
    "merge_splits_triton",
    "snapmla_decode_triton",
]

TRITON_AVAILABLE = triton is not None
BLOCK_N = 64  # KV tokens per loop step = the P quantization block (paper: 64)
_TINY_AMAX = 1e-12  # same rule as core.amax_scales: an all-zero row gets scale 1


def interpreter_active() -> bool:
    """True when this module's kernel was built in Triton's interpreter mode (``TRITON_INTERPRET=1``)."""
    if not TRITON_AVAILABLE:
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(_snapmla_decode_kernel, InterpretedFunction)


if TRITON_AVAILABLE:
    _E4M3_MAX = tl.constexpr(E4M3_MAX)
    _TINY = tl.constexpr(_TINY_AMAX)

    @triton.jit
    def _round_to_bf16(x):
        """Round fp32 to the nearest BF16 value, ties to even (integer arithmetic on the bits)."""
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        return bits.to(tl.float32, bitcast=True)

    @triton.jit
    def _round_to_e4m3(x):
        """Round fp32 in [-448, 448] to the nearest E4M3 value, ties to even.

        ulp = 2^(e - 3) for a normal binade 2^e (3 mantissa bits), 2^-9 below 2^-6 (subnormals).
        Multiplying by powers of two is exact, so only the floor/tie step rounds.
        """
        magnitude = tl.abs(x)
        exponent = ((magnitude.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
        ulp_exponent = tl.maximum(exponent, -6) - 3
        ulp = ((ulp_exponent + 127) << 23).to(tl.float32, bitcast=True)
        inverse_ulp = ((127 - ulp_exponent) << 23).to(tl.float32, bitcast=True)
        units = magnitude * inverse_ulp
        floor = tl.floor(units)
        fraction = units - floor
        odd = (floor * 0.5) != tl.floor(floor * 0.5)
        round_up = (fraction > 0.5) | ((fraction == 0.5) & odd)
        rounded = (floor + round_up.to(tl.float32)) * ulp
        return tl.where(x < 0, -rounded, rounded)

    @triton.jit
    def _snapmla_decode_kernel(
        Q,  # (B, R, D_C) FP8 codes of q~ (or BF16/fp32 for a BF16 recipe)
        QR,  # (B, R, D_R) BF16 aligned q_R
        SQ,  # (B, R) fp32 query scales
        C,  # (B, T, D_C) FP8 codes of c_KV (strided; may be a view of packed rows)
        KR,  # (B, T, D_R) BF16 raw k_R
        S,  # (B, T) fp32 per-token scales
        O,  # (B, NSPLIT, R, D_C) fp32 split outputs, normalised by their own l
        LSE,  # (B, NSPLIT, R) fp32 split log-sum-exp
        stride_qb,
        stride_qr,
        stride_qrb,
        stride_qrr,
        stride_sqb,
        stride_cb,
        stride_ct,
        stride_kb,
        stride_kt,
        stride_sb,
        stride_st,
        stride_ob,
        stride_os,
        stride_or,
        stride_lb,
        stride_ls,
        n_rows,
        n_tokens,
        n_query,
        blocks_per_split,
        scaling,
        D_C: tl.constexpr,
        D_R: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_N: tl.constexpr,
        FP8_P: tl.constexpr,
        ALIGN_ROPE: tl.constexpr,
        EMULATED_CASTS: tl.constexpr,
    ):
        batch = tl.program_id(0)
        row_block = tl.program_id(1)
        split = tl.program_id(2)
        rows = row_block * BLOCK_R + tl.arange(0, BLOCK_R)
        row_ok = rows < n_rows
        dc = tl.arange(0, D_C)
        dr = tl.arange(0, D_R)
        q = tl.load(
            Q + batch * stride_qb + rows[:, None] * stride_qr + dc[None, :], mask=row_ok[:, None], other=0.0
        )
        q_rope = tl.load(
            QR + batch * stride_qrb + rows[:, None] * stride_qrr + dr[None, :],
            mask=row_ok[:, None],
            other=0.0,
        )
        if EMULATED_CASTS:  # the interpreter's tl.dot misreads BF16; fp32 holds FP8/BF16 values exactly
            q = q.to(tl.float32)
            q_rope = q_rope.to(tl.float32)
        s_q = tl.load(SQ + batch * stride_sqb + rows, mask=row_ok, other=1.0)
        # causal decode: new token i of n_query sees cached tokens t <= n_tokens - n_query + i
        last_visible = n_tokens - n_query + rows % n_query

        running_max = tl.full([BLOCK_R], float("-inf"), tl.float32)
        denominator = tl.zeros([BLOCK_R], tl.float32)
        output = tl.zeros([BLOCK_R, D_C], tl.float32)
        first = split * blocks_per_split
        for block in range(first, first + blocks_per_split):
            tokens = block * BLOCK_N + tl.arange(0, BLOCK_N)
            token_ok = tokens < n_tokens
            c = tl.load(
                C + batch * stride_cb + tokens[:, None] * stride_ct + dc[None, :],
                mask=token_ok[:, None],
                other=0.0,
            )
            s_t = tl.load(S + batch * stride_sb + tokens * stride_st, mask=token_ok, other=1.0)
            k_rope = tl.load(
                KR + batch * stride_kb + tokens[:, None] * stride_kt + dr[None, :],
                mask=token_ok[:, None],
                other=0.0,
            ).to(tl.float32)
            if ALIGN_ROPE:  # pre-scaled domain alignment: k_R / s_t in BF16
                k_rope = tl.math.div_rn(k_rope, s_t[:, None])
            if EMULATED_CASTS:
                c = c.to(tl.float32)
                k_rope = _round_to_bf16(k_rope)
                logits_acc = tl.dot(q, tl.trans(c), out_dtype=tl.float32, input_precision="ieee")
                logits_acc = tl.dot(q_rope, tl.trans(k_rope), logits_acc, input_precision="ieee")
            else:
                logits_acc = tl.dot(q, tl.trans(c), out_dtype=tl.float32)
                logits_acc = tl.dot(q_rope, tl.trans(k_rope.to(tl.bfloat16)), logits_acc)
            # one post-GEMM rescale for content and RoPE parts (same order as the reference)
            logits = logits_acc * s_q[:, None] * s_t[None, :] * scaling
            visible = token_ok[None, :] & (tokens[None, :] <= last_visible[:, None])
            logits = tl.where(visible, logits, float("-inf"))

            new_max = tl.maximum(running_max, tl.max(logits, axis=1))
            safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
            correction = tl.exp(running_max - safe_max)
            probs = tl.exp(logits - safe_max[:, None])
            denominator = denominator * correction + tl.sum(probs, axis=1)
            probs_scaled = probs * s_t[None, :]  # V's per-token scales fused into P
            if FP8_P:  # block-wise dynamic FP8 P: s_P = amax_row(P') / 448
                amax = tl.max(probs_scaled, axis=1)
                amax = tl.where(amax > _TINY, amax, 1.0)
                p_scale = tl.math.div_rn(amax, _E4M3_MAX)
                p_units = tl.minimum(tl.math.div_rn(probs_scaled, p_scale[:, None]), _E4M3_MAX)
                if EMULATED_CASTS:
                    block_out = tl.dot(
                        _round_to_e4m3(p_units), c, out_dtype=tl.float32, input_precision="ieee"
                    )
                else:
                    block_out = tl.dot(p_units.to(tl.float8e4nv), c, out_dtype=tl.float32)
                output = output * correction[:, None] + block_out * p_scale[:, None]
            else:  # BF16 P against a BF16 (or fp32) latent
                if EMULATED_CASTS:
                    block_out = tl.dot(
                        _round_to_bf16(probs_scaled), c, out_dtype=tl.float32, input_precision="ieee"
                    )
                else:
                    block_out = tl.dot(probs_scaled.to(tl.bfloat16), c.to(tl.bfloat16), out_dtype=tl.float32)
                output = output * correction[:, None] + block_out
            running_max = new_max

        has_mass = denominator > 0
        normalised = output / tl.where(has_mass, denominator, 1.0)[:, None]
        lse = tl.where(has_mass, running_max + tl.log(tl.where(has_mass, denominator, 1.0)), float("-inf"))
        out_ptr = O + batch * stride_ob + split * stride_os + rows[:, None] * stride_or + dc[None, :]
        tl.store(out_ptr, normalised, mask=row_ok[:, None])
        tl.store(LSE + batch * stride_lb + split * stride_ls + rows, lse, mask=row_ok)

    @triton.jit
    def _merge_splits_kernel(
        O,  # (B, NSPLIT, R, D_C) split outputs, each normalised by its own l
        LSE,  # (B, NSPLIT, R) split log-sum-exp (-inf: no visible token)
        OUT,  # (B, R, D_C)
        stride_ob,
        stride_os,
        stride_or,
        stride_lb,
        stride_ls,
        stride_outb,
        stride_outr,
        num_splits,
        D_C: tl.constexpr,
        SPLITS: tl.constexpr,  # num_splits rounded up to a power of two
    ):
        """Flash-decoding merge: o = sum_s e^(lse_s - M) o_s / sum_s e^(lse_s - M), one program per row."""
        batch = tl.program_id(0)
        row = tl.program_id(1)
        splits = tl.arange(0, SPLITS)
        lse = tl.load(
            LSE + batch * stride_lb + splits * stride_ls + row, mask=splits < num_splits, other=float("-inf")
        )
        top = tl.max(lse, axis=0)
        top = tl.where(top == float("-inf"), 0.0, top)
        total = tl.sum(tl.exp(lse - top), axis=0)
        dc = tl.arange(0, D_C)
        merged = tl.zeros([D_C], tl.float32)
        for split in range(0, num_splits):
            weight = tl.exp(tl.load(LSE + batch * stride_lb + split * stride_ls + row) - top)
            merged += weight * tl.load(O + batch * stride_ob + split * stride_os + row * stride_or + dc)
        merged = merged / tl.where(total > 0, total, 1.0)
        tl.store(OUT + batch * stride_outb + row * stride_outr + dc, merged)

    @triton.jit
    def _grid_rounding_kernel(X, E4M3, BF16, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        x = tl.load(X + offsets, mask=inside, other=0.0)
        tl.store(E4M3 + offsets, _round_to_e4m3(x), mask=inside)
        tl.store(BF16 + offsets, _round_to_bf16(x), mask=inside)

else:  # pragma: no cover
    _snapmla_decode_kernel = None
    _merge_splits_kernel = None
    _grid_rounding_kernel = None


def grid_roundings_triton(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's integer-arithmetic roundings of fp32 ``x`` to the E4M3 and BF16 grids (as fp32).

    For checking them against torch's casts (``x.to(torch.float8_e4m3fn)``, ``x.to(torch.bfloat16)``);
    E4M3 inputs must lie in [-448, 448] (the kernel clamps before rounding).
    """
    if not TRITON_AVAILABLE:
        raise ImportError("grid_roundings_triton needs triton: pip install 'triton>=3.4'")
    if x.dtype != torch.float32:
        raise TypeError(f"x must be float32, got {x.dtype}")
    flat = x.contiguous().reshape(-1)
    e4m3, bf16 = torch.empty_like(flat), torch.empty_like(flat)
    block = 1024
    _grid_rounding_kernel[(triton.cdiv(flat.numel(), block),)](flat, e4m3, bf16, flat.numel(), BLOCK=block)
    return e4m3.reshape(x.shape), bf16.reshape(x.shape)


def _check_inputs(
    q_content: torch.Tensor, q_rope: torch.Tensor, encoded: EncodedLatent, recipe: DecodeRecipe
):
    if not TRITON_AVAILABLE:
        raise ImportError("snapmla_decode_triton needs triton: pip install 'triton>=3.4'")
    snapmla = (recipe.kv_format, recipe.query_format, recipe.p_mode) == (
        "fp8_token",
        "fp8_row_content",
        "fp8_block",
    )
    bf16 = (recipe.kv_format, recipe.query_format, recipe.p_mode) == ("bf16", "bf16", "bf16")
    if not (snapmla or bf16):
        raise ValueError(
            f"recipe {recipe.name!r} is not supported by the Triton kernel; it runs SnapMLA "
            "(fp8_token / fp8_row_content / fp8_block) and BF16 (bf16 / bf16 / bf16)"
        )
    if recipe.block_size != BLOCK_N or recipe.scale_mode != "float" or not recipe.fp8_enabled:
        raise ValueError(
            f"the Triton kernel supports block_size={BLOCK_N}, scale_mode='float', fp8_enabled=True; got "
            f"block_size={recipe.block_size}, scale_mode={recipe.scale_mode!r}, "
            f"fp8_enabled={recipe.fp8_enabled}"
        )
    if encoded.format != recipe.kv_format:
        raise ValueError(f"cache format {encoded.format!r} does not match recipe {recipe.kv_format!r}")
    if q_content.ndim != 4 or q_rope.ndim != 4 or q_content.shape[:3] != q_rope.shape[:3]:
        raise ValueError(
            f"q_content and q_rope must be (B, H, Tq, d) with equal B, H, Tq; got {tuple(q_content.shape)} "
            f"and {tuple(q_rope.shape)}"
        )
    d_c, d_r = encoded.content.shape[-1], encoded.rope.shape[-1]
    if (
        q_content.shape[-1] != d_c
        or q_rope.shape[-1] != d_r
        or q_content.shape[0] != encoded.content.shape[0]
    ):
        raise ValueError(
            f"query dims (batch {q_content.shape[0]}, content {q_content.shape[-1]}, "
            f"rope {q_rope.shape[-1]}) do not match the cache layout "
            f"(batch {encoded.content.shape[0]}, content {d_c}, rope {d_r})"
        )
    for name, dim in (("kv_lora_rank", d_c), ("qk_rope_head_dim", d_r)):
        if dim < 16 or dim & (dim - 1):
            raise ValueError(
                f"{name}={dim} is not supported by the Triton kernel; it needs a power of two >= 16"
            )
    if q_content.shape[2] > encoded.num_tokens:
        raise ValueError(
            f"{q_content.shape[2]} new query tokens but only {encoded.num_tokens} cached tokens; the cache "
            "must already hold the new tokens (causal decode)"
        )
    devices = {q_content.device.type, encoded.content.device.type}
    if devices != {"cuda"} and not (devices == {"cpu"} and interpreter_active()):
        raise RuntimeError(
            f"the Triton kernel needs CUDA tensors, or CPU tensors with TRITON_INTERPRET=1 set before "
            f"neurips26.methods.snapmla.triton_kernel is imported; got devices {sorted(devices)}"
        )


def merge_splits_triton(outputs: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """The split merge as a Triton kernel (one launch): (B, S, R, d) outputs, (B, S, R) lse -> (B, R, d)."""
    if outputs.shape[1] == 1:
        return outputs[:, 0]
    batch, n_splits, n_rows, d_c = outputs.shape
    merged = torch.empty(batch, n_rows, d_c, device=outputs.device, dtype=torch.float32)
    _merge_splits_kernel[(batch, n_rows)](
        outputs, lse, merged,
        outputs.stride(0), outputs.stride(1), outputs.stride(2), lse.stride(0), lse.stride(1),
        merged.stride(0), merged.stride(1), n_splits,
        D_C=d_c, SPLITS=triton.next_power_of_2(n_splits),
    )  # fmt: skip
    return merged


def merge_splits_torch(outputs: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Flash-decoding merge in PyTorch (the oracle of :func:`merge_splits_triton`):
    o = sum_s e^(lse_s - M) o_s / sum_s e^(lse_s - M); (B, S, R, d) -> (B, R, d)."""
    if outputs.shape[1] == 1:
        return outputs[:, 0]
    top = lse.amax(dim=1, keepdim=True)
    weights = torch.exp(lse - torch.where(torch.isfinite(top), top, torch.zeros_like(top)))
    total = weights.sum(dim=1)
    merged = (weights.unsqueeze(-1) * outputs).sum(dim=1)
    return merged / torch.where(total > 0, total, torch.ones_like(total)).unsqueeze(-1)


def snapmla_decode_triton(
    q_content: torch.Tensor,
    q_rope: torch.Tensor,
    encoded: EncodedLatent,
    scaling: float,
    *,
    recipe: DecodeRecipe = SNAPMLA,
    num_splits: int = 1,
    block_rows: int | None = None,
    emulated_casts: bool | None = None,
    num_warps: int = 4,
) -> torch.Tensor:
    """SnapMLA decode attention with the Triton kernel; returns o_latent (B, H, Tq, d_c) in fp32.

    The same math as ``decode_latent_attention(recipe, q_content, q_rope, encoded, scaling, causal_mask)``.
    The causal mask is built in: new token i of Tq sees the cached tokens up to position T - Tq + i.

    Parameters
    ----------
    q_content: absorbed query q~ (B, H, Tq, d_c); quantized here per row (Fused-Q-Quant).
    q_rope: RoPE query (B, H, Tq, d_r).
    encoded: the layer's cache, ``fp8_token`` for SnapMLA (``bf16`` for the BF16 recipe). Strided views
        work, e.g. :func:`unpack_snapmla_rows` of packed 644-byte rows.
    scaling: softmax scale (1/sqrt(d_nope + d_r) in DeepSeek-V3).
    recipe: ``SNAPMLA`` (default) or ``RECIPES["bf16"]``.
    num_splits: KV splits run in parallel and merged by log-sum-exp (ours: 1 on CPU; more on long caches).
    block_rows: query rows (heads x Tq) per program; a power of two >= 16 (``tl.dot``'s minimum). None:
        64 on CUDA when there are >= 64 rows (compiled for sm_90, only 64-row tiles become FP8 WGMMA;
        16 and 32 become ``mma.sync`` on f16; see
        ``benchmarks/snapmla/snapmla_triton_sm90_compile.py``), else 16.
    emulated_casts: round with integer arithmetic instead of native casts (None: on iff interpreter).
    num_warps: Triton launch option (GPU only).
    """
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1:
        raise ValueError(f"num_splits must be a positive integer, got {num_splits!r}")
    if block_rows is None:
        rows = q_content.shape[1] * q_content.shape[2] if q_content.ndim == 4 else 0
        block_rows = 64 if q_content.is_cuda and rows >= 64 else 16
    if (
        isinstance(block_rows, bool)
        or not isinstance(block_rows, int)
        or block_rows < 16
        or block_rows & (block_rows - 1)
    ):
        raise ValueError(f"block_rows={block_rows} is not allowed; choose a power of two >= 16")
    _check_inputs(q_content, q_rope, encoded, recipe)
    if emulated_casts is None:
        emulated_casts = interpreter_active()
    batch, heads, n_query, d_c = q_content.shape
    d_r = q_rope.shape[-1]
    n_rows, n_tokens = heads * n_query, encoded.num_tokens
    device = q_content.device
    fp8 = recipe.p_mode == "fp8_block"

    query = prepare_query(recipe, q_content, q_rope)  # Fused-Q-Quant (same code as the reference)
    q_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    q_codes = query.content.to(q_dtype).reshape(batch, n_rows, d_c).contiguous()
    q_rope_aligned = query.rope.to(torch.bfloat16).reshape(batch, n_rows, d_r).contiguous()
    q_scale = query.scale.float().reshape(batch, n_rows).contiguous()
    content, rope = encoded.content, encoded.rope.to(torch.bfloat16)
    scale = torch.ones(batch, n_tokens, device=device) if encoded.scale is None else encoded.scale.float()
    if content.stride(-1) != 1 or rope.stride(-1) != 1:
        content, rope = content.contiguous(), rope.contiguous()

    n_blocks = max(1, math.ceil(n_tokens / BLOCK_N))
    num_splits = min(num_splits, n_blocks)
    blocks_per_split = math.ceil(n_blocks / num_splits)
    num_splits = math.ceil(n_blocks / blocks_per_split)
    outputs = torch.empty(batch, num_splits, n_rows, d_c, device=device, dtype=torch.float32)
    lse = torch.empty(batch, num_splits, n_rows, device=device, dtype=torch.float32)
    grid = (batch, triton.cdiv(n_rows, block_rows), num_splits)
    launch = {} if interpreter_active() else {"num_warps": num_warps}
    _snapmla_decode_kernel[grid](
        q_codes,
        q_rope_aligned,
        q_scale,
        content,
        rope,
        scale,
        outputs,
        lse,
        q_codes.stride(0),
        q_codes.stride(1),
        q_rope_aligned.stride(0),
        q_rope_aligned.stride(1),
        q_scale.stride(0),
        content.stride(0),
        content.stride(1),
        rope.stride(0),
        rope.stride(1),
        scale.stride(0),
        scale.stride(1),
        outputs.stride(0),
        outputs.stride(1),
        outputs.stride(2),
        lse.stride(0),
        lse.stride(1),
        n_rows,
        n_tokens,
        n_query,
        blocks_per_split,
        float(scaling),
        D_C=d_c,
        D_R=d_r,
        BLOCK_R=block_rows,
        BLOCK_N=BLOCK_N,
        FP8_P=fp8,
        ALIGN_ROPE=fp8,
        EMULATED_CASTS=bool(emulated_casts),
        **launch,
    )
    merged = merge_splits_triton(outputs, lse)
    return merged.reshape(batch, heads, n_query, d_c)


def causal_decode_mask(n_query: int, n_tokens: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The additive mask the kernel builds in, for the reference: (Tq, T) with -inf where t > T - Tq + i."""
    positions = torch.arange(n_tokens, device=device)[None, :]
    last = n_tokens - n_query + torch.arange(n_query, device=device)[:, None]
    return torch.zeros(n_query, n_tokens, device=device).masked_fill(positions > last, float("-inf"))
