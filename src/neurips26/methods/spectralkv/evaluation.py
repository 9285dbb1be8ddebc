"""SpectralKV's measurements of a compressed prefill: continuation decoding and the redundancy stress set.

* :func:`decode_continuation` -- mean next-token NLL of a continuation decoded token by token from the
  compressed cache (the PG-19 perplexity protocol, scaled down) and, for those *future* queries, the
  relative error of each layer's attention output over the kept prefix entries versus all of them.
* :func:`repeated_text_batch` -- the redundancy stress set: one held-out passage repeated, then its start.

The generic parts (prefill under a press, peak cache bytes, random windows) are in
:mod:`neurips26.methods.spectralkv.press_eval`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neurips26.methods.spectralkv.integration import post_rope_queries
from neurips26.methods.spectralkv.press_eval import CompressedPrefill, decoder_layers, kept_mask, text_batch

__all__ = ["Continuation", "decode_continuation", "repeated_text_batch"]


@dataclass
class Continuation:
    """What decoding a continuation from a compressed prefill measured."""

    nll: float  # mean next-token NLL, nats per token
    fidelity_error: float | None  # mean relative attention-output error over the prefix (None if not asked)
    predictions: torch.Tensor | None = None  # (B, m) greedy (argmax) prediction for each continuation token
    row_nll: np.ndarray | None = None  # (B,) mean NLL of each row over its weighted steps


def decode_continuation(
    model: Any,
    prefill: CompressedPrefill,
    continuation: torch.Tensor,
    *,
    fidelity: bool = False,
    weights: torch.Tensor | None = None,
    fidelity_stride: int = 1,
) -> Continuation:
    """Decode ``continuation`` (B, m) one token at a time from ``prefill``: its NLL and attention fidelity.

    One token per step is what a serving engine does after compression, and it avoids multi-token causal
    masks over a cache whose layers hold different numbers of entries (transformers builds one mask for all
    layers). With ``fidelity=True`` (the prefill needs ``keep_full=True``) every decode query of every layer
    attends twice over the *prefix*: to all its keys (as the press saw them) and to the kept entries only;
    the error ``||o_kept - o_full|| / ||o_full||`` is averaged over layers, query heads, steps and batch.
    These are the future queries the compressed model really issues.

    ``weights`` ``(B, m)`` (0 or 1) select the steps that count, for a batch of continuations padded to
    one length: the NLL and the fidelity error average over the weighted steps only (default: all).
    ``fidelity_stride=k`` measures the fidelity on every k-th decode step only (the first, the k+1-th, ...).
    ``predictions`` holds the argmax before each token is fed (teacher forcing; on an answer span, exact
    match of the argmax equals greedy decoding's exact match).
    """
    batch, steps = continuation.shape
    if weights is None:
        weights = torch.ones(batch, steps)
    if weights.shape != continuation.shape:
        raise ValueError(f"weights must have the continuation's shape {tuple(continuation.shape)}")
    weights = weights.double()
    if not isinstance(fidelity_stride, int) or fidelity_stride < 1:
        raise ValueError(f"fidelity_stride must be an integer >= 1, got {fidelity_stride!r}")
    if fidelity and prefill.full is None:
        raise ValueError("fidelity=True needs a prefill made with compressed_prefill(..., keep_full=True)")
    prefill.restore_masks(model)
    errors: list[torch.Tensor] = []
    hooks = []
    step = [0]
    if fidelity:
        kept_lengths = [layer.keys.shape[2] for layer in prefill.cache.layers]

        def measure(module: Any, args: Any, kwargs: dict) -> None:
            if (step[0] - 1) % fidelity_stride:
                return
            idx = module.layer_idx
            queries = post_rope_queries(module, kwargs["hidden_states"], kwargs["position_embeddings"])
            layer = prefill.cache.layers[idx]
            kept = (layer.keys[:, :, : kept_lengths[idx]], layer.values[:, :, : kept_lengths[idx]])
            row_error = _attention_error(queries, prefill.full[idx], kept, prefill.masked[idx])
            errors.append((row_error.double() * weights[:, step[0]]).sum())

        hooks = [
            layer.self_attn.register_forward_pre_hook(measure, with_kwargs=True)
            for layer in decoder_layers(model)
        ]
    logits = prefill.last_logits
    total = torch.zeros(batch, dtype=torch.float64)
    predictions = torch.empty_like(continuation)
    position = prefill.context
    try:
        with torch.no_grad():
            for t in range(steps):
                target = continuation[:, t]
                predictions[:, t] = logits.argmax(-1)
                nll = torch.nn.functional.cross_entropy(logits, target, reduction="none").double()
                total += nll * weights[:, t]
                step[0] = t + 1
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
    count = float(weights.sum())
    if count <= 0:
        raise ValueError("weights select no step")
    layers = len(prefill.cache.layers)
    # the decode queries of step t feed token t: weighted by the step they predict from (t + 1 < m)
    queried = float(weights[:, 1:][:, ::fidelity_stride].sum()) * layers
    error = float(torch.stack(errors).sum()) / queried if errors and queried > 0 else None
    per_row = (total / weights.sum(1).clamp_min(1)).numpy()
    return Continuation(float(total.sum()) / count, error, predictions, per_row)


def _attention_error(
    queries: torch.Tensor,
    full: tuple[torch.Tensor, torch.Tensor],
    kept: tuple[torch.Tensor, torch.Tensor],
    masked: Any,
) -> torch.Tensor:
    """``(B,)`` relative error of softmax attention over ``kept`` entries vs ``full`` ones (GQA-aware),
    averaged over query heads and queries."""
    batch, heads_q, steps, dim = queries.shape
    heads_kv = full[0].shape[1]
    # each KV head's query group in one matmul (no repeated copies of the keys and values)
    grouped = queries.float().reshape(batch, heads_kv, heads_q // heads_kv * steps, dim)
    scale = 1.0 / math.sqrt(dim)
    reference = torch.softmax(grouped @ full[0].float().transpose(-1, -2) * scale, -1) @ full[1].float()
    visible = kept_mask(masked, kept[0])  # (B, H_kv, m)
    logits = (grouped @ kept[0].float().transpose(-1, -2) * scale).masked_fill(
        ~visible[:, :, None, :], float("-inf")
    )
    approx = torch.softmax(logits, -1) @ kept[1].float()
    return ((approx - reference).norm(dim=-1) / reference.norm(dim=-1).clamp_min(1e-12)).mean(-1).mean(-1)


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
