"""``tiny-*-ctx``: zoo models trained from a hand-written induction circuit (issue #20, route 1).

A model is built from its :class:`~neurips26.zoo.specs.ModelSpec`, the circuit of
:mod:`neurips26.zoo.circuits` is written into its random weights, and it is trained (nothing frozen) on the
stdlib text mixed with key->value, passkey and MQAR records from the first step. Keys and values are split
by a hash into a training part and a held-out part, so evaluation probes never reuse a training key or
value. Training is resumable: the full state (weights, optimizer, data RNG, log) is saved every few
minutes to a run directory, and a rerun continues from it bit for bit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.data.probes import make_probe
from neurips26.zoo.circuits import CircuitLayout, circuit_report, install_circuit
from neurips26.zoo.specs import ModelSpec, TrainConfig
from neurips26.zoo.tokenizer import TOKENIZER_DIR, load_tokenizer
from neurips26.zoo.training import (
    CorpusTokens,
    _learning_rate,
    _optimizer,
    _weighted_loss,
    load_corpus_tokens,
    place_sample,
    plain_sample,
    save_checkpoint,
)

__all__ = [
    "CTX_LAYOUTS",
    "HELDOUT_FRACTION",
    "build_ctx_model",
    "ctx_batch",
    "is_heldout",
    "split_keys",
    "train_ctx",
    "train_ctx_model",
]

HELDOUT_FRACTION = 0.2

CTX_LAYOUTS: dict[str, CircuitLayout] = {
    "tiny-llama-ctx": CircuitLayout(token_dims=48, offsets=(1, 2, 3), match=3, induction_layer=1),
    "tiny-qwen3-ctx": CircuitLayout(token_dims=48, offsets=(1, 2, 3), match=3, induction_layer=1),
    "tiny-mla-ctx": CircuitLayout(token_dims=48, offsets=(1, 2, 3), match=3, induction_layer=1),
}


def is_heldout(item: str) -> bool:
    """True for the held-out share (:data:`HELDOUT_FRACTION`) of keys / values, by a SHA-256 of the text."""
    digest = hashlib.sha256(f"ctx-split:{item}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < HELDOUT_FRACTION


def _is_train(item: str) -> bool:
    return not is_heldout(item)


def split_keys(keys: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(train, heldout)`` keys, disjoint, each in the original order."""
    train = [k for k in keys if not is_heldout(k)]
    held = [k for k in keys if is_heldout(k)]
    if len(held) < 16 or len(train) < 16:
        raise ValueError(f"key split too small: {len(train)} train / {len(held)} held-out keys (need >= 16)")
    return train, held


def probe_settings(data: CorpusTokens, split: str) -> dict[str, Any]:
    """``keys`` and ``value_ok`` of one split, for :func:`neurips26.zoo.evaluation.retrieval_accuracy` and
    :func:`neurips26.data.probes.make_probe`."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    train, held = split_keys(data.keys)
    return (
        {"keys": train, "value_ok": _is_train} if split == "train" else {"keys": held, "value_ok": is_heldout}
    )


def ctx_batch(
    tokenizer: Any,
    data: CorpusTokens,
    rng: np.random.Generator,
    cfg: TrainConfig,
    seq_len: int,
    batch: int,
    mixture: dict[str, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Like :func:`neurips26.zoo.training.build_batch` (kinds ``text``, ``repeat``, ``kv``, ``passkey``,
    ``mqar``) but every probe uses training keys and values only. Returns ids, loss weights, kinds."""
    mixture = mixture or cfg.mixture
    kinds = list(mixture)
    unknown = set(kinds) - {"text", "repeat", "kv", "passkey", "mqar"}
    if unknown:
        raise ValueError(f"ctx mixture kinds must be text/repeat/kv/passkey/mqar, got {sorted(unknown)}")
    probs = np.array([mixture[k] for k in kinds], dtype=np.float64)
    probs /= probs.sum()
    settings = probe_settings(data, "train")
    ids = np.full((batch, seq_len), tokenizer.eos_token_id, dtype=np.int64)
    weights = np.ones((batch, seq_len), dtype=np.float32)
    chosen = []
    for b in range(batch):
        kind = kinds[int(rng.choice(len(kinds), p=probs))]
        sample = plain_sample(kind, data, rng, seq_len)
        if sample is None:
            kwargs: dict[str, Any] = {"value_ok": settings["value_ok"]}
            if kind == "kv":
                most = max(1, min(cfg.max_bindings, (seq_len - 1) // 24))  # a binding + query: <= 24 tokens
                kwargs.update(keys=settings["keys"], n_bindings=int(rng.integers(1, most + 1)))
            elif kind == "mqar":
                kwargs.update(keys=settings["keys"], n_pairs=int(min(32, max(4, seq_len // 32))))
            sample = make_probe(kind, tokenizer, data.haystack, data.newline_mask, rng, seq_len, **kwargs)
        place_sample(ids, weights, b, sample, tokenizer.eos_token_id, cfg.answer_weight)
        chosen.append(kind)
    return ids, weights, chosen


def build_ctx_model(spec: ModelSpec, tokenizer: Any, layout: CircuitLayout | None) -> tuple[Any, dict]:
    """The spec's ``transformers`` model with seeded random weights and (unless ``layout`` is None) the
    circuit written in; returns ``(model, circuit_info)``."""
    import torch
    import transformers

    torch.manual_seed(spec.train.seed)
    config = spec.build_config(len(tokenizer), tokenizer.eos_token_id)
    model = getattr(transformers, spec.architecture)(config).float()
    info = install_circuit(model, layout, seed=spec.train.seed) if layout is not None else {"heads": []}
    return model, info


def _save_state(
    path: Path, model: Any, optimizer: Any, rng: np.random.Generator, rows: list, info: dict
) -> None:
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "rng": rng.bit_generator.state,
            "rows": rows,
            "circuit": info,
        },
        tmp,
    )
    tmp.replace(path)


def train_ctx(
    spec: ModelSpec,
    output_dir: str | Path | None,
    *,
    layout: CircuitLayout | None,
    run_dir: str | Path | None = None,
    save_every_s: float = 180.0,
    stop_after_s: float | None = None,
    report_every: int = 50,
    max_steps: int | None = None,
    corpus_max_files: int | None = None,
    log: Callable[[str], None] | None = print,
) -> tuple[Any, list[dict[str, Any]], bool]:
    """Train ``spec`` from its circuit initialisation; returns ``(model, log_rows, finished)``.

    Parameters
    ----------
    spec:
        Architecture + recipe (``spec.train``: phases, mixture, optimizer).
    output_dir:
        Where the finished checkpoint goes (``save_pretrained`` in float16, ``training_log.json``,
        ``circuit.json``); ``None`` writes none.
    layout:
        The circuit (``None``: the same recipe from a plain random init, the control).
    run_dir:
        Resumable state (``state.pt``), saved every ``save_every_s`` seconds and when stopping; a rerun
        with the same ``run_dir`` continues where it stopped.
    stop_after_s:
        Stop (after saving the state) once this run has trained this long; ``finished`` is then False.
    report_every:
        Every this many steps, :func:`neurips26.zoo.circuits.circuit_report` is logged (do the written
        heads survive?).
    max_steps, corpus_max_files:
        Smoke runs: fewer steps / corpus files.
    """
    import torch

    cfg = spec.train
    tokenizer = load_tokenizer(TOKENIZER_DIR)
    data = load_corpus_tokens(tokenizer, "train", corpus_max_files)
    model, info = build_ctx_model(spec, tokenizer, layout)
    optimizer = _optimizer(model, cfg)
    rng = np.random.default_rng(cfg.seed)
    rows: list[dict[str, Any]] = []
    state_path = Path(run_dir) / "state.pt" if run_dir is not None else None
    if state_path is not None and state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        rng.bit_generator.state = state["rng"]
        rows, info = state["rows"], state["circuit"]
        if log:
            log(f"resumed from {state_path} at step {len(rows)}")
    elif state_path is not None:
        state_path.parent.mkdir(parents=True, exist_ok=True)
    if "reports" not in info:
        info["reports"] = [{"step": 0, **circuit_report(model, info)}] if info["heads"] else []
    limit = cfg.total_steps if max_steps is None else min(max_steps, cfg.total_steps)
    offset = rows[-1]["elapsed_s"] if rows else 0.0
    start = last_save = time.perf_counter()
    model.train()
    step, finished = 0, True
    for phase in cfg.phases:
        for _ in range(phase["steps"]):
            if step >= limit:
                break
            step += 1
            if step <= len(rows):
                continue  # done before the resume
            if stop_after_s is not None and time.perf_counter() - start > stop_after_s:
                finished = False
                break
            ids_np, w_np, _ = ctx_batch(
                tokenizer, data, rng, cfg, phase["seq_len"], phase["batch"], phase.get("mixture")
            )
            ids, weights = torch.from_numpy(ids_np), torch.from_numpy(w_np)
            lr = _learning_rate(step - 1, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss, acc, text_loss = _weighted_loss(model(input_ids=ids).logits, ids, weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            row = {
                "step": step,
                "seq_len": phase["seq_len"],
                "loss": loss.item(),
                "text_loss": text_loss.item(),
                "answer_acc": acc.item(),
                "grad_norm": grad_norm.item(),
                "lr": lr,
                "elapsed_s": offset + time.perf_counter() - start,
            }
            rows.append(row)
            if info["heads"] and (step % report_every == 0 or step == limit):
                model.eval()
                info["reports"].append({"step": step, **circuit_report(model, info)})
                model.train()
            if log is not None and (step <= 3 or step % 10 == 0 or step == limit):
                log(
                    f"step {step:4d}/{limit} T={phase['seq_len']:4d} loss {row['loss']:.4f} "
                    f"text {row['text_loss']:.3f} answer-acc {row['answer_acc']:.3f} lr {lr:.2e} "
                    f"{row['elapsed_s']:.0f}s"
                )
            if state_path is not None and time.perf_counter() - last_save > save_every_s:
                _save_state(state_path, model, optimizer, rng, rows, info)
                last_save = time.perf_counter()
        if not finished:
            break
    if state_path is not None:
        _save_state(state_path, model, optimizer, rng, rows, info)
    model.eval()
    if finished and output_dir is not None:
        out = Path(output_dir)
        save_checkpoint(model, tokenizer, spec, rows, out)
        (out / "circuit.json").write_text(json.dumps(_jsonable(info), indent=1))
    return model, rows, finished


def train_ctx_model(
    name: str,
    *,
    output_dir: str | Path | None = None,
    run_dir: str | Path | None = None,
    max_steps: int | None = None,
    stop_after_s: float | None = None,
    log: Callable[[str], None] | None = print,
) -> tuple[Any, list[dict[str, Any]], bool]:
    """Train the registered ``tiny-*-ctx`` model ``name`` (what ``neurips26 zoo train NAME`` runs).

    ``output_dir`` defaults to the committed checkpoint directory, ``run_dir`` (resumable state) to
    ``runs/zoo-ctx/NAME`` under the current directory.
    """
    from neurips26.zoo import checkpoint_dir
    from neurips26.zoo.specs import get_spec

    if name not in CTX_LAYOUTS:
        raise ValueError(f"{name!r} is not a circuit-initialised model; known: {', '.join(CTX_LAYOUTS)}")
    out = Path(output_dir) if output_dir is not None else checkpoint_dir(name)
    run = Path(run_dir) if run_dir is not None else Path("runs") / "zoo-ctx" / name
    return train_ctx(
        get_spec(name),
        out if max_steps is None else None,
        layout=CTX_LAYOUTS[name],
        run_dir=run,
        max_steps=max_steps,
        stop_after_s=stop_after_s,
        log=log,
    )


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
