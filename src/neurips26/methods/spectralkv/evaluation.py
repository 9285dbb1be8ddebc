"""SpectralKV's measurements of a compressed prefill: continuation decoding and the redundancy stress set.

* :func:`decode_continuation` -- mean next-token NLL of a continuation decoded token by token from the
  compressed cache (the PG-19 perplexity protocol, scaled down) and, for those *future* queries, the
  relative error of each layer's attention output over the kept prefix entries versus all of them.
* :func:`repeated_text_batch` -- the redundancy stress set: one held-out passage repeated, then its start.

The generic parts (prefill under a press, peak cache bytes, random windows) are in
:mod:`neurips26.zoo.press_eval`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neurips26.methods.spectralkv.integration import post_rope_queries
from neurips26.zoo.press_eval import CompressedPrefill, decoder_layers, kept_mask, text_batch

__all__ = ["Continuation", "decode_continuation", "repeated_text_batch"]


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
