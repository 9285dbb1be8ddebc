"""SOLAR on the two real pretrained LMs of :mod:`neurips26.zoo.real_lm` (issue #45 item 5): the bound of a
forward pass from the model's shapes alone, built on ``meta`` (no weights), beside a measured CPU forward of
the real weights.

The shapes are the cached ``config.json`` of each converted model, written out here as ``transformers``
config arguments, so the analysis needs neither the cache nor the ``real-lm`` extra (``transformers`` only);
:func:`cached_config_matches` checks them against the cache where it exists. Both models run with the
``sdpa`` attention, as on a stock CPU install.

>>> from neurips26.methods.solar.real_lm import meta_model, meta_ids   # doctest: +SKIP
>>> analyze(meta_model("qwen2.5-coder-0.5b"), [meta_ids(128)], hw="cpu-local")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import gc
import json
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "REAL_LM_SHAPES",
    "Forward",
    "cached_config_matches",
    "decoder_macs",
    "meta_ids",
    "meta_model",
    "real_lm_config",
    "real_model",
]

_GEMMA_LAYERS = (["sliding_attention"] * 5 + ["full_attention"]) * 3

# (transformers config class, its arguments): the shapes of the converted GGUF models (their config.json)
REAL_LM_SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "gemma3-270m": (
        "Gemma3TextConfig",
        {
            "vocab_size": 262144,
            "hidden_size": 640,
            "intermediate_size": 2048,
            "num_hidden_layers": 18,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "query_pre_attn_scalar": 256,
            "sliding_window": 512,
            "layer_types": _GEMMA_LAYERS,
            "hidden_activation": "gelu_pytorch_tanh",
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": True,
        },
    ),
    "qwen2.5-coder-0.5b": (
        "Qwen2Config",
        {
            "vocab_size": 151936,
            "hidden_size": 896,
            "intermediate_size": 4864,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "hidden_act": "silu",
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": False,
            "use_sliding_window": False,
        },
    ),
}
# the config.json keys compared with the cache (the rest are tokens ids, dtypes and versions)
_SHAPE_KEYS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "sliding_window",
    "layer_types",
    "tie_word_embeddings",
)


def _shapes(name: str) -> tuple[str, dict[str, Any]]:
    if name not in REAL_LM_SHAPES:
        raise ValueError(f"unknown real model {name!r}; known: {sorted(REAL_LM_SHAPES)}")
    return REAL_LM_SHAPES[name]


def real_lm_config(name: str) -> Any:
    """The ``transformers`` config of real model ``name`` with its real shapes (no cache, no weights)."""
    import transformers

    class_name, arguments = _shapes(name)
    config = getattr(transformers, class_name)(**arguments)
    config._attn_implementation = "sdpa"
    return config


def meta_model(name: str) -> torch.nn.Module:
    """Real model ``name`` built on ``meta`` from its config: every shape, no weight."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(real_lm_config(name)).eval()


def meta_ids(tokens: int, device: str = "meta") -> torch.Tensor:
    """Token ids of one sequence of ``tokens`` tokens (their values do not change the work)."""
    if not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens must be a positive integer, got {tokens!r}")
    return torch.zeros(1, tokens, dtype=torch.long, device=device)


def decoder_macs(name: str, tokens: int) -> int:
    """Closed-form MACs of one causal forward over ``tokens`` tokens (batch 1): the q/k/v/o projections,
    the gated MLP, the causal attention triangle (QK^T and PV; every layer is full below the sliding
    window), the LM head and the rotary frequencies' outer product (``transformers`` 5's Gemma 3 computes
    its rotary table once per entry of ``layer_types``, 18 times; Qwen2 once)."""
    _, shape = _shapes(name)
    if "sliding_window" in shape and tokens > shape["sliding_window"]:
        window = shape["sliding_window"]
        raise ValueError(f"{name}: the closed form holds up to the sliding window ({window} tokens)")
    hidden, inter, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    heads, kv_heads = shape["num_attention_heads"], shape["num_key_value_heads"]
    head_dim = shape.get("head_dim") or hidden // heads
    projections = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim  # q, o; k, v (GQA)
    per_token = layers * (projections + 3 * hidden * inter)  # + gate, up, down
    per_token += hidden * shape["vocab_size"]
    attention = layers * heads * head_dim * 2 * (tokens * (tokens + 1) // 2)
    rotaries = len(shape.get("layer_types", [None]))
    return tokens * per_token + attention + rotaries * (head_dim // 2) * tokens


@functools.lru_cache(maxsize=1)  # one real model in memory at a time (1.1 GB and 2.5 GB in float32)
def real_model(name: str) -> torch.nn.Module:
    """The real weights (``neurips26.zoo.real_lm.load_real``; raises its install/fetch message when the
    cache lacks them), with the same ``sdpa`` attention as the meta model."""
    from neurips26.zoo.real_lm import load_real

    gc.collect()
    model, _ = load_real(name, verify=False)
    model.config._attn_implementation = "sdpa"
    return model


class Forward:
    """One forward of a causal LM over ``input_ids`` (no autograd), returning the logits: what is timed.
    The model's defaults stay as analysed (``use_cache`` on: without a cache transformers hands Gemma's
    sdpa an explicit mask, and the full score rectangle is computed instead of the causal triangle)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.model(input_ids=input_ids).logits


def cached_config_matches(name: str, folder: str | Path) -> list[str]:
    """The shape keys where the converted model's ``config.json`` in ``folder`` differs from
    :data:`REAL_LM_SHAPES` (empty: they agree)."""
    cached = json.loads((Path(folder) / "config.json").read_text())
    _, shape = _shapes(name)
    return [key for key in _SHAPE_KEYS if key in shape and cached.get(key) != shape[key]]
