"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — measurements.

Kernel-level accuracy of a recipe against the full-precision absorbed decode, the content/RoPE numerical
heterogeneity of a latent cache, and an analytic memory-bound decode model (a model, not a measurement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from neurips26.methods.snapmla.cache_format import bytes_per_token
from neurips26.methods.snapmla.core import amax_scales, latent_attention_reference, project_latent_output
from neurips26.methods.snapmla.pipeline import DecodeRecipe, decode_latent_attention

__all__ = [
    "DSV3_KV_LORA_RANK",
    "DSV3_ROPE_DIM",
    "KernelError",
    "LayerRanges",
    "attention_kernel_error",
    "decode_step_seconds",
    "layer_ranges",
    "memory_bound_attention_speedup",
]

DSV3_KV_LORA_RANK = 512  # DeepSeek-V3 config
DSV3_ROPE_DIM = 64


def _causal_tail_mask(n_query: int, total: int) -> torch.Tensor:
    """Additive mask for the last ``n_query`` positions of a ``total``-token sequence."""
    query_pos = torch.arange(total - n_query, total).unsqueeze(-1)
    allowed = torch.arange(total).unsqueeze(0) <= query_pos
    return torch.zeros(n_query, total).masked_fill(~allowed, float("-inf"))


@dataclass
class KernelError:
    """Errors of one recipe on one layer versus the float32 reference."""

    relative_error: float  # ||o - o_ref|| / ||o_ref|| over heads and queries, o after W_UV
    kl: float  # mean over heads and queries of KL(p_ref || p) of the attention probabilities
    overflow: int


def attention_kernel_error(recipe: DecodeRecipe, layer: dict, n_query: int) -> KernelError:
    """Run ``recipe`` for the last ``n_query`` positions of a captured layer (see ``capture_latents``)."""
    content, rope = layer["content"], layer["rope"]
    q_content, q_rope = layer["q_content"][:, :, -n_query:], layer["q_rope"][:, :, -n_query:]
    mask = _causal_tail_mask(n_query, content.shape[1])
    ref_latent, ref_logits = latent_attention_reference(
        q_content.double(),
        q_rope.double(),
        content.double(),
        rope.double(),
        layer["scaling"],
        mask.double(),
        return_logits=True,
    )
    reference = project_latent_output(ref_latent, layer["w_uv"].double())
    encoded = recipe.encode(content, rope)
    latent, logits = decode_latent_attention(
        recipe, q_content, q_rope, encoded, layer["scaling"], mask, return_logits=True
    )
    output = project_latent_output(latent.double(), layer["w_uv"].double())
    relative = float(torch.linalg.vector_norm(output - reference) / torch.linalg.vector_norm(reference))
    log_p_ref = torch.log_softmax(ref_logits, dim=-1)
    log_p = torch.log_softmax(logits.double(), dim=-1)
    p_ref = log_p_ref.exp()
    kl = torch.where(p_ref > 0, p_ref * (log_p_ref - log_p), torch.zeros_like(p_ref)).sum(-1).mean()
    return KernelError(relative, float(kl), encoded.overflow)


@dataclass
class LayerRanges:
    """Value ranges and per-token FP8 error of the content latent and the RoPE key of one layer."""

    content_amax: float
    rope_amax: float
    content_fp8_rel_mse: float  # c quantized per token with its own scale
    rope_fp8_rel_mse: float  # k_R quantized per token with its own scale
    joint_content_fp8_rel_mse: float  # c when it shares a per-token scale with k_R
    joint_rope_fp8_rel_mse: float


def _per_token_fp8(x: torch.Tensor, amax: torch.Tensor) -> torch.Tensor:
    scale = amax_scales(amax).unsqueeze(-1)
    return (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float() * scale


def _relative_mse(approx: torch.Tensor, exact: torch.Tensor) -> float:
    return float(((approx - exact) ** 2).mean() / (exact**2).mean().clamp_min(1e-30))


def layer_ranges(content: torch.Tensor, rope: torch.Tensor) -> LayerRanges:
    """The heterogeneity SnapMLA builds on: RoPE keys span a wider range than the normalized latent, so a
    scale shared with RoPE crushes the content's resolution."""
    content, rope = content.float(), rope.float()
    joint_amax = torch.maximum(content.abs().amax(-1), rope.abs().amax(-1))
    return LayerRanges(
        content_amax=float(content.abs().max()),
        rope_amax=float(rope.abs().max()),
        content_fp8_rel_mse=_relative_mse(_per_token_fp8(content, content.abs().amax(-1)), content),
        rope_fp8_rel_mse=_relative_mse(_per_token_fp8(rope, rope.abs().amax(-1)), rope),
        joint_content_fp8_rel_mse=_relative_mse(_per_token_fp8(content, joint_amax), content),
        joint_rope_fp8_rel_mse=_relative_mse(_per_token_fp8(rope, joint_amax), rope),
    )


def decode_step_seconds(recipe: DecodeRecipe, layers: list[dict], reps: int = 3) -> float:
    """Median CPU wall time of one decode step's attention kernels (the last position, all layers), with
    the cache already encoded. This is the CPU emulation's speed, not a GPU kernel's."""
    encoded = [recipe.encode(layer["content"], layer["rope"]) for layer in layers]
    times = []
    for _ in range(max(1, reps)):
        start = time.perf_counter()
        for layer, cache in zip(layers, encoded, strict=True):
            decode_latent_attention(
                recipe, layer["q_content"][:, :, -1:], layer["q_rope"][:, :, -1:], cache, layer["scaling"]
            )
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def memory_bound_attention_speedup(
    kv_format: str,
    context_tokens: int,
    *,
    kv_lora_rank: int = DSV3_KV_LORA_RANK,
    rope_dim: int = DSV3_ROPE_DIM,
    n_tiles: int = 4,
    query_bytes: int = 0,
) -> float:
    """MODEL, not a measurement: decode attention time ~ bytes read, so the speedup over the BF16 cache is
    ``(T * bytes_bf16 + q) / (T * bytes_fmt + q)`` for ``T`` cached tokens. It ignores compute, kernel
    launch and the FP8 tensor-core gain on the GEMMs, which the paper's 1.91x also includes."""
    bf16 = context_tokens * bytes_per_token("bf16", kv_lora_rank, rope_dim) + query_bytes
    fmt = context_tokens * bytes_per_token(kv_format, kv_lora_rank, rope_dim, n_tiles) + query_bytes
    return bf16 / fmt
