"""Tiny causal language models built in code (random weights) for tests; no network, no checkpoints."""

from __future__ import annotations

import torch


def tiny_llama(
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    vocab_size: int = 256,
    seed: int = 0,
) -> torch.nn.Module:
    """A ``transformers.LlamaForCausalLM`` with GQA and RoPE, seeded random weights, in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        vocab_size=vocab_size,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    torch.random.set_rng_state(state)
    return model
