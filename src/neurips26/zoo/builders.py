"""Tiny models built in code with seeded random weights: Hugging Face language models and small MLPs.

Nothing is downloaded: each builder makes a real ``transformers`` model class from a small config, seeded,
in eval mode. Use them for shape, equivalence and plumbing tests and for experiments whose models are
trained in the cell (``tiny_mlp``); use ``neurips26.zoo.load`` for a trained language model whose
attention actually matters.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tiny_deepseek_v3", "tiny_deepseek_v3_config", "tiny_llama", "tiny_mlp"]


def tiny_mlp(in_features: int, out_features: int, hidden: int = 16, depth: int = 2, seed: int = 0) -> Any:
    """A small tanh MLP (``nn.Sequential``) with seeded initial weights; the global RNG is left alone."""
    import torch
    from torch import nn

    if min(in_features, out_features, hidden, depth) < 1:
        raise ValueError("in_features, out_features, hidden and depth must all be >= 1")
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = in_features
    for _ in range(depth - 1):
        layers += [nn.Linear(width, hidden), nn.Tanh()]
        width = hidden
    layers.append(nn.Linear(width, out_features))
    model = nn.Sequential(*layers)
    torch.random.set_rng_state(generator_state)
    return model


def tiny_deepseek_v3_config(
    *,
    num_hidden_layers: int = 2,
    hidden_size: int = 64,
    num_attention_heads: int = 4,
    kv_lora_rank: int = 32,
    qk_rope_head_dim: int = 8,
    qk_nope_head_dim: int = 16,
    v_head_dim: int = 16,
    q_lora_rank: int | None = None,
    vocab_size: int = 128,
    max_position_embeddings: int = 4096,
    rope_interleave: bool = True,
    attn_implementation: str = "eager",
    **extra: Any,
) -> Any:
    """A small ``DeepseekV3Config`` with MLA attention and every layer dense (no MoE).

    ``first_k_dense_replace = num_hidden_layers`` makes every decoder layer use the dense MLP, so the
    model is MLA attention + SwiGLU MLPs. ``q_lora_rank=None`` (default) gives a plain query projection,
    an int the low-rank one.
    """
    from transformers import DeepseekV3Config

    config = DeepseekV3Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        moe_intermediate_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_attention_heads,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=num_hidden_layers,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=qk_rope_head_dim,
        qk_nope_head_dim=qk_nope_head_dim,
        v_head_dim=v_head_dim,
        max_position_embeddings=max_position_embeddings,
        rope_interleave=rope_interleave,
        tie_word_embeddings=False,
        **extra,
    )
    config._attn_implementation = attn_implementation
    return config


def tiny_deepseek_v3(seed: int = 0, **config_kwargs: Any) -> Any:
    """A randomly initialised ``DeepseekV3ForCausalLM`` (float32, eval mode) from
    :func:`tiny_deepseek_v3_config`; the weights depend on ``seed`` only."""
    import torch
    from transformers import DeepseekV3ForCausalLM

    config = tiny_deepseek_v3_config(**config_kwargs)
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = DeepseekV3ForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    return model.eval()


def tiny_llama(
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    vocab_size: int = 256,
    seed: int = 0,
) -> Any:
    """A ``transformers.LlamaForCausalLM`` with GQA and RoPE, seeded random weights, in eval mode."""
    import torch
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
