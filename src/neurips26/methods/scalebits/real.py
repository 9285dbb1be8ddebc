"""ScaleBITS on a real pretrained LM (issue #45): the task, its text and how a quantized model is scored.

The model is :func:`neurips26.zoo.real_lm.load_real` (Gemma 3 270M or Qwen2.5-Coder-0.5B): both are
dequantised Q4_K_M GGUF files, so "full precision" here means the dequantised GGUF weights (already on a
~4.5-bit grid), never the original bfloat16 checkpoint.

Text is what the interpreter ships (nothing is read outside the installed packages): English prose from the
language reference's topics (:mod:`.pydoc_text`) and Python source from the standard library
(:mod:`neurips26.data.text`), alternating. Both are split by a hash of each document's name, so the
calibration windows (train split) and the held-out windows (held-out split) never share a document.

Each window is one document's middle ``length`` tokens, BOS first when the tokenizer adds one (Gemma does:
without it the model is far off its training distribution). The calibration sample is drawn by a seed (the
experiment fixes it: ``calibration_seed``); held-out context set ``k`` is windows ``k n .. (k + 1) n - 1``
of a fixed document order, so the context sets of different seeds are disjoint documents.

Scoring: perplexity and next-token top-1 agreement with the full-precision model on the last ``scored``
positions of each window (``logits_to_keep``: every scored token sees at least ``length - scored`` tokens
of context, and the output head -- 262k words on Gemma, the costliest layer -- runs only where scored).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from neurips26.data.text import CorpusFile
from neurips26.methods.scalebits.config import REAL_MODELS

__all__ = [
    "REAL_MODELS",
    "RealTextTask",
    "document_windows",
    "interleaved_documents",
    "load_real_task",
    "score_windows",
]


def _hashed_order(files: Iterable[CorpusFile], salt: str) -> list[CorpusFile]:
    """A fixed pseudo-random order of the documents (SHA-256 of ``salt:path``): no file order, no RNG."""
    return sorted(files, key=lambda f: hashlib.sha256(f"{salt}:{f.path}".encode()).hexdigest())


def interleaved_documents(
    split: str,
    salt: str = "",
    *,
    prose: Iterable[CorpusFile] | None = None,
    code: Iterable[CorpusFile] | None = None,
) -> Iterator[CorpusFile]:
    """Prose and code documents of ``split``, alternating (prose first), each kind in a hashed order.

    ``prose`` / ``code`` default to the pydoc topics and the stdlib source of ``split``; tests pass their own.
    """
    if prose is None:
        from neurips26.methods.scalebits.pydoc_text import load_pydoc_topics

        prose = load_pydoc_topics(split).files
    if code is None:
        from neurips26.data.text import load_stdlib_corpus

        code = load_stdlib_corpus(split).files
    pairs = itertools.zip_longest(_hashed_order(prose, salt), _hashed_order(code, salt))
    return (doc for pair in pairs for doc in pair if doc is not None)


def document_windows(
    documents: Iterable[CorpusFile],
    tokenize: Callable[[str], list[int]],
    length: int,
    count: int,
    bos: int | None,
) -> torch.Tensor:
    """``(count, length)`` token ids: one window per document, its middle, BOS first when ``bos`` is set.

    Documents shorter than a window are skipped; fewer than ``count`` long enough is an error naming both
    numbers (documents are tokenized one by one, only as many as needed).
    """
    if length < 2 or count < 1:
        raise ValueError(f"length must be >= 2 and count >= 1, got length={length}, count={count}")
    body = length - (bos is not None)
    rows: list[list[int]] = []
    for document in documents:
        ids = tokenize(document.text)
        if len(ids) < body:
            continue
        start = (len(ids) - body) // 2
        rows.append(([bos] if bos is not None else []) + list(ids[start : start + body]))
        if len(rows) == count:
            return torch.tensor(rows, dtype=torch.long)
    raise ValueError(f"only {len(rows)} documents hold a {length}-token window; {count} were asked for")


def _logits_and_targets(
    model: torch.nn.Module, window: torch.Tensor, scored: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits predicting the last ``scored`` tokens of ``window (length,)`` and those tokens."""
    logits = model(input_ids=window[None], logits_to_keep=scored + 1).logits[0, :-1].float()
    return logits, window[-scored:]


def score_windows(
    model: torch.nn.Module, windows: torch.Tensor, scored: int, reference: torch.Tensor | None = None
) -> tuple[dict[str, float], torch.Tensor]:
    """Perplexity (and, given the reference's ``(n, scored)`` top-1 predictions, agreement) on the last
    ``scored`` positions of each window; also returns this model's own ``(n, scored)`` predictions.

    One window per forward bounds the logits' memory (``scored x vocabulary`` floats).
    """
    if not 1 <= scored < windows.shape[1]:
        raise ValueError(
            f"scored must lie in [1, {windows.shape[1] - 1}] for windows of {windows.shape[1]}, got {scored}"
        )
    total, predictions = 0.0, []
    with torch.no_grad():
        for window in windows:
            logits, targets = _logits_and_targets(model, window, scored)
            total += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
            predictions.append(logits.argmax(-1))
    predicted = torch.stack(predictions)
    metrics = {"perplexity": math.exp(total / predicted.numel())}
    if reference is not None:
        metrics["agreement"] = float((predicted == reference).float().mean())
    return metrics, predicted


@dataclass
class RealTextTask:
    """A real LM, its tokenizer and the text it is calibrated and scored on (held-out sets built lazily)."""

    model: torch.nn.Module
    tokenizer: Any
    name: str
    documents: Callable[[str, str], Iterable[CorpusFile]] = interleaved_documents
    _heldout: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    @property
    def bos(self) -> int | None:
        """The BOS id when the tokenizer puts one first (Gemma), else None (Qwen)."""
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None and self.tokenizer("x")["input_ids"][:1] == [bos] else None

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def calibration(self, n: int, length: int, seed: int) -> torch.Tensor:
        """``n`` train-split windows of ``length`` tokens; the seed salts the document order."""
        return document_windows(
            self.documents("train", f"calibration-{seed}"), self.tokenize, length, n, self.bos
        )

    def context_set(self, seed: int, n: int, length: int) -> torch.Tensor:
        """Held-out context set ``seed``: ``n`` windows from documents no other seed's set uses."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        key = (n, length)
        if self._heldout.get(key) is None or len(self._heldout[key]) < (seed + 1) * n:
            self._heldout[key] = document_windows(
                self.documents("heldout", "heldout"), self.tokenize, length, (seed + 1) * n, self.bos
            )
        return self._heldout[key][seed * n : (seed + 1) * n]


def load_real_task(name: str) -> RealTextTask:
    """The real model ``name`` from the user cache (``zoo.real_lm.load_real``, hashes checked)."""
    from neurips26.zoo.real_lm import load_real

    model, tokenizer = load_real(name, verify=True)
    return RealTextTask(model, tokenizer, name)
