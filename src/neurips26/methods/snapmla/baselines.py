"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — baselines.

All baselines are re-implemented here as :class:`DecodeRecipe` entries on the same CPU decode kernel, so
the variants differ only in cache format and operand precision (no library offers FP8 MLA numerics on
CPU: FlashMLA and FlashInfer are GPU kernels):

- ``fp32``: full-precision absorbed decode (the reference every error is measured against).
- ``bf16``: BF16 cache, BF16 query and P, float32 accumulation (the paper's BF16 baseline).
- ``naive_fp8``: one static FP8 scale per tensor over [c; k_R] (vLLM/SGLang ``--kv-cache-dtype fp8``
  style), FP8 query per tensor, FP8 QK and FP8 PV with P scaled FlashAttention-3-style (``P * 448``).
- ``per_token_fp8_rope``: per-token FP8 over [c; k_R] including RoPE, otherwise SnapMLA's pipeline (the
  ablation of "RoPE-aware").
- ``flashmla_fp8``: FlashMLA's "FP8 with scale" cache (per-tile fp32 scales, BF16 RoPE), dequantized to
  BF16 and computed in BF16 (as its sparse decode kernel does; format from FlashMLA/vLLM public docs).
"""

from __future__ import annotations

from neurips26.methods.snapmla.pipeline import SNAPMLA, DecodeRecipe

__all__ = ["BASELINES", "BF16", "FLASHMLA_FP8", "FP32", "NAIVE_FP8", "PER_TOKEN_FP8_ROPE", "RECIPES"]

FP32 = DecodeRecipe("fp32", "fp32", "fp32", "exact")
BF16 = DecodeRecipe("bf16", "bf16", "bf16", "bf16")
NAIVE_FP8 = DecodeRecipe("naive_fp8", "fp8_tensor_joint", "fp8_tensor_joint", "fp8_static")
PER_TOKEN_FP8_ROPE = DecodeRecipe("per_token_fp8_rope", "fp8_token_joint", "fp8_row_joint", "fp8_block")
FLASHMLA_FP8 = DecodeRecipe("flashmla_fp8", "fp8_tile", "bf16", "bf16")

BASELINES = {r.name: r for r in (BF16, NAIVE_FP8, PER_TOKEN_FP8_ROPE, FLASHMLA_FP8)}
RECIPES = {SNAPMLA.name: SNAPMLA, FP32.name: FP32, **BASELINES}
