"""Evaluation of KV-cache presses (kvpress-style hooks) on the zoo models.

Every function takes an optional ``press`` (anything used as ``with press(model): ...``; None is the full
cache) and measures what the compressed *prefill* cache does afterwards:

* :func:`compressed_prefill` -- prefill a batch of prompts under the press; the cache, the last logits and
  the peak cache bytes held during the prefill.
* :func:`track_cache_bytes` / :func:`cache_bytes` -- the KV bytes a cache holds, peak over a forward pass.
* :func:`kept_mask` and :func:`text_batch` -- which entries a head attends to; random held-out windows.

SpectralKV's own measurements (continuation decoding with attention fidelity, the redundancy stress set)
are in :mod:`neurips26.methods.spectralkv.evaluation`.

Head-wise presses that mask instead of dropping (kvpress ``AdaKVPress``) are handled through
``module.masked_key_indices``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "CompressedPrefill",
    "cache_bytes",
    "compressed_prefill",
    "decoder_layers",
    "kept_mask",
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
