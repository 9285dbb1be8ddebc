"""The zoo's shared tokenizer: byte-level BPE trained with ``tokenizers`` on the stdlib train split.

Digits are split one per token before byte-level BPE (as Llama does), so every number in a retrieval
probe is a sequence of digit tokens that a model can copy. The committed ``tokenizer.json`` (under
``checkpoints/tokenizer``) is the source of truth; :func:`train_tokenizer` rebuilds it deterministically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neurips26.data.text import load_stdlib_corpus

__all__ = ["EOS_TOKEN", "TOKENIZER_DIR", "load_tokenizer", "train_tokenizer"]

EOS_TOKEN = "<|endoftext|>"
TOKENIZER_DIR = Path(__file__).parent / "checkpoints" / "tokenizer"
DEFAULT_VOCAB_SIZE = 2048  # ours: the 2k-4k range; the smallest keeps the embedding cheap


def train_tokenizer(vocab_size: int = DEFAULT_VOCAB_SIZE, output_dir: str | Path | None = None) -> Any:
    """Train the byte-level BPE on the stdlib train split and save it as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if not 256 < vocab_size <= 65536:
        raise ValueError(f"vocab_size must be in (256, 65536], got {vocab_size!r}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(load_stdlib_corpus("train").texts(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN)
    fast.pad_token = EOS_TOKEN
    if output_dir is not None:
        fast.save_pretrained(str(output_dir))
    return fast


def load_tokenizer(path: str | Path | None = None) -> Any:
    """The committed tokenizer (or the one saved in ``path``)."""
    from transformers import AutoTokenizer

    directory = Path(path) if path is not None else TOKENIZER_DIR
    if not (directory / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"no tokenizer.json in {str(directory)!r}; rebuild it with `neurips26 zoo train tokenizer`"
        )
    return AutoTokenizer.from_pretrained(str(directory))
