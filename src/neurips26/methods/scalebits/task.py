"""ScaleBITS' evaluation task: the zoo's trained model, its token splits, and how a quantized model is
scored on them (perplexity, agreement with the full-precision model, held-out retrieval)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from neurips26.methods.scalebits.config import ScaleBitsExperimentConfig
from neurips26.methods.scalebits.integration import select_linears

__all__ = [
    "LanguageTask",
    "calibration_windows",
    "evaluate",
    "evaluation_windows",
    "load_task",
    "reference_predictions",
    "retrieval",
]


@dataclass
class LanguageTask:
    """A zoo model with its train and held-out token ids (and tokenizer, for retrieval probes)."""

    model: torch.nn.Module
    train_ids: torch.Tensor  # 1-D token ids
    heldout_ids: torch.Tensor
    tokenizer: Any  # the zoo tokenizer (retrieval probes)

    def calibration(self, n: int, length: int, seed: int) -> torch.Tensor:
        """``n`` random train windows of ``length`` tokens (:func:`calibration_windows`)."""
        return calibration_windows(self.train_ids, n, length, seed)


def load_task(config: ScaleBitsExperimentConfig) -> LanguageTask:
    """The zoo's trained ``config.model`` and its token splits.

    A model that does not load is an error naming the fix (no silent switch to another model), and so is
    a tile that does not divide its linear weights without ``method.pad``.
    """
    from neurips26.zoo import load
    from neurips26.zoo.evaluation import heldout_tokens, load_corpus_tokens

    try:
        model, tokenizer = load(config.model)
    except Exception as err:
        raise RuntimeError(
            f"scalebits: the zoo model {config.model!r} does not load ({err}); the experiment needs its "
            f"trained checkpoint: check `neurips26 zoo list` or rebuild it with `neurips26 zoo train "
            f"{config.model}`"
        ) from err
    train = torch.from_numpy(load_corpus_tokens(tokenizer, "train", None).haystack.ids).long()
    heldout = torch.from_numpy(heldout_tokens(tokenizer).haystack.ids).long()
    tile = config.method.tile
    for name, layer in select_linears(model, config.method.filter_fn).items():
        rows, cols = layer.weight.shape
        if not config.method.pad and (rows % tile[0] or cols % tile[1]):
            raise ValueError(
                f"scalebits: tile={tile} does not divide {name} ({rows}x{cols}) of {config.model!r}; "
                "set method.pad=true or a tile that divides every linear"
            )
    return LanguageTask(model.eval(), train, heldout, tokenizer)


def calibration_windows(ids: torch.Tensor, n: int, length: int, seed: int) -> torch.Tensor:
    """``n`` random windows of ``length`` tokens (the seed picks the calibration sample)."""
    generator = torch.Generator().manual_seed(1000 + seed)
    starts = torch.randint(0, len(ids) - length - 1, (n,), generator=generator)
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


def evaluation_windows(ids: torch.Tensor, config: Any) -> torch.Tensor:
    """The held-out token windows ``(n_windows, eval_length)`` every system is evaluated on
    (``sequence_length`` when the config has no ``eval_length``)."""
    length = getattr(config, "eval_length", None) or config.sequence_length
    n_windows = max(1, min(len(ids) // length, config.eval_tokens // length))
    return ids[: n_windows * length].reshape(n_windows, length)


def evaluate(
    model: torch.nn.Module, reference: torch.nn.Module | torch.Tensor, ids: torch.Tensor, config: Any
) -> dict:
    """Held-out perplexity and next-token top-1 agreement with the full-precision model.

    ``reference`` is the full-precision model or its precomputed top-1 predictions
    ``(n_windows, sequence_length - 1)`` on the same windows (see :func:`reference_predictions`).
    """
    windows = evaluation_windows(ids, config)
    total, agree, count = 0.0, 0, 0
    with torch.no_grad():
        for index, batch in zip(range(0, len(windows), 8), windows.split(8), strict=True):
            logits = model(input_ids=batch).logits[:, :-1].float()
            if isinstance(reference, torch.Tensor):
                predicted = reference[index : index + len(batch)]
            else:
                predicted = reference(input_ids=batch).logits[:, :-1].argmax(-1)
            total += float(
                torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum"
                )
            )
            agree += int((logits.argmax(-1) == predicted).sum())
            count += batch[:, 1:].numel()
    return {"perplexity": math.exp(total / count), "agreement": agree / count}


def retrieval(
    model: torch.nn.Module, task: LanguageTask, config: ScaleBitsExperimentConfig, seed: int
) -> dict[str, float]:
    """Held-out exact match of each of ``retrieval_kinds`` (key->value, passkey, MQAR) at
    ``retrieval_length`` tokens (keys and values the ctx models never saw in training; the
    first-generation models are at chance on them)."""
    from neurips26.zoo.ctx_cards import heldout_retrieval

    return {
        f"{kind}_accuracy": heldout_retrieval(
            model, task.tokenizer, kind, config.retrieval_length, config.retrieval_queries, seed=2026 + seed
        )["accuracy"]
        for kind in config.retrieval_kinds
    }


def reference_predictions(
    task: LanguageTask, config: ScaleBitsExperimentConfig
) -> tuple[torch.Tensor, float]:
    """The full-precision model's top-1 predictions and perplexity on the evaluation windows."""
    windows = evaluation_windows(task.heldout_ids, config)
    with torch.no_grad():
        predicted = torch.cat(
            [task.model(input_ids=batch).logits[:, :-1].argmax(-1) for batch in windows.split(8)]
        )
    perplexity = evaluate(task.model, predicted, task.heldout_ids, config)["perplexity"]
    return predicted, perplexity
