"""Evaluation helpers shared by the methods that use the zoo models.

* :func:`heldout_perplexity` and :func:`unigram_perplexity` -- next-token perplexity on the held-out stdlib
  files, and the same tokens scored by a unigram model of the same tokenizer (the floor a model must beat).
* :func:`retrieval_accuracy` -- exact-match accuracy on the probes of :mod:`neurips26.data.probes` at a given
  context length. An optional ``context`` factory wraps every forward pass (e.g. a kvpress press), so the
  KV-cache methods score the same probes with a compressed cache.
* :func:`generation_agreement` -- greedy-decoding agreement between two models (or one model with and
  without a cache method).
* :func:`attention_entropy_profile` -- per-layer, per-head entropy of the attention rows.
* :func:`context_perplexity` -- perplexity of the same final tokens read with more or less context.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from neurips26.data.probes import PROBE_KINDS, ProbeSample, make_probe
from neurips26.zoo.training import CorpusTokens, load_corpus_tokens

__all__ = [
    "EVAL_PROBE_SETTINGS",
    "attention_entropy_profile",
    "context_perplexity",
    "copy_accuracy",
    "generation_agreement",
    "heldout_perplexity",
    "heldout_tokens",
    "probe_samples",
    "retrieval_accuracy",
    "score_probe",
    "unigram_perplexity",
]

ContextFactory = Callable[[], contextlib.AbstractContextManager[Any]]

# Evaluation probe settings (ours): 4 bindings for key->value, 16 MQAR pairs; chance is ~1e-4 (4-digit
# values), ~1e-5 (5-digit passkey) and 1/90 (2-digit MQAR values) per query.
EVAL_PROBE_SETTINGS: dict[str, dict[str, int]] = {
    "kv": {"n_bindings": 4},
    "passkey": {},
    "mqar": {"n_pairs": 16},
}
CHANCE = {"kv": 1 / 9000, "passkey": 1 / 90000, "mqar": 1 / 90}


def _no_context() -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()


def heldout_tokens(tokenizer: Any, max_files: int | None = None) -> CorpusTokens:
    """The tokenized held-out split (cached on disk)."""
    return load_corpus_tokens(tokenizer, "heldout", max_files)


def _windows(ids: np.ndarray, seq_len: int, n_tokens: int) -> np.ndarray:
    n_windows = max(1, min(len(ids) // seq_len, n_tokens // seq_len))
    return ids[: n_windows * seq_len].reshape(n_windows, seq_len)


def heldout_perplexity(
    model: Any,
    tokenizer: Any,
    *,
    seq_len: int = 512,
    n_tokens: int = 65_536,
    batch_size: int = 8,
    data: CorpusTokens | None = None,
) -> float:
    """Perplexity on the first ``n_tokens`` of the held-out split, cut into windows of ``seq_len``.

    ``ppl = exp(mean_t -log p(x_t | x_<t))`` over every predicted token of every window.
    """
    import torch

    if seq_len < 2 or n_tokens < seq_len:
        raise ValueError(
            f"need seq_len >= 2 and n_tokens >= seq_len, got seq_len={seq_len}, n_tokens={n_tokens}"
        )
    data = data or heldout_tokens(tokenizer)
    windows = torch.from_numpy(_windows(data.haystack.ids, seq_len, n_tokens))
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in windows.split(batch_size):
            logits = model(input_ids=batch).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum"
            )
            total += float(nll)
            count += batch[:, 1:].numel()
    return math.exp(total / count)


def unigram_perplexity(
    tokenizer: Any,
    *,
    seq_len: int = 512,
    n_tokens: int = 65_536,
    train: CorpusTokens | None = None,
    data: CorpusTokens | None = None,
) -> float:
    """Perplexity of an add-one-smoothed unigram model (train-split counts) on the tokens
    :func:`heldout_perplexity` scores."""
    train = train or load_corpus_tokens(tokenizer, "train")
    data = data or heldout_tokens(tokenizer)
    counts = np.bincount(train.haystack.ids, minlength=len(tokenizer)).astype(np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    targets = _windows(data.haystack.ids, seq_len, n_tokens)[:, 1:]
    return float(np.exp(-log_p[targets].mean()))


def probe_samples(
    tokenizer: Any,
    kind: str,
    length: int,
    n_samples: int,
    *,
    seed: int = 1234,
    data: CorpusTokens | None = None,
    **settings: Any,
) -> list[ProbeSample]:
    """``n_samples`` probes of ``kind`` at ``length`` tokens built on held-out haystack (deterministic)."""
    if kind not in PROBE_KINDS:
        raise ValueError(f"kind must be one of {PROBE_KINDS}, got {kind!r}")
    data = data or heldout_tokens(tokenizer)
    rng = np.random.default_rng([seed, length, PROBE_KINDS.index(kind)])
    kwargs = {**EVAL_PROBE_SETTINGS[kind], **settings}
    if kind != "passkey":
        kwargs.setdefault("keys", data.keys)
    return [
        make_probe(kind, tokenizer, data.haystack, data.newline_mask, rng, length, **kwargs)
        for _ in range(n_samples)
    ]


def score_probe(model: Any, sample: ProbeSample, context: ContextFactory | None = None) -> list[bool]:
    """Exact match per answer span (teacher-forced argmax == greedy decoding on the span)."""
    import torch

    ids = torch.tensor([sample.ids])
    with torch.no_grad(), (context or _no_context)():
        logits = model(input_ids=ids).logits[0]
    pred = logits.argmax(-1)
    return [bool((pred[start - 1 : end - 1] == ids[0, start:end]).all()) for start, end in sample.spans]


def score_probe_prefill(model: Any, sample: ProbeSample, context: ContextFactory | None = None) -> list[bool]:
    """Exact match of the *last* answer span by greedy decoding after a separate prefill.

    This is the path a KV-cache method sees: the context up to the final question is prefilled (and may be
    compressed by ``context``), then the answer is decoded token by token from the cache.
    """
    import torch

    start, end = sample.spans[-1]
    prompt = torch.tensor([sample.ids[:start]])
    with torch.no_grad(), (context or _no_context)():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=end - start,
            do_sample=False,
            pad_token_id=model.config.eos_token_id,
        )
    return [out[0, start:end].tolist() == sample.ids[start:end]]


def retrieval_accuracy(
    model: Any,
    tokenizer: Any,
    kind: str,
    length: int,
    *,
    n_samples: int = 32,
    seed: int = 1234,
    context: ContextFactory | None = None,
    data: CorpusTokens | None = None,
    decode: bool = False,
    **settings: Any,
) -> float:
    """Mean exact-match accuracy over every answer span of ``n_samples`` probes.

    ``decode=True`` scores only each probe's last span by prefill + greedy decoding (see
    :func:`score_probe_prefill`); the default scores every span in one teacher-forced pass.
    """
    scorer = score_probe_prefill if decode else score_probe
    hits: list[bool] = []
    for sample in probe_samples(tokenizer, kind, length, n_samples, seed=seed, data=data, **settings):
        hits.extend(scorer(model, sample, context))
    return float(np.mean(hits)) if hits else float("nan")


def copy_accuracy(
    model: Any,
    tokenizer: Any,
    length: int,
    *,
    chunk: int = 64,
    n_samples: int = 16,
    seed: int = 4321,
    data: CorpusTokens | None = None,
    context: ContextFactory | None = None,
) -> dict[str, float]:
    """Induction test: a held-out code chunk, filler code, then the same chunk again.

    Returns the next-token (argmax) accuracy on the second copy (``copy``), on the first copy (``first``, no
    in-context help) and their difference; a model with induction heads scores far higher on the copy.
    """
    import torch

    if not 2 <= chunk < length // 2:
        raise ValueError(f"chunk must be in [2, length/2), got chunk={chunk}, length={length}")
    data = data or heldout_tokens(tokenizer)
    rng = np.random.default_rng([seed, length, chunk])
    first_hits, copy_hits = [], []
    for _ in range(n_samples):
        piece = data.haystack.window(rng, chunk)
        filler = data.haystack.window(rng, length - 2 * chunk)
        ids = torch.tensor([piece + filler + piece])
        with torch.no_grad(), (context or _no_context)():
            pred = model(input_ids=ids).logits[0].argmax(-1)
        hit = (pred[:-1] == ids[0, 1:]).float()
        first_hits.append(float(hit[: chunk - 1].mean()))
        copy_hits.append(float(hit[length - chunk :].mean()))
    first, copy = float(np.mean(first_hits)), float(np.mean(copy_hits))
    return {"first": first, "copy": copy, "gain": copy - first}


def generation_agreement(
    model_a: Any,
    model_b: Any,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 32,
    context_a: ContextFactory | None = None,
    context_b: ContextFactory | None = None,
) -> dict[str, float]:
    """Greedy-decoding agreement of two models on the same prompts.

    Returns ``token_agreement`` (share of positions where the two continuations hold the same token),
    ``exact_match`` (share of prompts with identical continuations) and ``first_divergence`` (mean index of
    the first differing token; ``max_new_tokens`` when none differs).
    """
    import torch

    if not prompts:
        raise ValueError("prompts must hold at least one token sequence")
    same, exact, first = [], [], []
    for prompt in prompts:
        ids = torch.tensor([list(prompt)])
        outs = []
        for model, context in ((model_a, context_a), (model_b, context_b)):
            with torch.no_grad(), (context or _no_context)():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=max_new_tokens,
                    min_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=model.config.eos_token_id,
                )
            outs.append(out[0, ids.shape[1] :])
        eq = (outs[0] == outs[1]).numpy()
        same.append(eq.mean())
        exact.append(float(eq.all()))
        first.append(float(np.argmin(eq)) if not eq.all() else float(len(eq)))
    return {
        "token_agreement": float(np.mean(same)),
        "exact_match": float(np.mean(exact)),
        "first_divergence": float(np.mean(first)),
    }


def attention_entropy_profile(
    model: Any, input_ids: Any, *, last_queries: int | None = None, normalized: bool = False
) -> np.ndarray:
    """Mean entropy (nats) of each head's attention rows: an array ``[num_layers, num_heads]``.

    ``H = -sum_j a_ij log a_ij`` per query ``i``, averaged over the batch and over the queries (all of them,
    or the ``last_queries`` final ones, the observation window of SnapKV-style methods). Runs the model once
    with eager attention, which returns the attention weights. ``normalized=True`` divides each row's
    entropy by its maximum ``log(i + 1)`` (uniform attention over the ``i + 1`` visible keys), so rows of
    different lengths are comparable; the first query (entropy 0 of 0) is left out.
    """
    import torch

    ids = torch.as_tensor(input_ids)
    if ids.ndim == 1:
        ids = ids[None]
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            attentions = model(input_ids=ids, output_attentions=True).attentions
    finally:
        model.set_attn_implementation(previous)
    rows = []
    for attn in attentions:  # [batch, heads, queries, keys]
        a = attn.float().clamp_min(1e-30)
        entropy = -(a * a.log()).sum(-1)  # [batch, heads, queries]
        if normalized:
            visible = torch.arange(1, entropy.shape[-1] + 1, dtype=entropy.dtype)
            entropy = entropy[..., 1:] / visible[1:].log()
        if last_queries is not None:
            entropy = entropy[..., -last_queries:]
        rows.append(entropy.mean(dim=(0, 2)).numpy())
    return np.stack(rows)


def context_perplexity(
    model: Any,
    tokenizer: Any,
    *,
    contexts: Sequence[int] = (128, 512, 1024, 2048),
    window: int = 2048,
    tail: int = 100,
    n_windows: int = 32,
    data: CorpusTokens | None = None,
) -> dict[str, float]:
    """Perplexity of the last ``tail`` tokens of held-out windows, read with each amount of context.

    The held-out stream is cut into consecutive windows of ``window`` tokens (the first ``n_windows``); for a
    context ``c`` the model reads only the window's last ``c`` tokens and is scored on the last ``tail``
    predictions, so every context length scores the same tokens. A model that uses far context scores
    lower with more of it. Returns ``{str(c): perplexity}``.
    """
    import torch

    if not 1 <= tail < min(contexts) <= max(contexts) <= window:
        raise ValueError(f"need 1 <= tail < min(contexts) <= max(contexts) <= window, got {tail}, {contexts}")
    data = data or heldout_tokens(tokenizer)
    windows = torch.from_numpy(_windows(data.haystack.ids, window, n_windows * window))
    out = {}
    with torch.no_grad():
        for c in contexts:
            total = 0.0
            for row in windows:
                ids = row[window - c :][None]
                logits = model(input_ids=ids).logits[0, -tail - 1 : -1].float()
                total += float(torch.nn.functional.cross_entropy(logits, ids[0, -tail:], reduction="sum"))
            out[str(c)] = math.exp(total / (tail * len(windows)))
    return out
