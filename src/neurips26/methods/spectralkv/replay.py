"""One prefill, many presses: capture a model's full prefill once and replay any kvpress press on it.

A kvpress press compresses the cache in a forward hook *after* each attention layer has run; it never
changes the prefill's hidden states (every layer attends over the full cache during the prefill). So the
prefill's forward pass is the same for every press, and only the press's own step differs. Comparing many
presses (and keep ratios) on the same data therefore needs the forward pass once:

* :func:`capture_prefill` runs the model once with a plain cache and keeps, per attention layer, exactly
  what a press's hook receives (the layer's input ``hidden_states``, ``position_embeddings`` and its full
  keys and values) plus the last position's logits;
* :func:`replay_press` rebuilds a fresh cache layer by layer from the capture and calls the press's own
  ``forward_hook`` after each layer, as ``with press(model): model(ids, past_key_values=cache)`` does. The
  result is a :class:`~neurips26.methods.spectralkv.press_eval.CompressedPrefill` equal to
  :func:`~neurips26.methods.spectralkv.press_eval.compressed_prefill`'s (tested against it press by
  press), including
  the peak cache bytes (measured after each layer is written and before its press runs).

Presses that need the attention matrix (H2O's ``ObservedAttentionPress``) get it computed from the
captured hidden states (the eager softmax, causal).

:func:`kept_positions` recovers which prefix positions a compressed cache kept (by matching kept keys to
the full ones), and :func:`kept_jaccard` the overlap of two presses' kept sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from neurips26.methods.spectralkv.press_eval import CompressedPrefill, cache_bytes, decoder_layers

__all__ = ["PrefillCapture", "capture_prefill", "kept_jaccard", "kept_positions", "replay_press"]


@dataclass
class PrefillCapture:
    """What every press's hook sees during the prefill of a ``(B, n)`` batch, per attention layer."""

    hidden_states: list[torch.Tensor]  # (B, n, hidden) input of each attention layer
    position_embeddings: list[tuple[torch.Tensor, torch.Tensor]]
    keys: list[torch.Tensor]  # (B, H_kv, n, d) full, post-RoPE
    values: list[torch.Tensor]
    last_logits: torch.Tensor  # (B, vocab) logits of the last prefix position
    context: int

    @property
    def full(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(zip(self.keys, self.values, strict=True))


def capture_prefill(model: Any, ids: torch.Tensor) -> PrefillCapture:
    """Run the full-cache prefill of ``ids`` ``(B, n)`` once and keep what a press's hook would see."""
    from transformers import DynamicCache

    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be (batch, n >= 2), got {tuple(ids.shape)}")
    layers = decoder_layers(model)
    seen: dict[int, tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]] = {}

    def grab(module: Any, args: Any, kwargs: dict, output: Any) -> None:
        seen[module.layer_idx] = (kwargs["hidden_states"], kwargs["position_embeddings"])

    for layer in layers:
        layer.self_attn.masked_key_indices = None
    hooks = [layer.self_attn.register_forward_hook(grab, with_kwargs=True) for layer in layers]
    cache = DynamicCache()
    try:
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    finally:
        for hook in hooks:
            hook.remove()
    order = range(len(layers))
    return PrefillCapture(
        hidden_states=[seen[i][0] for i in order],
        position_embeddings=[seen[i][1] for i in order],
        keys=[cache.layers[i].keys for i in order],
        values=[cache.layers[i].values for i in order],
        last_logits=out.logits[:, -1].float(),
        context=ids.shape[1],
    )


def _eager_attention(module: Any, hidden: torch.Tensor, keys: torch.Tensor, pe: Any) -> torch.Tensor:
    """``(B, H_q, n, n)`` causal softmax attention of the layer (what eager attention returns)."""
    from transformers.models.llama.modeling_llama import repeat_kv

    from neurips26.methods.spectralkv.integration import post_rope_queries

    queries = post_rope_queries(module, hidden, pe)
    keys = repeat_kv(keys, queries.shape[1] // keys.shape[1])
    logits = queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    n = logits.shape[-1]
    logits.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=logits.device).triu(1), float("-inf"))
    return torch.softmax(logits.float(), dim=-1).to(queries.dtype)


def replay_press(
    model: Any, capture: PrefillCapture, press: Any = None, *, attentions: bool = False
) -> CompressedPrefill:
    """The compressed prefill ``press`` leaves on the captured batch (``None``: the full cache).

    ``attentions=True`` hands each hook the layer's attention matrix (presses built for eager attention).
    The returned prefill keeps the full keys and values (``full``) for the fidelity measurements.
    """
    from transformers import DynamicCache

    layers = decoder_layers(model)
    for layer in layers:  # a head-wise press of an earlier prefill must not leak its mask
        layer.self_attn.masked_key_indices = None
    if press is not None:
        press.post_init_from_model(model)
    cache = DynamicCache()
    n = capture.context
    position = torch.arange(n)
    peak = 0
    with torch.no_grad():
        for idx, layer in enumerate(layers):
            cache.update(capture.keys[idx], capture.values[idx], idx)
            peak = max(peak, cache_bytes(cache))
            if press is None:
                continue
            module = layer.self_attn
            hidden, pe = capture.hidden_states[idx], capture.position_embeddings[idx]
            weights = _eager_attention(module, hidden, capture.keys[idx], pe) if attentions else None
            kwargs = {
                "hidden_states": hidden,
                "past_key_values": cache,
                "cache_position": position,
                "position_embeddings": pe,
                "attention_mask": None,
            }
            press.forward_hook(module, (), kwargs, (None, weights))
    masked = [getattr(layer.self_attn, "masked_key_indices", None) for layer in layers]
    return CompressedPrefill(cache, capture.last_logits, peak, n, masked, capture.full)


def kept_positions(full_keys: torch.Tensor, kept_keys: torch.Tensor, masked: Any = None) -> torch.Tensor:
    """``(B, H, n)`` bool: the prefix positions whose key a compressed layer kept.

    A press gathers kept entries without changing them, so each kept key equals one full key exactly; it is
    found by the nearest full key (squared distance, exact match checked). ``masked`` (head-wise presses'
    ``masked_key_indices``) marks kept slots a head does not attend to.
    """
    from neurips26.methods.spectralkv.press_eval import kept_mask

    full, kept = full_keys.float(), kept_keys.float()
    distance = (
        kept.pow(2).sum(-1, keepdim=True)
        - 2 * kept @ full.transpose(-1, -2)
        + full.pow(2).sum(-1).unsqueeze(-2)
    )  # (B, H, m, n)
    best, index = distance.min(-1)
    scale = full.pow(2).sum(-1).amax(-1, keepdim=True).clamp_min(1e-12)
    if bool((best > 1e-4 * scale).any()):
        raise ValueError("a kept key matches no full key: the cache was not compressed by gathering")
    out = torch.zeros(full.shape[:3], dtype=torch.bool, device=full.device)
    attended = kept_mask(masked, kept_keys).to(full.device)
    out.scatter_(-1, index, attended)
    return out


def kept_jaccard(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean over (batch, head) rows of ``|A & B| / |A | B|`` for two ``(..., n)`` kept-position masks."""
    inter = (a & b).sum(-1).double()
    union = (a | b).sum(-1).double().clamp_min(1)
    return float((inter / union).mean())
