"""Deterministic training of the zoo models: stdlib text mixed with in-context retrieval probes.

One function, :func:`train_model`, turns a :class:`~neurips26.zoo.specs.ModelSpec` into a checkpoint
directory (``config.json``, ``model.safetensors``, tokenizer files, ``training_log.json``). With one torch
thread and the same seed the per-step losses are bit-identical between runs, which a test checks
against the committed log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.data.probes import Haystack, ProbeSample, key_pool, make_probe
from neurips26.data.text import load_stdlib_corpus
from neurips26.zoo.specs import ModelSpec, TrainConfig
from neurips26.zoo.tokenizer import TOKENIZER_DIR, load_tokenizer

__all__ = ["CorpusTokens", "build_batch", "load_corpus_tokens", "newline_mask", "train_model"]


@dataclasses.dataclass
class CorpusTokens:
    """A tokenized split of the corpus plus what probe generators need about the vocabulary."""

    haystack: Haystack
    newline_mask: np.ndarray
    keys: list[str]


def newline_mask(tokenizer: Any) -> np.ndarray:
    """``mask[t]`` is True when token ``t`` ends with a newline (byte-level ``Ċ``)."""
    mask = np.zeros(len(tokenizer), dtype=bool)
    for token, idx in tokenizer.get_vocab().items():
        mask[idx] = token.endswith("Ċ")
    return mask


def _cache_dir() -> Path:
    from neurips26.core.files import user_cache_dir

    return user_cache_dir() / "zoo"


def load_corpus_tokens(tokenizer: Any, split: str = "train", max_files: int | None = None) -> CorpusTokens:
    """Tokenize one split of the stdlib corpus (cached on disk by tokenizer and file list)."""
    corpus = load_stdlib_corpus(split)
    files = corpus.files[:max_files] if max_files is not None else corpus.files
    digest = hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode())
    for f in files:
        digest.update(f.path.encode())
        digest.update(str(len(f.text)).encode())
    cache = _cache_dir() / f"{split}-{digest.hexdigest()[:16]}.npy"
    if cache.is_file():
        ids = np.load(cache)
    else:
        newline = tokenizer.encode("\n", add_special_tokens=False)
        encoded = tokenizer.backend_tokenizer.encode_batch([f.text for f in files], add_special_tokens=False)
        chunks = []
        for enc in encoded:
            chunks.append(np.asarray(enc.ids, dtype=np.int32))
            chunks.append(np.asarray(newline, dtype=np.int32))
        ids = np.concatenate(chunks)
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, ids)
        tmp.replace(cache)
    mask = newline_mask(tokenizer)
    return CorpusTokens(Haystack(ids, mask), mask, key_pool(tokenizer))


def _probe_kwargs(kind: str, seq_len: int, rng: np.random.Generator, cfg: TrainConfig) -> dict[str, Any]:
    if kind == "kv":
        most = max(1, min(cfg.max_bindings, seq_len // 40))
        return {"n_bindings": int(rng.integers(1, most + 1))}
    if kind == "mqar":
        return {"n_pairs": int(min(32, max(4, seq_len // 32)))}
    return {}


def build_batch(
    tokenizer: Any,
    data: CorpusTokens,
    rng: np.random.Generator,
    cfg: TrainConfig,
    seq_len: int,
    batch: int,
    mixture: dict[str, float] | None = None,
    *,
    randrep_alphabet: int | None = None,
    randrep_max_period: int | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``batch`` sequences of ``seq_len`` tokens drawn from the mixture; returns ids, target weights, kinds.

    ``weights[b, t]`` weighs the loss of predicting ``ids[b, t]``; probe answer tokens get
    ``cfg.answer_weight``, the rest 1. ``mixture`` (a phase's own) overrides ``cfg.mixture``;
    ``randrep_alphabet`` / ``randrep_max_period`` (a phase's own) shape the ``randrep`` sequences.
    """
    mixture = mixture or cfg.mixture
    kinds = list(mixture)
    probs = np.array([mixture[k] for k in kinds], dtype=np.float64)
    probs /= probs.sum()
    ids = np.zeros((batch, seq_len), dtype=np.int64)
    weights = np.ones((batch, seq_len), dtype=np.float32)
    chosen = []
    for b in range(batch):
        kind = kinds[int(rng.choice(len(kinds), p=probs))]
        sample = plain_sample(kind, data, rng, seq_len)
        if sample is None and kind == "randrep":
            sample = _random_repeat_sample(
                data, rng, seq_len, len(tokenizer), alphabet=randrep_alphabet, max_period=randrep_max_period
            )
        elif sample is None and kind == "randmqar":
            sample = random_mqar_sample(rng, seq_len, len(tokenizer))
        elif sample is None:
            kwargs = _probe_kwargs(kind, seq_len, rng, cfg)
            if kind != "passkey":
                kwargs["keys"] = data.keys
            sample = make_probe(kind, tokenizer, data.haystack, data.newline_mask, rng, seq_len, **kwargs)
        place_sample(ids, weights, b, sample, tokenizer.eos_token_id, cfg.answer_weight)
        chosen.append(kind)
    return ids, weights, chosen


def plain_sample(kind: str, data: CorpusTokens, rng: np.random.Generator, seq_len: int) -> ProbeSample | None:
    """The kinds every training mixture shares: a text window (``text``) or a chunk and its copy
    (``repeat``); ``None`` for any other kind (probes are the caller's)."""
    if kind == "text":
        return ProbeSample(data.haystack.window(rng, seq_len), [], "text")
    if kind == "repeat":
        return _repeat_sample(data, rng, seq_len)
    return None


def place_sample(
    ids: np.ndarray, weights: np.ndarray, row: int, sample: ProbeSample, eos_id: int, answer_weight: float
) -> None:
    """Write ``sample`` into batch row ``row`` (cut to the sequence length, eos-padded) and weigh the loss
    of its answer spans by ``answer_weight``."""
    seq_len = ids.shape[1]
    tokens = sample.ids[:seq_len]
    ids[row, : len(tokens)] = tokens
    ids[row, len(tokens) :] = eos_id
    for start, end in sample.spans:
        if end <= seq_len:
            weights[row, start:end] = answer_weight


def _repeat_sample(data: CorpusTokens, rng: np.random.Generator, seq_len: int) -> ProbeSample:
    """A code chunk followed by an exact copy of it: the cheapest signal for induction heads
    (Olsson et al. 2022, "In-context learning and induction heads"). The copy counts as the answer."""
    chunk = int(rng.integers(seq_len // 8, seq_len // 2 + 1))
    first = data.haystack.window(rng, chunk)
    gap = data.haystack.window(rng, seq_len - 2 * chunk)
    ids = first + gap + first
    return ProbeSample(ids, [(len(first) + len(gap) + 1, len(ids))], "repeat")


def randrep_alphabet_ids(alphabet: int, vocab_size: int) -> np.ndarray:
    """The fixed ``alphabet`` token ids (never the EOS id 0) a small-alphabet ``randrep`` draws from.

    A pure function of ``(alphabet, vocab_size)``, so training and evaluation agree on the set.
    """
    if not 2 <= alphabet < vocab_size:
        raise ValueError(f"randrep_alphabet must be in [2, vocab_size), got {alphabet} (vocab {vocab_size})")
    return np.sort(np.random.default_rng([alphabet, vocab_size]).permutation(vocab_size - 1)[:alphabet] + 1)


def _random_repeat_sample(
    data: CorpusTokens,
    rng: np.random.Generator,
    seq_len: int,
    vocab_size: int,
    *,
    alphabet: int | None = None,
    max_period: int | None = None,
) -> ProbeSample:
    """A chunk of uniformly random tokens repeated periodically over the whole sequence.

    Random tokens can only be predicted by copying from the previous period, so every token after the
    first period is an induction-head target. The period is log-uniform in ``[2, max_period]`` (default
    ``seq_len / 2``): short periods give the strong, local signal that grows previous-token and copying
    heads within a few hundred steps (a period-64 task alone leaves a 4-layer model on its loss plateau for
    > 300 steps); long periods carry the copy across the whole context.

    ``alphabet`` (optional) draws the chunk from a fixed set of that many tokens (without repetition while
    the period fits): each of their embeddings is trained every step, the lever that shortens the
    induction plateau in small-alphabet studies (Reddy 2023; Singh et al. 2024).
    """
    top = max(3, seq_len // 2) if max_period is None else max_period
    if not 2 <= top <= max(3, seq_len // 2):
        raise ValueError(f"randrep_max_period must be in [2, seq_len/2]; got {max_period}, seq_len={seq_len}")
    period = int(np.exp(rng.uniform(np.log(2), np.log(top))))
    if alphabet is None:
        chunk = rng.integers(1, vocab_size, size=period)
    else:
        ids = randrep_alphabet_ids(alphabet, vocab_size)
        pick = rng.permutation(alphabet)[:period] if period <= alphabet else rng.integers(0, alphabet, period)
        chunk = ids[pick]
    ids = np.resize(chunk, seq_len).tolist()
    return ProbeSample(ids, [(period + 1, seq_len)], "randrep")


def random_mqar_sample(rng: np.random.Generator, seq_len: int, vocab_size: int) -> ProbeSample:
    """Multi-query associative recall over random tokens (Zoology's ``multiquery_ar``, Arora et al. 2023).

    ``seq_len / 4`` distinct key tokens each bound to a value token (``k1 v1 k2 v2 ...``, first half), then
    every key queried once in random order with its value as the answer (second half). Keys and values come
    from two disjoint halves of the vocabulary (never the EOS id 0) and the query order is random, so no
    positional look-back pays: the only way to lower the loss on a value is to find the key's earlier
    occurrence by content and copy the token after it -- one-hop induction, the kv probe's first half.
    """
    pairs = seq_len // 4
    if pairs < 1 or vocab_size < 2 * pairs + 2:
        raise ValueError(
            f"randmqar needs seq_len >= 4 and vocab_size > seq_len / 2; got {seq_len}, {vocab_size}"
        )
    half = (vocab_size - 1) // 2
    keys = rng.choice(half, size=pairs, replace=False) + 1
    values = rng.integers(half + 1, vocab_size, size=pairs)
    order = rng.permutation(pairs)
    bindings = np.stack([keys, values], axis=1).reshape(-1)
    queries = np.stack([keys[order], values[order]], axis=1).reshape(-1)
    ids = np.concatenate([bindings, queries]).tolist()
    spans = [(2 * pairs + 2 * i + 1, 2 * pairs + 2 * i + 2) for i in range(pairs)]
    return ProbeSample(ids, spans, "randmqar")


def _learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up then cosine decay to ``min_lr_ratio`` of the peak."""
    total = cfg.total_steps
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return cfg.learning_rate * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def _weighted_loss(logits: Any, ids: Any, weights: Any) -> tuple[Any, Any, Any]:
    """Weighted next-token cross-entropy; also answer-token accuracy (argmax) for the log."""
    import torch

    pred = logits[:, :-1].float()
    target = ids[:, 1:]
    w = weights[:, 1:]
    ce = torch.nn.functional.cross_entropy(
        pred.reshape(-1, pred.shape[-1]), target.reshape(-1), reduction="none"
    )
    ce = ce.view_as(target)
    loss = (ce * w).sum() / w.sum()
    answer = w > 1
    with torch.no_grad():
        correct = (pred.argmax(-1) == target) & answer
        acc = correct.sum() / answer.sum().clamp(min=1)
        text_loss = (ce * (~answer)).sum() / (~answer).sum().clamp(min=1)
    return loss, acc, text_loss


def _build_model(spec: ModelSpec, tokenizer: Any, seed: int) -> Any:
    import torch
    import transformers

    torch.manual_seed(seed)
    config = spec.build_config(len(tokenizer), tokenizer.eos_token_id)
    model_cls = getattr(transformers, spec.architecture)
    model = model_cls(config)
    return model.float()


def _optimizer(model: Any, cfg: TrainConfig) -> Any:
    import torch

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and "embed" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), eps=1e-8)


def train_model(
    spec: ModelSpec,
    output_dir: str | Path | None,
    *,
    max_steps: int | None = None,
    log: Callable[[str], None] | None = print,
    corpus_max_files: int | None = None,
    on_step: Callable[[int, Any], None] | None = None,
) -> tuple[Any, list[dict[str, float]]]:
    """Train ``spec`` from scratch; save to ``output_dir`` (when given) and return ``(model, log_rows)``.

    Parameters
    ----------
    spec:
        The zoo entry (architecture + :class:`TrainConfig`).
    output_dir:
        Where to write the checkpoint; ``None`` keeps it in memory (tests).
    max_steps:
        Stop after this many steps (tests reproduce the first logged losses); ``None`` runs the recipe.
    corpus_max_files:
        Use only the first files of the train split (smoke tests); ``None`` uses all.
    on_step:
        Called as ``on_step(step, model)`` after every optimizer step (pilots measure probes while training);
        it must leave the model's weights alone and use its own random generator, so the training data
        and losses stay those of a run without it.
    """
    import torch

    cfg = spec.train
    tokenizer = load_tokenizer(TOKENIZER_DIR)
    data = load_corpus_tokens(tokenizer, "train", corpus_max_files)
    model = _build_model(spec, tokenizer, cfg.seed)
    model.train()
    optimizer = _optimizer(model, cfg)
    rng = np.random.default_rng(cfg.seed)
    rows: list[dict[str, float]] = []
    step = 0
    start = time.perf_counter()
    limit = cfg.total_steps if max_steps is None else min(max_steps, cfg.total_steps)
    for phase in cfg.phases:
        for _ in range(phase["steps"]):
            if step >= limit:
                break
            ids_np, w_np, _kinds = build_batch(
                tokenizer,
                data,
                rng,
                cfg,
                phase["seq_len"],
                phase["batch"],
                phase.get("mixture"),
                randrep_alphabet=phase.get("randrep_alphabet"),
                randrep_max_period=phase.get("randrep_max_period"),
            )
            ids = torch.from_numpy(ids_np)
            weights = torch.from_numpy(w_np)
            lr = _learning_rate(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            logits = model(input_ids=ids).logits
            loss, acc, text_loss = _weighted_loss(logits, ids, weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            step += 1
            row = {
                "step": step,
                "seq_len": phase["seq_len"],
                "loss": loss.item(),
                "text_loss": text_loss.item(),
                "answer_acc": acc.item(),
                "grad_norm": grad_norm.item(),
                "lr": lr,
                "elapsed_s": time.perf_counter() - start,
            }
            rows.append(row)
            if on_step is not None:
                on_step(step, model)
                model.train()
            if log is not None and (step <= 3 or step % 10 == 0 or step == limit):
                log(
                    f"step {step:4d}/{limit} T={phase['seq_len']:4d} loss {row['loss']:.4f} "
                    f"text {row['text_loss']:.3f} answer-acc {row['answer_acc']:.3f} "
                    f"lr {lr:.2e} {row['elapsed_s']:.0f}s"
                )
    model.eval()
    if output_dir is not None:
        save_checkpoint(model, tokenizer, spec, rows, Path(output_dir))
    return model, rows


def save_checkpoint(
    model: Any, tokenizer: Any, spec: ModelSpec, rows: list[dict[str, float]], out: Path
) -> None:
    """Write ``config.json`` + ``model.safetensors`` (float16) + tokenizer + ``training_log.json``."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    half = _clone_half(model)
    half.save_pretrained(str(out), safe_serialization=True)
    if Path(out).resolve().parent != TOKENIZER_DIR.resolve().parent:
        tokenizer.save_pretrained(str(out))  # outside the zoo a checkpoint carries its own tokenizer
    meta = {
        "name": spec.name,
        "architecture": spec.architecture,
        "train_config": dataclasses.asdict(spec.train),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "steps": len(rows),
        "wall_time_s": rows[-1]["elapsed_s"] if rows else 0.0,
        "log": rows,
    }
    (out / "training_log.json").write_text(json.dumps(meta, indent=1))


def _clone_half(model: Any) -> Any:
    import copy

    import torch

    clone = copy.deepcopy(model)
    return clone.to(torch.float16)
