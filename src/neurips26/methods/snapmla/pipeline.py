"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — decode recipes.

A :class:`DecodeRecipe` names a cache format and how the decode kernel treats the query and P. SnapMLA's
recipe (``SNAPMLA``) is per-token FP8 c_KV with BF16 k_R, per-row FP8 q~ with its RoPE part aligned into
the quantization domain, and block-64 dynamic FP8 P with the V scales fused. The baselines live in
``baselines.py``; :func:`decode_latent_attention` runs any recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from neurips26.methods.snapmla.cache_format import FORMATS, EncodedLatent, encode_latent, key_operands
from neurips26.methods.snapmla.core import (
    E4M3_MAX,
    PMode,
    QueryOperands,
    ScaleMode,
    align_rope_to_quant_domain,
    amax_scales,
    bf16_round,
    online_latent_attention,
    quantize_e4m3,
)

__all__ = ["QUERY_FORMATS", "SNAPMLA", "DecodeRecipe", "decode_latent_attention", "prepare_query"]

QUERY_FORMATS = ("fp32", "bf16", "fp8_tensor_joint", "fp8_row_joint", "fp8_row_content")
P_MODES = ("exact", "bf16", "fp8_block", "fp8_static")


@dataclass(frozen=True)
class DecodeRecipe:
    """How one variant stores the latent cache and computes the decode attention.

    Parameters
    ----------
    name: the variant's name.
    kv_format: a cache format of ``cache_format.FORMATS``.
    query_format: ``fp32``/``bf16`` (no scale), ``fp8_row_content`` (SnapMLA: FP8 q~ per query row, BF16
        q_R aligned), ``fp8_row_joint`` (one FP8 scale per row over [q~; q_R]), ``fp8_tensor_joint``.
    p_mode: the PV GEMM's P operand (see :func:`online_latent_attention`).
    block_size: KV block of the online softmax and of P's dynamic scales (paper: 64).
    n_tiles: scale tiles per token of the ``fp8_tile`` format (FlashMLA: 512/128 = 4).
    scale_mode: ``float`` (fp32 amax/448) or ``pow2`` scales.
    fp8_enabled: False makes every FP8 cast the identity (scales still applied): the degenerate pipeline.
    """

    name: str
    kv_format: str
    query_format: str
    p_mode: PMode
    block_size: int = 64
    n_tiles: int = 4
    scale_mode: ScaleMode = "float"
    fp8_enabled: bool = True

    def __post_init__(self) -> None:
        if self.kv_format not in FORMATS:
            raise ValueError(f"kv_format={self.kv_format!r} is not allowed; choose one of {list(FORMATS)}")
        if self.query_format not in QUERY_FORMATS:
            raise ValueError(
                f"query_format={self.query_format!r} is not allowed; choose one of {list(QUERY_FORMATS)}"
            )
        if self.p_mode not in P_MODES:
            raise ValueError(f"p_mode={self.p_mode!r} is not allowed; choose one of {list(P_MODES)}")
        if isinstance(self.block_size, bool) or not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive integer, got {self.block_size!r}")
        if isinstance(self.n_tiles, bool) or not isinstance(self.n_tiles, int) or self.n_tiles < 1:
            raise ValueError(f"n_tiles must be a positive integer, got {self.n_tiles!r}")
        if self.scale_mode not in ("float", "pow2"):
            raise ValueError(f"scale_mode={self.scale_mode!r} is not allowed; choose 'float' or 'pow2'")

    def with_options(self, **changes: object) -> DecodeRecipe:
        """A copy with some fields changed (e.g. ``fp8_enabled=False``)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def encode(
        self, content: torch.Tensor, rope: torch.Tensor, static_scale: torch.Tensor | None = None
    ) -> EncodedLatent:
        """Store (c, k_R) in this recipe's cache format."""
        return encode_latent(
            content,
            rope,
            self.kv_format,
            n_tiles=self.n_tiles,
            scale_mode=self.scale_mode,
            static_scale=static_scale,
            fp8_enabled=self.fp8_enabled,
        )


SNAPMLA = DecodeRecipe("snapmla", "fp8_token", "fp8_row_content", "fp8_block")


def prepare_query(recipe: DecodeRecipe, q_content: torch.Tensor, q_rope: torch.Tensor) -> QueryOperands:
    """Fused-Q-Quant: the query operands of ``recipe`` from q~ (B, H, Tq, d_c) and q_R (B, H, Tq, d_r)."""
    q_content, q_rope = q_content.float(), q_rope.float()
    ones = torch.ones(q_content.shape[:-1], device=q_content.device)
    fmt, enabled = recipe.query_format, recipe.fp8_enabled
    if fmt == "fp32":
        return QueryOperands(q_content, q_rope, ones)
    if fmt == "bf16":
        return QueryOperands(bf16_round(q_content), bf16_round(q_rope), ones)
    if fmt == "fp8_row_content":
        scale = amax_scales(q_content.abs().amax(dim=-1), recipe.scale_mode)
        codes, _ = quantize_e4m3(q_content, scale.unsqueeze(-1), enabled=enabled)
        return QueryOperands(codes, align_rope_to_quant_domain(q_rope, scale), scale)
    joint = torch.cat([q_content, q_rope], dim=-1)
    if fmt == "fp8_row_joint":
        scale = amax_scales(joint.abs().amax(dim=-1), recipe.scale_mode)
    else:  # fp8_tensor_joint
        scale = amax_scales(joint.abs().amax(), recipe.scale_mode).expand(q_content.shape[:-1])
    codes, _ = quantize_e4m3(joint, scale.unsqueeze(-1), enabled=enabled)
    d_c = q_content.shape[-1]
    return QueryOperands(codes[..., :d_c], codes[..., d_c:], scale)


def decode_latent_attention(
    recipe: DecodeRecipe,
    q_content: torch.Tensor,
    q_rope: torch.Tensor,
    encoded: EncodedLatent,
    scaling: float,
    mask: torch.Tensor | None = None,
    *,
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA decode of ``recipe`` over an encoded latent cache; returns o_latent (B, H, Tq, d_c).

    ``fp8_static`` P (naive FP8) uses ``s_P = max_t s_t / 448``: P <= 1, so ``P s_t / s_P <= 448`` and
    the FP8 P of a per-tensor V scale is FlashAttention-3's ``P * 448``.
    """
    if encoded.format != recipe.kv_format:
        raise ValueError(f"cache format {encoded.format!r} does not match recipe {recipe.kv_format!r}")
    keys = key_operands(encoded)
    query = prepare_query(recipe, q_content, q_rope)
    static_p_scale = float(keys.scale.max()) / E4M3_MAX if recipe.p_mode == "fp8_static" else None
    return online_latent_attention(
        query,
        keys,
        scaling,
        mask,
        block_size=recipe.block_size,
        p_mode=recipe.p_mode,
        static_p_scale=static_p_scale,
        scale_mode=recipe.scale_mode,
        fp8_enabled=recipe.fp8_enabled,
        return_logits=return_logits,
    )
