"""Evaluation of KV-cache presses (kvpress-style hooks) on the zoo models.

Every function takes an optional ``press`` (anything used as ``with press(model): ...``; None is the full
cache) and measures what the compressed *prefill* cache does afterwards:

* :func:`compressed_prefill` -- prefill a batch of prompts under the press; the cache, the last logits and
  the peak cache bytes held during the prefill.
* :func:`decode_continuation` -- mean next-token NLL of a continuation decoded token by token from the
  compressed cache (the PG-19 perplexity protocol, scaled down) and, for those *future* queries, the
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
    "Continuation",
    "cache_bytes",
    "compressed_prefill",
    "decode_continuation",
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
    full: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # each layer's keys/values before the press

    def restore_masks(self, model: Any) -> None:
        """Put the head-wise masks back on the modules (any later prefill on the model clears them)."""
        for layer, masked in zip(decoder_layers(model), self.masked, strict=True):
            layer.self_attn.masked_key_indices = masked


def _press_context(press: Any, model: Any) -> contextlib.AbstractContextManager[Any]:
    return press(model) if press is not None else contextlib.nullcontext()


def compressed_prefill(
    model: Any, ids: torch.Tensor, press: Any = None, *, keep_full: bool = False
) -> CompressedPrefill:
    """Prefill ``ids`` (B, n) under ``press`` into a fresh ``DynamicCache``; track the peak cache bytes.

    ``keep_full=True`` also keeps every layer's uncompressed keys and values (as the press saw them), for
    :func:`decode_continuation`'s attention-fidelity measurement.
    """
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in decoder_layers(model):  # a head-wise press of an earlier prefill must not leak its mask
        layer.self_attn.masked_key_indices = None
    full: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    # the tracker's hooks go first, so they see each layer's full cache before the press compresses it
    tracker = track_cache_bytes(model, cache, full if keep_full else None)
    with torch.no_grad(), tracker as stats, _press_context(press, model):
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    masked = [getattr(layer.self_attn, "masked_key_indices", None) for layer in decoder_layers(model)]
    return CompressedPrefill(
        cache,
        out.logits[:, -1].float(),
        stats["peak_bytes"],
        ids.shape[1],
        masked,
        [full[i] for i in sorted(full)] if keep_full else None,
    )


@contextlib.contextmanager
def track_cache_bytes(
    model: Any, cache: Any, snapshot: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None
) -> Iterator[dict[str, int]]:
    """Record the peak bytes ``cache`` holds after each attention layer of a forward pass.

    Enter it *before* ``with press(model)``: hooks run in registration order, so each layer is measured
    after its attention wrote the full layer and before the press compressed it -- the true peak. A
    ``snapshot`` dict receives each layer's full ``(keys, values)`` at that moment (references: a press
    replaces the cache tensors rather than editing them).
    """
    stats = {"peak_bytes": 0}

    def after_attention(module: Any, args: Any, kwargs: dict, output: Any) -> None:
        stats["peak_bytes"] = max(stats["peak_bytes"], cache_bytes(cache))
        if snapshot is not None:
            layer = cache.layers[module.layer_idx]
            snapshot[module.layer_idx] = (layer.keys, layer.values)

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


@dataclass
class Continuation:
    """What decoding a continuation from a compressed prefill measured."""

    nll: float  # mean next-token NLL, nats per token
    fidelity_error: float | None  # mean relative attention-output error over the prefix (None if not asked)


def decode_continuation(
    model: Any, prefill: CompressedPrefill, continuation: torch.Tensor, *, fidelity: bool = False
) -> Continuation:
    """Decode ``continuation`` (B, m) one token at a time from ``prefill``: its NLL and attention fidelity.

    One token per step is what a serving engine does after compression, and it avoids multi-token causal
    masks over a cache whose layers hold different numbers of entries (transformers builds one mask for all
    layers). With ``fidelity=True`` (the prefill needs ``keep_full=True``) every decode query of every layer
    attends twice over the *prefix*: to all its keys (as the press saw them) and to the kept entries only;
    the error ``||o_kept - o_full|| / ||o_full||`` is averaged over layers, query heads, steps and batch.
    These are the future queries the compressed model really issues.
    """
    batch, steps = continuation.shape
    if fidelity and prefill.full is None:
        raise ValueError("fidelity=True needs a prefill made with compressed_prefill(..., keep_full=True)")
    prefill.restore_masks(model)
    errors: list[torch.Tensor] = []
    hooks = []
    if fidelity:
        kept_lengths = [layer.keys.shape[2] for layer in prefill.cache.layers]

        def measure(module: Any, args: Any, kwargs: dict) -> None:
            idx = module.layer_idx
            queries = post_rope_queries(module, kwargs["hidden_states"], kwargs["position_embeddings"])
            layer = prefill.cache.layers[idx]
            kept = (layer.keys[:, :, : kept_lengths[idx]], layer.values[:, :, : kept_lengths[idx]])
            errors.append(_attention_error(queries, prefill.full[idx], kept, prefill.masked[idx]))

        hooks = [
            layer.self_attn.register_forward_pre_hook(measure, with_kwargs=True)
            for layer in decoder_layers(model)
        ]
    logits = prefill.last_logits
    total = torch.zeros((), dtype=torch.float64)
    position = prefill.context
    try:
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
    finally:
        for hook in hooks:
            hook.remove()
    error = float(torch.stack(errors).mean()) if errors else None
    return Continuation(float(total) / (batch * steps), error)


def _attention_error(
    queries: torch.Tensor,
    full: tuple[torch.Tensor, torch.Tensor],
    kept: tuple[torch.Tensor, torch.Tensor],
    masked: Any,
) -> torch.Tensor:
    """Mean relative error of softmax attention over ``kept`` entries vs ``full`` ones (GQA-aware)."""
    from transformers.models.llama.modeling_llama import repeat_kv

    queries = queries.float()
    groups = queries.shape[1] // full[0].shape[1]
    scale = 1.0 / math.sqrt(queries.shape[-1])
    keys_full, values_full = (repeat_kv(t.float(), groups) for t in full)
    reference = torch.softmax(queries @ keys_full.transpose(-1, -2) * scale, -1) @ values_full
    keys, values = (repeat_kv(t.float(), groups) for t in kept)
    visible = repeat_kv(kept_mask(masked, kept[0])[..., None].float(), groups)[..., 0]
    logits = (queries @ keys.transpose(-1, -2) * scale).masked_fill(
        visible[:, :, None, :] == 0, float("-inf")
    )
    approx = torch.softmax(logits, -1) @ values
    return ((approx - reference).norm(dim=-1) / reference.norm(dim=-1).clamp_min(1e-12)).mean()


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
