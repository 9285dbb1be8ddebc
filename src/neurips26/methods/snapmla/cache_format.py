"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — cache formats.

A latent-cache entry is one token's content latent c (d_c) and RoPE key k_R (d_r). The formats compared:

=====================  ===============================================  ================  ==================
format                 content                                          RoPE              bytes/token/layer
=====================  ===============================================  ================  ==================
``fp32``               float32 (the full-precision reference)           float32           4 d_c + 4 d_r
``bf16``               BF16                                             BF16              2 d_c + 2 d_r
``fp8_tensor_joint``   FP8, one static scale per tensor over [c; k_R]   FP8, same scale   d_c + d_r
``fp8_token_joint``    FP8, one scale per token over [c; k_R]           FP8, same scale   d_c + d_r + 4
``fp8_tile``           FP8, n fp32 scales per token (FlashMLA)          BF16              d_c + 4 n + 2 d_r
``fp8_token``          FP8, one fp32 scale per token (SnapMLA)          BF16              d_c + 4 + 2 d_r
=====================  ===============================================  ================  ==================

For DeepSeek-V3 (d_c 512, d_r 64): 1152, 576, 580, 656 and 644 bytes. The packed rows are byte-exact:
SnapMLA ``[d_c FP8][fp32 scale][d_r BF16]`` and FlashMLA's documented "FP8 with scale" layout
``[512 FP8][4 fp32 scales, one per 128 values][64 BF16]``, in native (little-endian) byte order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neurips26.methods.snapmla.core import (
    E4M3_MAX,
    KeyOperands,
    ScaleMode,
    align_rope_to_quant_domain,
    amax_scales,
    quantize_e4m3,
)

__all__ = [
    "FORMATS",
    "EncodedLatent",
    "bytes_per_token",
    "concat_encoded",
    "decode_latent",
    "encode_latent",
    "flashmla_to_snapmla",
    "key_operands",
    "pack_flashmla_rows",
    "pack_snapmla_rows",
    "snapmla_to_flashmla",
    "unpack_flashmla_rows",
    "unpack_snapmla_rows",
]

FORMATS = ("fp32", "bf16", "fp8_tensor_joint", "fp8_token_joint", "fp8_tile", "fp8_token")
_FP32_BYTES = 4
_BF16_BYTES = 2


@dataclass
class EncodedLatent:
    """One layer's latent cache in a given format.

    ``content`` (B, T, d_c): FP8 codes (``float8_e4m3fn``) or BF16 values; ``rope`` (B, T, d_r): FP8 codes
    for the joint formats, BF16 otherwise; ``scale``: (B, T) per token, (B, T, n_tiles) per tile, a 0-d
    tensor per tensor, None for BF16; ``overflow``: values clamped at +-448 while encoding.
    """

    format: str
    content: torch.Tensor
    rope: torch.Tensor
    scale: torch.Tensor | None
    overflow: int = 0

    @property
    def num_tokens(self) -> int:
        return int(self.content.shape[1])


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"format={fmt!r} is not allowed; choose one of {list(FORMATS)}")


def bytes_per_token(fmt: str, kv_lora_rank: int, qk_rope_head_dim: int, n_tiles: int = 4) -> int:
    """Cache bytes per token and layer (the per-tensor scale of ``fp8_tensor_joint`` is per layer, not
    per token, and is left out)."""
    _check_format(fmt)
    d_c, d_r = kv_lora_rank, qk_rope_head_dim
    return {
        "fp32": _FP32_BYTES * (d_c + d_r),
        "bf16": _BF16_BYTES * (d_c + d_r),
        "fp8_tensor_joint": d_c + d_r,
        "fp8_token_joint": d_c + d_r + _FP32_BYTES,
        "fp8_tile": d_c + _FP32_BYTES * n_tiles + _BF16_BYTES * d_r,
        "fp8_token": d_c + _FP32_BYTES + _BF16_BYTES * d_r,
    }[fmt]


def _tile_view(content: torch.Tensor, n_tiles: int) -> torch.Tensor:
    d_c = content.shape[-1]
    if n_tiles < 1 or d_c % n_tiles:
        raise ValueError(f"n_tiles={n_tiles} must divide kv_lora_rank={d_c}")
    return content.reshape(*content.shape[:-1], n_tiles, d_c // n_tiles)


def encode_latent(
    content: torch.Tensor,
    rope: torch.Tensor,
    fmt: str,
    *,
    n_tiles: int = 4,
    scale_mode: ScaleMode = "float",
    static_scale: torch.Tensor | None = None,
    fp8_enabled: bool = True,
) -> EncodedLatent:
    """Quantize (c, k_R) of shape (B, T, d_c), (B, T, d_r) into ``fmt``.

    ``fp8_token`` (SnapMLA, RoPE-aware per-token): ``s_t = amax_j |c_t,j| / 448``, ``c8_t = e4m3(c_t/s_t)``,
    k_R kept in BF16. ``fp8_tensor_joint`` uses ``static_scale`` when given (a calibrated scale held fixed
    while decoding appends tokens; larger values are clamped and counted) else the amax of this call.
    """
    _check_format(fmt)
    if content.ndim != 3 or rope.ndim != 3 or content.shape[:2] != rope.shape[:2]:
        raise ValueError(
            f"content and rope must be (B, T, d) with the same B and T, got {tuple(content.shape)} "
            f"and {tuple(rope.shape)}"
        )
    content, rope = content.float(), rope.float()
    if fmt == "fp32":
        return EncodedLatent(fmt, content, rope, None)
    if fmt == "bf16":
        return EncodedLatent(fmt, content.to(torch.bfloat16), rope.to(torch.bfloat16), None)
    if fmt == "fp8_token":
        scale = amax_scales(content.abs().amax(dim=-1), scale_mode)
        codes, overflow = quantize_e4m3(content, scale.unsqueeze(-1), enabled=fp8_enabled)
        return EncodedLatent(fmt, _store_fp8(codes, fp8_enabled), rope.to(torch.bfloat16), scale, overflow)
    if fmt == "fp8_tile":
        tiles = _tile_view(content, n_tiles)
        scale = amax_scales(tiles.abs().amax(dim=-1), scale_mode)  # (B, T, n_tiles)
        codes, overflow = quantize_e4m3(tiles, scale.unsqueeze(-1), enabled=fp8_enabled)
        codes = codes.reshape(content.shape)
        return EncodedLatent(fmt, _store_fp8(codes, fp8_enabled), rope.to(torch.bfloat16), scale, overflow)
    joint = torch.cat([content, rope], dim=-1)
    if fmt == "fp8_token_joint":
        scale = amax_scales(joint.abs().amax(dim=-1), scale_mode)
        codes, overflow = quantize_e4m3(joint, scale.unsqueeze(-1), enabled=fp8_enabled)
    else:  # fp8_tensor_joint
        scale = static_scale if static_scale is not None else amax_scales(joint.abs().amax(), scale_mode)
        codes, overflow = quantize_e4m3(joint, scale, enabled=fp8_enabled)
    codes = _store_fp8(codes, fp8_enabled)
    d_c = content.shape[-1]
    return EncodedLatent(fmt, codes[..., :d_c], codes[..., d_c:], scale, overflow)


def _store_fp8(codes: torch.Tensor, fp8_enabled: bool) -> torch.Tensor:
    return codes.to(torch.float8_e4m3fn) if fp8_enabled else codes


def decode_latent(encoded: EncodedLatent) -> tuple[torch.Tensor, torch.Tensor]:
    """Dequantize back to float32 (c, k_R)."""
    content, rope = encoded.content.float(), encoded.rope.float()
    fmt, scale = encoded.format, encoded.scale
    if fmt in ("fp32", "bf16"):
        return content, rope
    assert scale is not None
    if fmt == "fp8_token":
        return content * scale.unsqueeze(-1), rope
    if fmt == "fp8_tile":
        n_tiles = scale.shape[-1]
        return (_tile_view(content, n_tiles) * scale.unsqueeze(-1)).reshape(content.shape), rope
    if fmt == "fp8_token_joint":
        return content * scale.unsqueeze(-1), rope * scale.unsqueeze(-1)
    return content * scale, rope * scale


def concat_encoded(first: EncodedLatent, second: EncodedLatent) -> EncodedLatent:
    """Append ``second``'s tokens after ``first``'s (same format; per-tensor scales must be equal)."""
    if first.format != second.format:
        raise ValueError(f"cannot append format {second.format!r} to {first.format!r}")
    if first.scale is None or first.scale.ndim == 0:
        scale = first.scale
    else:
        assert second.scale is not None
        scale = torch.cat([first.scale, second.scale], dim=1)
    return EncodedLatent(
        first.format,
        torch.cat([first.content, second.content], dim=1),
        torch.cat([first.rope, second.rope], dim=1),
        scale,
        first.overflow + second.overflow,
    )


def key_operands(encoded: EncodedLatent, *, align_rope: bool = True) -> KeyOperands:
    """What the decode kernel reads: stored values plus scales, RoPE in the content's scale domain.

    FP8 formats with a per-token scale keep the codes and the scale (the kernel rescales after the GEMM).
    SnapMLA's BF16 k_R is pre-scaled into that domain (``k_R / s_t``, rounded to BF16) when ``align_rope``.
    The FlashMLA format dequantizes to BF16 (its kernel computes in BF16), so its scale is 1.
    """
    content, rope = encoded.content.float(), encoded.rope.float()
    batch, tokens = content.shape[:2]
    ones = torch.ones(batch, tokens, device=content.device)
    fmt, scale = encoded.format, encoded.scale
    if fmt in ("fp32", "bf16"):
        return KeyOperands(content, rope, ones)
    assert scale is not None
    if fmt == "fp8_tile":
        dequantized, _ = decode_latent(encoded)
        return KeyOperands(dequantized.to(torch.bfloat16).float(), rope, ones)
    if fmt == "fp8_token":
        aligned = align_rope_to_quant_domain(rope, scale) if align_rope else rope
        return KeyOperands(content, aligned, scale.float())
    if fmt == "fp8_token_joint":
        return KeyOperands(content, rope, scale.float())
    return KeyOperands(content, rope, scale.float().expand(batch, tokens))


# ---- packed rows -------------------------------------------------------------------------------------


def pack_snapmla_rows(encoded: EncodedLatent) -> torch.Tensor:
    """Pack an ``fp8_token`` cache into uint8 rows ``[d_c FP8 | fp32 scale | d_r BF16]`` (B, T, bytes)."""
    if encoded.format != "fp8_token" or encoded.content.dtype != torch.float8_e4m3fn:
        raise ValueError(f"pack_snapmla_rows needs an FP8 'fp8_token' cache, got {encoded.format!r}")
    assert encoded.scale is not None
    return torch.cat(
        [
            encoded.content.contiguous().view(torch.uint8),
            encoded.scale.float().unsqueeze(-1).contiguous().view(torch.uint8),
            encoded.rope.to(torch.bfloat16).contiguous().view(torch.uint8),
        ],
        dim=-1,
    )


def unpack_snapmla_rows(rows: torch.Tensor, kv_lora_rank: int, qk_rope_head_dim: int) -> EncodedLatent:
    """Inverse of :func:`pack_snapmla_rows`; checks the row length against the dims."""
    width = bytes_per_token("fp8_token", kv_lora_rank, qk_rope_head_dim)
    _check_rows(rows, width, "snapmla", kv_lora_rank, qk_rope_head_dim)
    d_c = kv_lora_rank
    content = rows[..., :d_c].contiguous().view(torch.float8_e4m3fn)
    scale = rows[..., d_c : d_c + _FP32_BYTES].contiguous().view(torch.float32).squeeze(-1)
    rope = rows[..., d_c + _FP32_BYTES :].contiguous().view(torch.bfloat16)
    return EncodedLatent("fp8_token", content, rope, scale)


def pack_flashmla_rows(encoded: EncodedLatent) -> torch.Tensor:
    """Pack an ``fp8_tile`` cache into FlashMLA's rows ``[d_c FP8 | n_tiles fp32 | d_r BF16]``."""
    if encoded.format != "fp8_tile" or encoded.content.dtype != torch.float8_e4m3fn:
        raise ValueError(f"pack_flashmla_rows needs an FP8 'fp8_tile' cache, got {encoded.format!r}")
    assert encoded.scale is not None
    return torch.cat(
        [
            encoded.content.contiguous().view(torch.uint8),
            encoded.scale.float().contiguous().view(torch.uint8),
            encoded.rope.to(torch.bfloat16).contiguous().view(torch.uint8),
        ],
        dim=-1,
    )


def unpack_flashmla_rows(
    rows: torch.Tensor, kv_lora_rank: int, qk_rope_head_dim: int, n_tiles: int = 4
) -> EncodedLatent:
    """Inverse of :func:`pack_flashmla_rows`."""
    width = bytes_per_token("fp8_tile", kv_lora_rank, qk_rope_head_dim, n_tiles)
    _check_rows(rows, width, "flashmla", kv_lora_rank, qk_rope_head_dim)
    d_c, scale_end = kv_lora_rank, kv_lora_rank + _FP32_BYTES * n_tiles
    content = rows[..., :d_c].contiguous().view(torch.float8_e4m3fn)
    scale = rows[..., d_c:scale_end].contiguous().view(torch.float32)
    rope = rows[..., scale_end:].contiguous().view(torch.bfloat16)
    return EncodedLatent("fp8_tile", content, rope, scale)


def _check_rows(rows: torch.Tensor, width: int, name: str, d_c: int, d_r: int) -> None:
    if rows.dtype != torch.uint8 or rows.shape[-1] != width:
        raise ValueError(
            f"{name} rows must be uint8 with {width} bytes per token for kv_lora_rank={d_c}, "
            f"qk_rope_head_dim={d_r}; got dtype {rows.dtype} and {rows.shape[-1]} bytes"
        )


def snapmla_to_flashmla(encoded: EncodedLatent, n_tiles: int = 4) -> EncodedLatent:
    """Per-token -> per-tile scales: each tile takes its token's scale; codes and RoPE stay (lossless)."""
    if encoded.format != "fp8_token":
        raise ValueError(f"snapmla_to_flashmla needs an 'fp8_token' cache, got {encoded.format!r}")
    assert encoded.scale is not None
    _tile_view(encoded.content, n_tiles)
    scale = encoded.scale.unsqueeze(-1).expand(*encoded.scale.shape, n_tiles).contiguous()
    return EncodedLatent("fp8_tile", encoded.content, encoded.rope, scale, encoded.overflow)


def flashmla_to_snapmla(encoded: EncodedLatent) -> tuple[EncodedLatent, int]:
    """Per-tile -> per-token: re-quantize with ``s_t = max_tiles s_tile`` when the tile scales differ.

    Codes of the tile with the largest scale are kept as they are; others are re-rounded, so the result
    is exact iff all tiles share a scale. Returns the SnapMLA cache and the number of codes that changed.
    """
    if encoded.format != "fp8_tile":
        raise ValueError(f"flashmla_to_snapmla needs an 'fp8_tile' cache, got {encoded.format!r}")
    assert encoded.scale is not None
    token_scale = encoded.scale.amax(dim=-1)
    n_tiles = encoded.scale.shape[-1]
    tiles = _tile_view(encoded.content.float(), n_tiles)
    ratio = (encoded.scale / token_scale.unsqueeze(-1)).unsqueeze(-1)  # <= 1, so no overflow
    requantized = (tiles * ratio).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    changed = int((requantized.float() != tiles).sum())
    content = requantized.reshape(encoded.content.shape)
    return EncodedLatent("fp8_token", content, encoded.rope, token_scale, encoded.overflow), changed
