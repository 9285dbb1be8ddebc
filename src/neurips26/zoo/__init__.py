"""Tiny language models trained here, loaded through the real ``transformers`` classes.

Nothing can be downloaded from a model hub, so the project trains its own small models on the CPython
standard-library source mixed with in-context retrieval probes (key->value bindings, passkey, MQAR), and
commits them under ``checkpoints/<name>/``. ``load(name)`` goes through ``from_pretrained`` on that local
directory, so code written against a tiny model runs unchanged on a real checkpoint path or hub id.

>>> from neurips26.zoo import load                                    # doctest: +SKIP
>>> model, tokenizer = load("tiny-llama")                             # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neurips26.zoo.specs import MODEL_SPECS, ModelSpec, TrainConfig, get_spec, known_names

__all__ = [
    "CHECKPOINT_ROOT",
    "MODEL_SPECS",
    "CheckpointError",
    "ModelSpec",
    "TrainConfig",
    "checkpoint_dir",
    "known_names",
    "list_models",
    "load",
    "train",
]

CHECKPOINT_ROOT = Path(__file__).parent / "checkpoints"
TOKENIZER_DIR = CHECKPOINT_ROOT / "tokenizer"  # the shared tokenizer (neurips26.zoo.tokenizer builds it)
_REQUIRED_FILES = ("config.json", "model.safetensors")


class CheckpointError(FileNotFoundError):
    """A zoo checkpoint is missing or unreadable; the message says how to rebuild it."""


def checkpoint_dir(name: str) -> Path:
    """Directory of the committed checkpoint of ``name`` (validates the name)."""
    get_spec(name)
    return CHECKPOINT_ROOT / name


def _rebuild_hint(name: str) -> str:
    return f"rebuild it with `neurips26 zoo train {name}` (or neurips26.zoo.train({name!r}))"


def load(name: str, *, path: str | Path | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """Load a zoo model and its tokenizer with ``AutoModelForCausalLM.from_pretrained``.

    Parameters
    ----------
    name:
        One of :func:`known_names` (``tiny-llama``, ``tiny-mla``, ``tiny-qwen3``).
    path:
        Checkpoint directory; default the committed one.
    dtype:
        Torch dtype of the returned model; default ``torch.float32`` (weights are stored in float16).

    Returns
    -------
    (model, tokenizer)
        The model in eval mode and a ``PreTrainedTokenizerFast``: the one in the checkpoint directory if
        it holds one, else the zoo's shared tokenizer (all zoo models share one vocabulary, stored once).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = Path(path) if path is not None else checkpoint_dir(name)
    missing = [f for f in _REQUIRED_FILES if not (directory / f).is_file()]
    if missing:
        raise CheckpointError(
            f"zoo checkpoint {name!r} at {str(directory)!r} is missing {', '.join(missing)}; "
            + _rebuild_hint(name)
        )
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a per-tensor "Loading weights" bar drowns experiment logs
    try:
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype or torch.float32)
        has_own = (directory / "tokenizer.json").is_file()
        tokenizer = AutoTokenizer.from_pretrained(str(directory if has_own else TOKENIZER_DIR))
    except Exception as exc:  # corrupt safetensors / json: say how to rebuild
        raise CheckpointError(
            f"zoo checkpoint {name!r} at {str(directory)!r} could not be loaded "
            f"({type(exc).__name__}: {exc}); " + _rebuild_hint(name)
        ) from exc
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    model.eval()
    return model, tokenizer


def train(
    name: str,
    *,
    output_dir: str | Path | None = None,
    save: bool = True,
    max_steps: int | None = None,
    corpus_max_files: int | None = None,
    log: Any = print,
    spec: ModelSpec | None = None,
    on_step: Any = None,
) -> tuple[Any, list[dict[str, float]]]:
    """Train ``name`` from scratch with its committed recipe (deterministic with one torch thread).

    ``output_dir`` defaults to the committed checkpoint directory; ``save=False`` writes nothing (tests).
    ``on_step(step, model)`` runs after every optimizer step (pilots measure probes while training).
    Returns ``(model, log_rows)``.
    """
    from neurips26.zoo.ctx import CTX_LAYOUTS, train_ctx_model
    from neurips26.zoo.training import train_model

    if spec is None and name in CTX_LAYOUTS:  # issue #20: trained from a written circuit, resumable
        model, rows, _ = train_ctx_model(name, output_dir=output_dir, max_steps=max_steps, log=log)
        return model, rows
    spec = spec or get_spec(name)
    out = None if not save else Path(output_dir) if output_dir is not None else checkpoint_dir(name)
    return train_model(
        spec, out, max_steps=max_steps, log=log, corpus_max_files=corpus_max_files, on_step=on_step
    )


def list_models() -> list[dict[str, Any]]:
    """One row per zoo model: name, architecture, whether a checkpoint exists, and its measured quality."""
    import json

    rows = []
    for name, spec in MODEL_SPECS.items():
        directory = CHECKPOINT_ROOT / name
        evaluation = directory / "evaluation.json"
        row: dict[str, Any] = {
            "name": name,
            "architecture": spec.architecture,
            "description": spec.description,
            "trained": all((directory / f).is_file() for f in _REQUIRED_FILES),
        }
        if evaluation.is_file():
            row["evaluation"] = json.loads(evaluation.read_text())
        rows.append(row)
    return rows
