"""Every press of the ``real`` profile on one seed's real-text contexts, each context prefilled once.

For each context of :mod:`.real_tasks` the full-cache prefill is captured once (:mod:`.replay`); every
(system, keep ratio) replays its press on that capture and then scores, from its own compressed cache:

* retrieval -- every question of the context asked after it (one row per question, the compressed
  cache shared by the rows): exact match of the answer's teacher-forced argmax (equal to greedy exact
  match on the answer span), ``needle_acc`` (prose) and ``kv_code_acc`` (code);
* continuation -- the held-out real text that followed the context: ``heldout_ppl`` (perplexity of its
  tokens, teacher-forced) and ``greedy_agreement`` (share of its positions where the press's argmax
  equals the full cache's).

A suffix (question + answer, or the continuation) is scored in *one* forward pass over the compressed
cache rather than token by token (:func:`suffix_hidden`): layers a press left with fewer entries are
padded to the longest layer and the padding is masked through kvpress's own head-wise mask
(``masked_key_indices``, as AdaKV's evicted entries are), so one causal mask fits every layer. It
equals :func:`~neurips26.methods.spectralkv.evaluation.decode_continuation`'s token-by-token decoding
(tested), at a fraction of the cost on a 0.5B model, where each decode step reads every weight.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from neurips26.methods.spectralkv.press_eval import CompressedPrefill, decoder_layers

__all__ = ["REAL_METRICS", "evaluate_real_seed", "suffix_hidden"]

PressFactory = Callable[[], Any]
REAL_METRICS = {"needle_prose": "needle_acc", "kv_code": "kv_code_acc"}


def _padded_layer(
    keys: torch.Tensor, values: torch.Tensor, masked: Any, rows: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """One layer's kept entries for the suffix rows (``rows[r]``: the cache row of suffix row ``r``),
    zero-padded to ``length`` entries, and the head-wise mask of evicted and padded slots."""
    picked_k, picked_v = keys[rows], values[rows]
    batch, heads, kept, dim = picked_k.shape
    visible = torch.ones(batch, heads, length, dtype=torch.bool)
    if masked is not None:
        original = torch.ones(keys.shape[:3], dtype=torch.bool)
        original[masked] = False
        visible[:, :, :kept] = original[rows]
    visible[:, :, kept:] = False
    if length > kept:
        pad = picked_k.new_zeros(batch, heads, length - kept, dim)
        picked_k, picked_v = torch.cat([picked_k, pad], 2), torch.cat([picked_v, pad], 2)
    hidden = None if bool(visible.all()) else tuple(torch.nonzero(~visible, as_tuple=True))
    return picked_k, picked_v, hidden


def suffix_hidden(
    model: Any, prefill: CompressedPrefill, suffix: torch.Tensor, rows: torch.Tensor | None = None
) -> torch.Tensor:
    """``(R, S, hidden)`` final hidden states of ``suffix`` ``(R, S)`` fed after the compressed prefill in
    one pass (the LM head is left to the caller: :func:`_logits` on the positions it scores).

    ``rows[r]`` is the prefill row suffix row ``r`` continues (default: row r). Positions continue the
    original context (RoPE positions ``n, n+1, ...``) whatever the press kept. The prefill's cache is
    left untouched.
    """
    from transformers import DynamicCache

    if rows is None:
        rows = torch.arange(suffix.shape[0])
    layers = prefill.cache.layers
    length = max(layer.keys.shape[2] for layer in layers)
    cache = DynamicCache()
    masks = []
    for idx, (layer, masked) in enumerate(zip(layers, prefill.masked, strict=True)):
        keys, values, hidden = _padded_layer(layer.keys, layer.values, masked, rows, length)
        cache.update(keys, values, idx)
        masks.append(hidden)
    count, steps = suffix.shape
    modules = [layer.self_attn for layer in decoder_layers(model)]
    for module, hidden in zip(modules, masks, strict=True):
        module.masked_key_indices = hidden
    try:
        with torch.no_grad():
            out = model.model(
                input_ids=suffix,
                past_key_values=cache,
                cache_position=torch.arange(length, length + steps),
                position_ids=(prefill.context + torch.arange(steps)).expand(count, steps),
                use_cache=True,
            )
    finally:
        for module in modules:
            module.masked_key_indices = None
    return out.last_hidden_state


def _logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The LM head on the selected final hidden states only (a 152k-word head costs a quarter of the
    0.5B model's work per token)."""
    with torch.no_grad():
        return model.get_output_embeddings()(hidden).float()


def _score_questions(
    model: Any, prefill: CompressedPrefill, questions: list[tuple[list[int], list[int]]], pad: int
) -> list[bool]:
    """Exact match of each answer's teacher-forced argmax, every question a row over the shared cache."""
    seqs = [q + a for q, a in questions]
    width = max(len(s) for s in seqs) - 1  # the last answer token is predicted, never fed
    suffix = torch.full((len(seqs), width), pad, dtype=torch.long)
    for r, seq in enumerate(seqs):
        suffix[r, : len(seq) - 1] = torch.tensor(seq[:-1])
    hidden = suffix_hidden(model, prefill, suffix, torch.zeros(len(seqs), dtype=torch.long))
    hits = []
    for r, (question, answer) in enumerate(questions):
        span = slice(len(question) - 1, len(question) - 1 + len(answer))  # positions predicting the answer
        hits.append(bool((_logits(model, hidden[r, span]).argmax(-1) == torch.tensor(answer)).all()))
    return hits


def _continuation_argmax_nll(
    model: Any, prefill: CompressedPrefill, continuation: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token argmax and NLL of the continuation: its first token from the prefill's last logits,
    the others from one pass over the rest."""
    target = torch.tensor(continuation)
    rest = _logits(model, suffix_hidden(model, prefill, target[None, :-1])[0])
    logits = torch.cat([prefill.last_logits[:1], rest])
    nll = torch.nn.functional.cross_entropy(logits, target, reduction="none").double()
    return logits.argmax(-1), nll


def evaluate_real_seed(
    model: Any,
    tokenizer: Any,
    config: Any,
    presses: dict[tuple[str, float], tuple[PressFactory, bool]],
    seed: int,
) -> dict[tuple[str, float], dict[str, float]]:
    """Metrics of every ``(system, keep ratio)`` in ``presses`` on seed ``seed``'s real-text contexts.

    ``config`` is the experiment's :class:`~neurips26.methods.spectralkv.config.SpectralKVConfig`; its
    ``real`` field sizes the tasks. ``presses`` is :func:`.seed_eval.evaluate_seed`'s argument.
    """
    from neurips26.methods.spectralkv.ledger import ledger_from_cache
    from neurips26.methods.spectralkv.real_tasks import build_context
    from neurips26.methods.spectralkv.replay import capture_prefill, replay_press

    real = config.real
    model.set_attn_implementation("sdpa")
    rng = np.random.default_rng([seed, 20261205])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    hits: dict[tuple[str, float], dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    nll: dict[tuple[str, float], list[torch.Tensor]] = defaultdict(list)
    agree: dict[tuple[str, float], list[torch.Tensor]] = defaultdict(list)
    sums: dict[tuple[str, float], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for task in real.tasks:
        for _ in range(real.contexts):
            context = build_context(
                tokenizer,
                task,
                rng,
                context_tokens=real.context_tokens,
                needles=real.needles,
                continuation_tokens=real.continuation_tokens,
            )
            capture = capture_prefill(model, torch.tensor([context.prefix]))
            full = replay_press(model, capture)
            reference, reference_nll = _continuation_argmax_nll(model, full, context.continuation)
            full_hits: list[bool] | None = None  # the full cache is the same at every keep ratio
            for key, (factory, eager) in presses.items():
                press = factory()
                if press is None:
                    if full_hits is None:
                        full_hits = _score_questions(model, full, context.questions, pad)
                    sums[key]["press_s"].append(0.0)  # no press step
                    sums[key]["kept_fraction"].append(1.0)
                    hits[key][REAL_METRICS[task]].extend(full_hits)
                    nll[key].append(reference_nll)
                    agree[key].append(torch.ones(len(reference), dtype=torch.float64))
                    continue
                start = time.perf_counter()
                prefill = replay_press(model, capture, press, attentions=eager)
                sums[key]["press_s"].append(time.perf_counter() - start)
                ledger = ledger_from_cache(model, prefill.cache, capture.context, 1 - key[1], prefill.masked)
                sums[key]["kept_fraction"].append(ledger.kept_fraction)
                hits[key][REAL_METRICS[task]].extend(_score_questions(model, prefill, context.questions, pad))
                argmax, token_nll = _continuation_argmax_nll(model, prefill, context.continuation)
                nll[key].append(token_nll)
                agree[key].append((argmax == reference).double())
    results: dict[tuple[str, float], dict[str, float]] = {}
    for key in presses:
        out = {name: float(np.mean(values)) for name, values in sums[key].items()}
        out |= {name: float(np.mean(values)) for name, values in hits[key].items()}
        out["heldout_ppl"] = float(torch.exp(torch.cat(nll[key]).mean()))
        out["greedy_agreement"] = float(torch.cat(agree[key]).mean())
        results[key] = out
    return results
