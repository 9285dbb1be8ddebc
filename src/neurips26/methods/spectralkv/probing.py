"""Retrieval probes split into a compressed prefix and a decoded suffix, batched at one prefix length.

Two placements of the question (:data:`PLACEMENTS`):

* ``"distractor"`` -- the context (bindings or pass key in held-out code) is followed by a *distractor*
  span of unrelated held-out code (at least ``distractor`` tokens, more than the press's observation
  window) and only then by the question(s). The press compresses context + distractor, so its window
  holds distractor queries, not the question: the questions are queries that differ from the
  observation window. Every question of the probe is decoded after compression and scored
  (4 per key->value probe, 1 per passkey probe).
* ``"window"`` -- the usual setting: the prefix ends right before the last answer, so the last question
  is inside the observation window; only that answer is scored.

Probes are the zoo's (:func:`neurips26.zoo.evaluation.probe_samples`) with held-out keys and values
(:func:`neurips26.zoo.ctx.probe_settings`), so a model trained on the training split has never seen them.
Every prefix of a batch has the same length (a press compresses a batch at once); suffixes are padded
and a mask says which suffix tokens are real and which are scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["PLACEMENTS", "ProbeBatch", "probe_batch", "score_answers"]

PLACEMENTS = ("distractor", "window")
_QUESTION_MARKERS = {"kv": "assert", "passkey": "\n# What is the pass key? The pass key is"}


@dataclass
class ProbeBatch:
    """``B`` probes as a compressed prefix ``(B, P)`` and a teacher-forced suffix ``(B, S)``."""

    prefix: torch.Tensor
    suffix: torch.Tensor
    real: torch.Tensor  # (B, S) 1 where the suffix token is part of the probe (not padding)
    answers: list[list[tuple[int, int]]]  # per row: scored answer spans, as suffix positions

    @property
    def n_answers(self) -> int:
        return sum(len(spans) for spans in self.answers)


def _question_start(ids: list[int], first_answer: int, marker: list[int]) -> int:
    """Start of the last occurrence of ``marker`` before ``first_answer`` (the first question)."""
    width = len(marker)
    for i in range(first_answer - width, -1, -1):
        if ids[i : i + width] == marker:
            return i
    raise ValueError("the probe's question marker was not found before its first answer")


def probe_batch(
    tokenizer: Any,
    data: Any,
    kind: str,
    length: int,
    n: int,
    *,
    seed: int,
    placement: str = "distractor",
    distractor: int = 64,
) -> ProbeBatch:
    """``n`` held-out probes of ``kind`` (``"kv"`` or ``"passkey"``) with ``length`` context tokens.

    ``"distractor"``: prefix = context + held-out distractor code (>= ``distractor`` tokens, ending at a line
    end), ``length + distractor`` tokens in all; suffix = the questions and answers. ``"window"``: prefix =
    the probe up to its last answer (cut to the batch's shortest such prefix), suffix = the rest.
    """
    from neurips26.zoo.ctx import probe_settings
    from neurips26.zoo.evaluation import probe_samples

    if kind not in _QUESTION_MARKERS:
        raise ValueError(f"kind must be one of {sorted(_QUESTION_MARKERS)}, got {kind!r}")
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    settings = probe_settings(data, "heldout")
    if kind == "passkey":
        settings = {"value_ok": settings["value_ok"]}
    samples = probe_samples(tokenizer, kind, length, n, seed=seed, data=data, **settings)
    rows: list[tuple[list[int], list[int], list[tuple[int, int]]]] = []
    if placement == "distractor":
        if distractor < 1:
            raise ValueError(f"distractor must be >= 1, got {distractor}")
        marker = tokenizer.encode(_QUESTION_MARKERS[kind], add_special_tokens=False)
        newline = tokenizer.encode("\n", add_special_tokens=False)
        rng = np.random.default_rng([seed, length, 77])
        total = length + distractor
        for sample in samples:
            q0 = _question_start(sample.ids, sample.spans[0][0], marker)
            filler = data.haystack.window(rng, total - q0 - len(newline))
            prefix = list(sample.ids[:q0]) + list(filler) + newline
            rows.append((prefix, list(sample.ids[q0:]), [(s - q0, e - q0) for s, e in sample.spans]))
    else:
        cut = min(sample.spans[-1][0] for sample in samples)
        for sample in samples:
            start, end = sample.spans[-1]
            rows.append((list(sample.ids[:cut]), list(sample.ids[cut:]), [(start - cut, end - cut)]))
    width = max(len(suffix) for _, suffix, _ in rows)
    pad = int(tokenizer.eos_token_id or 0)
    suffix = torch.full((len(rows), width), pad, dtype=torch.long)
    real = torch.zeros(len(rows), width)
    for i, (_, tail, _) in enumerate(rows):
        suffix[i, : len(tail)] = torch.tensor(tail)
        real[i, : len(tail)] = 1
    prefix = torch.tensor([p for p, _, _ in rows], dtype=torch.long)
    return ProbeBatch(prefix, suffix, real, [spans for _, _, spans in rows])


def score_answers(batch: ProbeBatch, predictions: torch.Tensor) -> list[bool]:
    """Exact match of the argmax predictions ``(B, S)`` on every scored answer span."""
    hits = []
    for row, spans in enumerate(batch.answers):
        for start, end in spans:
            hits.append(bool((predictions[row, start:end] == batch.suffix[row, start:end]).all()))
    return hits
