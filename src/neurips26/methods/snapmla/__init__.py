"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining.

A CPU-reference, kernel-faithful FP8 MLA decode: an absorbed decode over a latent cache (c_KV, k_R),
RoPE-aware per-token FP8 quantization of c_KV with BF16 k_R, pre-scaled domain alignment, a scale-fused
block-64 FP8 PV pipeline inside an online softmax, packed 644-byte rows with a FlashMLA-format converter,
and a ``transformers.Cache`` + attention patch for DeepSeek-V3-class models.
"""

from __future__ import annotations

from neurips26.methods.snapmla.baselines import (
    BF16,
    FLASHMLA_FP8,
    FP32,
    NAIVE_FP8,
    PER_TOKEN_FP8_ROPE,
    RECIPES,
)
from neurips26.methods.snapmla.cache_format import (
    FORMATS,
    EncodedLatent,
    bytes_per_token,
    decode_latent,
    encode_latent,
    flashmla_to_snapmla,
    key_operands,
    pack_flashmla_rows,
    pack_snapmla_rows,
    snapmla_to_flashmla,
    unpack_flashmla_rows,
    unpack_snapmla_rows,
)
from neurips26.methods.snapmla.config import SnapMLAConfig
from neurips26.methods.snapmla.core import (
    E4M3_MAX,
    KeyOperands,
    QueryOperands,
    absorb_query,
    align_rope_to_quant_domain,
    amax_scales,
    latent_attention_reference,
    online_latent_attention,
    project_latent_output,
    quantize_e4m3,
    quantize_p_block,
    split_kv_b_weight,
)
from neurips26.methods.snapmla.integration import (
    LatentMLACache,
    capture_latents,
    latent_mla_forward,
    use_latent_mla,
)
from neurips26.methods.snapmla.pipeline import SNAPMLA, DecodeRecipe, decode_latent_attention, prepare_query

# tests/test_conformance.py: no ecosystem API family fits this method's public API.
CONFORMANCE: tuple[tuple[str, str], ...] = ()
CONFORMANCE_REASON: str = (
    "SnapMLA is a transformers Cache subclass plus a context manager patching MLA attention forwards; "
    "no family fits (its Cache contract is checked against transformers in test_snapmla.py and "
    "test_llm_stock_families.py)."
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); each decodes through ``use_latent_mla`` + ``LatentMLACache`` on a tiny HF
#: DeepSeek-V3; the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "RoPE-aware per-token quantization (content scale excludes k_R, k_R in BF16)": (
        "tests/methods/snapmla/test_snapmla_ideas.py::test_idea_rope_aware_quantization_ignores_the_rope_range_in_decode"
    ),
    "pre-scaled domain alignment of q_R and k_R": (
        "tests/methods/snapmla/test_snapmla_ideas.py::test_idea_domain_alignment_keeps_the_rope_logits_in_decode"
    ),
    "block-wise dynamic FP8 P with the V scales fused": (
        "tests/methods/snapmla/test_snapmla_ideas.py::test_idea_block_dynamic_p_beats_a_static_p_scale_in_decode"
    ),
}

__all__ = [
    "BF16",
    "CONFORMANCE",
    "CONFORMANCE_REASON",
    "E4M3_MAX",
    "FLASHMLA_FP8",
    "FORMATS",
    "FP32",
    "IDEAS",
    "NAIVE_FP8",
    "PER_TOKEN_FP8_ROPE",
    "RECIPES",
    "SNAPMLA",
    "DecodeRecipe",
    "EncodedLatent",
    "KeyOperands",
    "LatentMLACache",
    "QueryOperands",
    "SnapMLAConfig",
    "absorb_query",
    "align_rope_to_quant_domain",
    "amax_scales",
    "bytes_per_token",
    "capture_latents",
    "decode_latent",
    "decode_latent_attention",
    "encode_latent",
    "flashmla_to_snapmla",
    "key_operands",
    "latent_attention_reference",
    "latent_mla_forward",
    "online_latent_attention",
    "pack_flashmla_rows",
    "pack_snapmla_rows",
    "prepare_query",
    "project_latent_output",
    "quantize_e4m3",
    "quantize_p_block",
    "snapmla_to_flashmla",
    "split_kv_b_weight",
    "unpack_flashmla_rows",
    "unpack_snapmla_rows",
    "use_latent_mla",
]
