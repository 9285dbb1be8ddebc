"""In-context retrieval probes written in the corpus's own style (Python source).

Three probe families make attention heads matter, which the KV-cache methods need:

* ``kv`` -- key->value bindings written as code. Lines ``    offset = 4821`` are spliced into a haystack of
  real stdlib source at line boundaries; at the end ``assert offset == `` must be completed with the bound
  value. Every binding is queried once (in random order).
* ``passkey`` -- passkey-in-haystack: ``# The pass key is 71432. Remember it. 71432 is the pass key.`` is
  hidden in the haystack, the end asks ``# What is the pass key? The pass key is `` -> ``71432``.
* ``mqar`` -- multi-query associative recall (Zoology, Arora et al. 2023) in code: many bindings
  ``    word = 37`` and, later, queries ``assert word == 37`` whose distance (in tokens) from their binding
  follows a power law, as in Zoology's ``multiquery_ar`` generator.

Every probe is built directly in token ids so its length is exact, and carries the answer spans
``(start, end)``: the model must predict ``ids[start:end]`` from ``ids[:start]``. Scoring by teacher-forced
argmax over a span equals greedy decoding's exact match on that span (the greedy path is the argmax path
whenever every earlier token of the span is right).
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "PROBE_KINDS",
    "Haystack",
    "ProbeSample",
    "key_pool",
    "make_kv_probe",
    "make_mqar_probe",
    "make_passkey_probe",
    "make_probe",
    "power_law_gaps",
]

PROBE_KINDS = ("kv", "passkey", "mqar")
# Keys must be free identifiers: no keywords, builtins or ``self``.
_RESERVED = (
    frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins)) | {"self", "cls"}
)


@dataclass
class ProbeSample:
    """One probe: token ids, the answer spans to predict, and its kind."""

    ids: list[int]
    spans: list[tuple[int, int]] = field(default_factory=list)
    kind: str = "text"

    def __len__(self) -> int:
        return len(self.ids)


class Haystack:
    """A token stream of corpus text that probes are spliced into, cut at line boundaries.

    Parameters
    ----------
    ids:
        The tokenized corpus (files joined by newlines).
    newline_mask:
        ``newline_mask[t]`` is True when token ``t`` ends with a newline; a probe line may start right
        after such a token.
    """

    def __init__(self, ids: np.ndarray, newline_mask: np.ndarray) -> None:
        if ids.ndim != 1 or len(ids) < 64:
            raise ValueError(f"haystack ids must be a 1-D array of >= 64 tokens, got shape {ids.shape}")
        self.ids = ids.astype(np.int64)
        self.line_starts = np.flatnonzero(newline_mask[self.ids[:-1]]) + 1

    def window(self, rng: np.random.Generator, n_tokens: int) -> list[int]:
        """A contiguous window of ``n_tokens`` starting at a line start (wrapping around)."""
        if n_tokens <= 0:
            return []
        start = int(self.line_starts[rng.integers(len(self.line_starts))]) if len(self.line_starts) else 0
        idx = (np.arange(n_tokens) + start) % len(self.ids)
        return self.ids[idx].tolist()

    def line_boundaries(self, window: Sequence[int], newline_mask: np.ndarray) -> np.ndarray:
        """Positions ``p`` in ``window`` where a new line starts (``window[p-1]`` ends with a newline)."""
        arr = np.asarray(window, dtype=np.int64)
        if len(arr) < 2:
            return np.array([0], dtype=np.int64)
        return np.concatenate([[0], np.flatnonzero(newline_mask[arr[:-1]]) + 1])


def key_pool(tokenizer: Any, max_keys: int = 512) -> list[str]:
    """Identifier words that are a single token when written after a space (``" offset"``).

    Keys that encode to one token keep the retrieval a one-token match, which a tiny model learns fast.
    """
    words = []
    for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]):
        if not token.startswith("Ġ"):
            continue
        word = token[1:]
        if len(word) >= 3 and word.isascii() and word.isalpha() and word.islower():
            if word in _RESERVED:
                continue
            words.append(word)
    if len(words) < 16:
        raise ValueError(f"tokenizer has only {len(words)} single-token identifier words; need >= 16")
    return words[:max_keys]


def power_law_gaps(rng: np.random.Generator, n: int, low: int, high: int, alpha: float = 1.0) -> np.ndarray:
    """``n`` integer gaps in ``[low, high]`` with ``P(g) ~ g^-alpha`` (Zoology's MQAR query placement)."""
    if not 1 <= low <= high:
        raise ValueError(f"need 1 <= low <= high, got low={low}, high={high}")
    support = np.arange(low, high + 1, dtype=np.float64)
    weights = support**-alpha
    return rng.choice(support.astype(np.int64), size=n, p=weights / weights.sum())


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def _digits(rng: np.random.Generator, n_digits: int, value_ok: Callable[[str], bool] | None = None) -> str:
    """A random ``n_digits``-digit number (no leading zero); redrawn until ``value_ok(value)`` holds, so a
    training split and a held-out split of the values can be kept disjoint."""
    for _ in range(10_000):
        first = str(rng.integers(1, 10))
        value = first + "".join(str(d) for d in rng.integers(0, 10, size=n_digits - 1))
        if value_ok is None or value_ok(value):
            return value
    raise ValueError(f"value_ok accepted none of 10,000 random {n_digits}-digit values")


def _splice(
    haystack: Haystack,
    newline_mask: np.ndarray,
    rng: np.random.Generator,
    pieces: list[list[int]],
    budget: int,
) -> list[int]:
    """Haystack window of ``budget`` tokens with ``pieces`` inserted at random line starts, in order."""
    window = haystack.window(rng, budget)
    bounds = haystack.line_boundaries(window, newline_mask)
    cuts = np.sort(rng.choice(bounds, size=len(pieces), replace=True))
    out: list[int] = []
    prev = 0
    for cut, piece in zip(cuts, pieces, strict=True):
        out.extend(window[prev:cut])
        out.extend(piece)
        prev = int(cut)
    out.extend(window[prev:])
    return out


def _append_queries(
    out: list[int], queries: list[tuple[list[int], list[int]]], spans: list[tuple[int, int]]
) -> None:
    for prompt, answer in queries:
        out.extend(prompt)
        spans.append((len(out), len(out) + len(answer)))
        out.extend(answer)


def make_kv_probe(
    tokenizer: Any,
    haystack: Haystack,
    newline_mask: np.ndarray,
    rng: np.random.Generator,
    length: int,
    n_bindings: int = 4,
    n_digits: int = 4,
    keys: Sequence[str] | None = None,
    value_ok: Callable[[str], bool] | None = None,
) -> ProbeSample:
    """Key->value bindings as code hidden in a haystack, every key queried at the end with ``assert``.

    ``keys`` (default :func:`key_pool`) and ``value_ok`` (default: any value) restrict the keys and values,
    e.g. to a held-out split disjoint from the training one."""
    keys = list(keys) if keys is not None else key_pool(tokenizer)
    chosen = [keys[i] for i in rng.choice(len(keys), size=n_bindings, replace=False)]
    values = [_digits(rng, n_digits, value_ok) for _ in chosen]
    bindings = [_encode(tokenizer, f"    {k} = {v}\n") for k, v in zip(chosen, values, strict=True)]
    order = rng.permutation(n_bindings)
    queries = [
        (_encode(tokenizer, f"assert {chosen[i]} =="), _encode(tokenizer, f" {values[i]}\n")) for i in order
    ]
    fixed = sum(map(len, bindings)) + sum(len(p) + len(a) for p, a in queries) + 1
    if fixed >= length:
        raise ValueError(f"length={length} is too short for {n_bindings} bindings ({fixed} tokens needed)")
    out = _splice(haystack, newline_mask, rng, bindings, length - fixed)
    out.extend(_encode(tokenizer, "\n"))
    spans: list[tuple[int, int]] = []
    _append_queries(out, queries, spans)
    return ProbeSample(out, _drop_newline_from_spans(tokenizer, out, spans), "kv")


def make_passkey_probe(
    tokenizer: Any,
    haystack: Haystack,
    newline_mask: np.ndarray,
    rng: np.random.Generator,
    length: int,
    n_digits: int = 5,
    value_ok: Callable[[str], bool] | None = None,
) -> ProbeSample:
    """Passkey-in-haystack (Mohtashami & Jaggi 2023) as a Python comment in stdlib source (``value_ok``
    restricts the pass keys, as in :func:`make_kv_probe`)."""
    key = _digits(rng, n_digits, value_ok)
    needle = _encode(tokenizer, f"# The pass key is {key}. Remember it. {key} is the pass key.\n")
    query = _encode(tokenizer, "\n# What is the pass key? The pass key is")
    answer = _encode(tokenizer, f" {key}.\n")
    fixed = len(needle) + len(query) + len(answer)
    if fixed >= length:
        raise ValueError(f"length={length} is too short for a passkey probe ({fixed} tokens needed)")
    out = _splice(haystack, newline_mask, rng, [needle], length - fixed)
    spans: list[tuple[int, int]] = []
    _append_queries(out, [(query, answer)], spans)
    return ProbeSample(out, _drop_newline_from_spans(tokenizer, out, spans), "passkey")


def make_mqar_probe(
    tokenizer: Any,
    haystack: Haystack,
    newline_mask: np.ndarray,
    rng: np.random.Generator,
    length: int,
    n_pairs: int = 16,
    n_digits: int = 2,
    alpha: float = 1.0,
    keys: Sequence[str] | None = None,
    value_ok: Callable[[str], bool] | None = None,
) -> ProbeSample:
    """Multi-query associative recall with power-law gaps between each binding and its query.

    Bindings ``    word = 37`` come first (each ~5 tokens); query ``i`` is placed ``g_i`` tokens after its
    binding with ``g_i ~ power law`` on ``[1, length/2]`` (Zoology's ``multiquery_ar``); haystack code fills
    the space in between.
    """
    keys = list(keys) if keys is not None else key_pool(tokenizer)
    chosen = [keys[i] for i in rng.choice(len(keys), size=n_pairs, replace=False)]
    values = [_digits(rng, n_digits, value_ok) for _ in chosen]
    bindings = [_encode(tokenizer, f"    {k} = {v}\n") for k, v in zip(chosen, values, strict=True)]
    queries = [
        (_encode(tokenizer, f"assert {k} =="), _encode(tokenizer, f" {v}\n"))
        for k, v in zip(chosen, values, strict=True)
    ]
    bind_end = np.cumsum([len(b) for b in bindings])
    fixed = int(bind_end[-1]) + sum(len(p) + len(a) for p, a in queries)
    free = length - fixed
    if free < n_pairs:
        raise ValueError(f"length={length} is too short for {n_pairs} MQAR pairs ({fixed} tokens needed)")
    gaps = power_law_gaps(rng, n_pairs, 1, max(1, free), alpha)
    targets = np.minimum(bind_end + gaps, bind_end[-1] + free)
    order = np.argsort(targets, kind="stable")
    out: list[int] = []
    for b in bindings:
        out.extend(b)
    filler = haystack.window(rng, free)
    # Queries go in at line starts of the filler so the code around them stays whole lines.
    starts = haystack.line_boundaries(filler, newline_mask)
    used = 0
    spans: list[tuple[int, int]] = []
    for i in order:
        want = int(targets[i] - bind_end[-1])  # filler tokens before this query
        snapped = starts[np.searchsorted(starts, want)] if want <= starts[-1] else len(filler)
        take = max(0, int(snapped) - used)
        out.extend(filler[used : used + take])
        used += take
        if out and not _ends_line(tokenizer, out[-1]):
            out.extend(_encode(tokenizer, "\n"))
        _append_queries(out, [queries[i]], spans)
    out.extend(filler[used:])
    out = out[:length]
    spans = [s for s in spans if s[1] <= length]
    return ProbeSample(out, _drop_newline_from_spans(tokenizer, out, spans), "mqar")


def _ends_line(tokenizer: Any, token_id: int) -> bool:
    return tokenizer.convert_ids_to_tokens(int(token_id)).endswith("Ċ")


def _drop_newline_from_spans(
    tokenizer: Any, ids: list[int], spans: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Score only the value tokens: the leading space and trailing newline/punctuation are not the answer."""
    out = []
    for start, end in spans:
        while end > start + 1 and not _has_digit(tokenizer.convert_ids_to_tokens(int(ids[end - 1]))):
            end -= 1
        while start < end - 1 and not _has_digit(tokenizer.convert_ids_to_tokens(int(ids[start]))):
            start += 1
        out.append((start, end))
    return out


def _has_digit(token: str) -> bool:
    return any(ch.isdigit() for ch in token)


def make_probe(
    kind: str,
    tokenizer: Any,
    haystack: Haystack,
    newline_mask: np.ndarray,
    rng: np.random.Generator,
    length: int,
    **kwargs: Any,
) -> ProbeSample:
    """Dispatch to the generator of ``kind`` (one of :data:`PROBE_KINDS`)."""
    makers = {"kv": make_kv_probe, "passkey": make_passkey_probe, "mqar": make_mqar_probe}
    if kind not in makers:
        raise ValueError(f"probe kind must be one of {PROBE_KINDS}, got {kind!r}")
    return makers[kind](tokenizer, haystack, newline_mask, rng, length, **kwargs)
