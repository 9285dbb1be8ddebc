"""Evaluation of KV-cache presses (kvpress-style hooks) on the zoo models.

Every function takes an optional ``press`` (anything used as ``with press(model): ...``; None is the full
cache) and measures what the compressed *prefill* cache does afterwards:

* :func:`compressed_prefill` -- prefill a batch of prompts under the press; the cache, the last logits and
  the peak cache bytes held during the prefill.
* :func:`continuation_nll` -- mean next-token NLL of a continuation decoded token by token from the
  compressed cache (the PG-19 perplexity protocol, scaled down).
* :func:`attention_fidelity` -- for *future* queries (the continuation, computed by the full model), the
  relative error of each layer's attention output over the kept prefix entries versus all of them.
* :func:`repeated_text_batch` -- the redundancy stress set: one held-out passage repeated, then its start.

Head-wise presses that mask instead of dropping (kvpress ``AdaKVPress``) are handled through
``module.masked_key_indices``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "CompressedPrefill",
    "attention_fidelity",
    "cache_bytes",
    "compressed_prefill",
    "continuation_nll",
    "decoder_layers",
    "kept_mask",
    "post_rope_queries",
    "repeated_text_batch",
    "text_batch",
    "track_cache_bytes",
]


def decoder_layers(model: Any) -> Any:
    """The decoder layers of a causal LM (``model.model.layers`` or a multimodal model's language model)."""
    inner = model.model
    return inner.language_model.layers if hasattr(inner, "language_model") else inner.layers


@dataclass
class CompressedPrefill:
    """The state a press leaves after prefilling a ``(B, n)`` batch."""

    cache: Any
    last_logits: torch.Tensor  # (B, vocab)
    peak_cache_bytes: int
    context: int
    masked: list[Any]  # per layer: the press's ``masked_key_indices`` (head-wise eviction) or None

    def restore_masks(self, model: Any) -> None:
        """Put the head-wise masks back on the modules (any later prefill on the model clears them)."""
        for layer, masked in zip(decoder_layers(model), self.masked, strict=True):
            layer.self_attn.masked_key_indices = masked


def _press_context(press: Any, model: Any) -> contextlib.AbstractContextManager[Any]:
    return press(model) if press is not None else contextlib.nullcontext()


def compressed_prefill(model: Any, ids: torch.Tensor, press: Any = None) -> CompressedPrefill:
    """Prefill ``ids`` (B, n) under ``press`` into a fresh ``DynamicCache``; track the peak cache bytes."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in decoder_layers(model):  # a head-wise press of an earlier prefill must not leak its mask
        layer.self_attn.masked_key_indices = None
    # the tracker's hooks go first, so they see each layer's full cache before the press compresses it
    with torch.no_grad(), track_cache_bytes(model, cache) as stats, _press_context(press, model):
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    masked = [getattr(layer.self_attn, "masked_key_indices", None) for layer in decoder_layers(model)]
    return CompressedPrefill(cache, out.logits[:, -1].float(), stats["peak_bytes"], ids.shape[1], masked)


@contextlib.contextmanager
def track_cache_bytes(model: Any, cache: Any) -> Iterator[dict[str, int]]:
    """Record the peak bytes ``cache`` holds after each attention layer of a forward pass.

    Enter it *before* ``with press(model)``: hooks run in registration order, so each layer is measured
    after its attention wrote the full layer and before the press compressed it -- the true peak.
    """
    stats = {"peak_bytes": 0}

    def after_attention(module: Any, args: Any, kwargs: dict, output: Any) -> None:
        stats["peak_bytes"] = max(stats["peak_bytes"], cache_bytes(cache))

    hooks = [
        layer.self_attn.register_forward_hook(after_attention, with_kwargs=True)
        for layer in decoder_layers(model)
    ]
    try:
        yield stats
    finally:
        for hook in hooks:
            hook.remove()


def cache_bytes(cache: Any) -> int:
    """Bytes of every key/value tensor (plain or quantized) a transformers cache holds."""
    total = 0
    for layer in cache.layers:
        for name in ("keys", "values", "_quantized_keys", "_quantized_values"):
            tensor = getattr(layer, name, None)
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total


def continuation_nll(model: Any, prefill: CompressedPrefill, continuation: torch.Tensor) -> float:
    """Mean NLL (nats/token) of ``continuation`` (B, m) decoded one token at a time from ``prefill``.

    One token per step is what a serving engine does after compression, and it avoids multi-token causal
    masks over a cache whose layers hold different numbers of entries.
    """
    batch, steps = continuation.shape
    prefill.restore_masks(model)
    logits = prefill.last_logits
    total = torch.zeros((), dtype=torch.float64)
    position = prefill.context
    with torch.no_grad():
        for t in range(steps):
            target = continuation[:, t]
            total += torch.nn.functional.cross_entropy(logits, target, reduction="sum").double()
            if t + 1 == steps:
                break
            out = model(
                input_ids=target[:, None],
                past_key_values=prefill.cache,
                cache_position=torch.tensor([position]),
                position_ids=torch.full((batch, 1), position),
                use_cache=True,
            )
            logits = out.logits[:, -1].float()
            position += 1
    return float(total) / (batch * steps)


def post_rope_queries(module: Any, hidden_states: torch.Tensor, position_embeddings: Any) -> torch.Tensor:
    """``(B, H_q, q, d)`` queries of an attention module after RoPE, as its forward computes them."""
    from kvpress.utils import get_prerope_query_states
    from transformers.models.llama.modeling_llama import rotate_half

    queries = get_prerope_query_states(module, hidden_states)
    cos, sin = position_embeddings
    return (queries * cos.unsqueeze(1)) + (rotate_half(queries) * sin.unsqueeze(1))


def kept_mask(masked: Any, keys: torch.Tensor) -> torch.Tensor:
    """``(B, H, n)`` bool: cache entries a head really attends to; ``masked`` is a press's
    ``masked_key_indices`` (AdaKV-style head-wise eviction) or None."""
    mask = torch.ones(keys.shape[:3], dtype=torch.bool)
    if masked is not None:
        mask[masked] = False
    return mask


def attention_fidelity(
    model: Any, full_ids: torch.Tensor, context: int, prefill: CompressedPrefill, *, max_queries: int = 64
) -> float:
    """Mean relative error of attention outputs over the compressed prefix, for future queries.

    The full model runs on ``full_ids`` (B, n + m); its post-RoPE queries at the ``m`` continuation
    positions attend (a) to the ``n`` prefix keys of the full cache and (b) to the entries the press kept.
    Error per (layer, query head, query) is ``||o_S - o|| / ||o||``; the mean over all is returned.
    """
    from transformers import DynamicCache
    from transformers.models.llama.modeling_llama import repeat_kv

    captured: dict[int, torch.Tensor] = {}
    layers = decoder_layers(model)

    def grab(module: Any, args: Any, kwargs: dict) -> None:
        hidden = kwargs["hidden_states"][:, context : context + max_queries]
        cos, sin = kwargs["position_embeddings"]
        window = (cos[:, context : context + max_queries], sin[:, context : context + max_queries])
        captured[module.layer_idx] = post_rope_queries(module, hidden, window)

    hooks = [layer.self_attn.register_forward_pre_hook(grab, with_kwargs=True) for layer in layers]
    full_cache = DynamicCache()
    try:
        with torch.no_grad():
            model(input_ids=full_ids, past_key_values=full_cache, use_cache=True)
    finally:
        for hook in hooks:
            hook.remove()
    errors = []
    for idx in range(len(layers)):
        queries = captured[idx].float()
        groups = queries.shape[1] // full_cache.layers[idx].keys.shape[1]
        scale = 1.0 / math.sqrt(queries.shape[-1])
        keys_full = repeat_kv(full_cache.layers[idx].keys[:, :, :context].float(), groups)
        values_full = repeat_kv(full_cache.layers[idx].values[:, :, :context].float(), groups)
        reference = torch.softmax(queries @ keys_full.transpose(-1, -2) * scale, -1) @ values_full
        kept_keys = prefill.cache.layers[idx].keys[:, :, : _prefill_length(prefill, idx)].float()
        kept_values = prefill.cache.layers[idx].values[:, :, : kept_keys.shape[2]].float()
        visible = repeat_kv(kept_mask(prefill.masked[idx], kept_keys)[..., None].float(), groups)[..., 0]
        logits = queries @ repeat_kv(kept_keys, groups).transpose(-1, -2) * scale
        logits = logits.masked_fill(visible[:, :, None, :] == 0, float("-inf"))
        approx = torch.softmax(logits, -1) @ repeat_kv(kept_values, groups)
        err = (approx - reference).norm(dim=-1) / reference.norm(dim=-1).clamp_min(1e-12)
        errors.append(err.mean())
    return float(torch.stack(errors).mean())


def _prefill_length(prefill: CompressedPrefill, idx: int) -> int:
    """Entries layer ``idx`` held right after prefill (the fidelity runs before any decoding)."""
    return prefill.cache.layers[idx].keys.shape[2]


def text_batch(ids: np.ndarray, rng: np.random.Generator, batch: int, length: int) -> torch.Tensor:
    """``(batch, length)`` windows of a token stream at random offsets."""
    if len(ids) < length + 1:
        raise ValueError(f"the token stream holds {len(ids)} tokens, fewer than length={length} + 1")
    starts = rng.integers(0, len(ids) - length, size=batch)
    return torch.from_numpy(np.stack([ids[s : s + length] for s in starts]).astype(np.int64))


def repeated_text_batch(
    ids: np.ndarray, rng: np.random.Generator, batch: int, length: int, copies: int, continuation: int
) -> torch.Tensor:
    """Redundancy stress: a passage of ``length / copies`` tokens repeated ``copies`` times, then the
    first ``continuation`` tokens of the passage again: ``(batch, length + continuation)``."""
    if copies < 1 or length % copies:
        raise ValueError(f"copies must divide length, got length={length}, copies={copies}")
    passage = text_batch(ids, rng, batch, length // copies)
    if continuation > passage.shape[1]:
        raise ValueError(f"continuation={continuation} exceeds the passage length {passage.shape[1]}")
    return torch.cat([passage.repeat(1, copies), passage[:, :continuation]], dim=1)
