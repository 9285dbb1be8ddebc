"""Tiny randomly initialised STOCK transformers causal LMs, one per model family the LLM tools name.

Every family is built from its own transformers config class at hidden size 128, 3 layers, 4 query heads
and 2 KV heads (GQA; the MLA families have 4 heads), so a test exercises the real modeling code of each
family (fused ``qkv_proj`` of Phi-3, QK-norm of Qwen3/Gemma 3, sliding-window layers of Gemma 3, MLA of
DeepSeek-V2/V3) in well under a second per forward. Nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["MLA_FAMILIES", "STOCK_FAMILIES", "left_padded_batch", "tiny_stock_config", "tiny_stock_model"]

STOCK_FAMILIES = ("llama", "qwen2", "qwen3", "mistral", "phi3", "gemma3", "deepseek_v3", "deepseek_v2")
MLA_FAMILIES = ("deepseek_v3", "deepseek_v2")
VOCAB = 256

_COMMON = {
    "vocab_size": VOCAB,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}
_MLA = {
    "num_key_value_heads": 4,
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "q_lora_rank": None,
    "moe_intermediate_size": 64,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,  # layer 0 dense, layers 1-2 MoE: both MLP kinds run
}


def _config_class(family: str) -> Any:
    import transformers

    names = {
        "llama": "LlamaConfig",
        "qwen2": "Qwen2Config",
        "qwen3": "Qwen3Config",
        "mistral": "MistralConfig",
        "phi3": "Phi3Config",
        "gemma3": "Gemma3TextConfig",
        "deepseek_v3": "DeepseekV3Config",
        "deepseek_v2": "DeepseekV2Config",
    }
    if family not in names:
        raise ValueError(f"family={family!r} is not allowed; choose one of {list(STOCK_FAMILIES)}")
    return getattr(transformers, names[family])


def tiny_stock_config(family: str, attn_implementation: str = "sdpa", **overrides: Any) -> Any:
    """The family's own config class at the tiny shape above; ``overrides`` replace any field."""
    settings = dict(_COMMON)
    if family in MLA_FAMILIES:
        settings.update(_MLA)
        if family == "deepseek_v3":
            settings.update(n_group=1, topk_group=1)
    if family in ("qwen3", "gemma3"):
        settings["head_dim"] = 32
    if family == "gemma3":  # layers 0-1 sliding (window 16, shorter than long test prompts), layer 2 global
        layer_types = ["sliding_attention", "sliding_attention", "full_attention"]
        settings.update(sliding_window=16, layer_types=layer_types)
    if family == "phi3":
        settings.update(pad_token_id=0)  # Phi3Config's default pad id 32000 lies outside the tiny vocabulary
    settings.update(overrides)
    config = _config_class(family)(**settings)
    config._attn_implementation = attn_implementation
    return config


def tiny_stock_model(family: str, seed: int = 0, attn_implementation: str = "sdpa", **overrides: Any) -> Any:
    """A randomly initialised ``AutoModelForCausalLM`` of ``family`` (float32, eval mode); the weights
    depend on ``seed`` only (the global RNG is restored)."""
    from transformers import AutoModelForCausalLM

    config = tiny_stock_config(family, attn_implementation, **overrides)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.random.set_rng_state(state)
    return model.eval()


def left_padded_batch(
    lengths: list[int], seed: int = 0, pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, attention_mask)`` of random prompts of ``lengths``, left-padded to the longest with
    ``pad_id`` (as a tokenizer with ``padding_side="left"`` gives for batched generation)."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(lengths), width), dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, width - length :] = torch.randint(1, VOCAB, (length,), generator=generator)
        mask[row, width - length :] = 1
    return ids, mask
