"""Measure a zoo checkpoint and write its ``evaluation.json``, ``loss_curve.png`` and ``MODEL_CARD.md``."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.data.probes import PROBE_KINDS
from neurips26.zoo import checkpoint_dir, load
from neurips26.zoo.evaluation import (
    CHANCE,
    EVAL_PROBE_SETTINGS,
    attention_entropy_profile,
    copy_accuracy,
    heldout_perplexity,
    heldout_tokens,
    probe_samples,
    retrieval_accuracy,
    unigram_perplexity,
)
from neurips26.zoo.specs import get_spec
from neurips26.zoo.training import load_corpus_tokens

__all__ = ["evaluate_checkpoint", "write_model_card"]

EVAL_LENGTHS = (512, 1024, 2048)


def evaluate_checkpoint(name: str, *, n_samples: int = 32, path: str | Path | None = None) -> dict[str, Any]:
    """Every measurement the model card reports (a few minutes on one thread with ``n_samples=32``)."""
    start = time.perf_counter()
    model, tokenizer = load(name, path=path)
    held = heldout_tokens(tokenizer)
    result: dict[str, Any] = {
        "name": name,
        "heldout_perplexity": heldout_perplexity(model, tokenizer, data=held),
        "unigram_perplexity": unigram_perplexity(tokenizer, train=load_corpus_tokens(tokenizer), data=held),
        "perplexity_setting": "first 65,536 held-out tokens, windows of 512",
        "n_samples": n_samples,
        "retrieval": {},
        "chance": CHANCE,
        "probe_settings": EVAL_PROBE_SETTINGS,
    }
    for kind in PROBE_KINDS:
        result["retrieval"][kind] = {
            str(length): retrieval_accuracy(model, tokenizer, kind, length, n_samples=n_samples, data=held)
            for length in EVAL_LENGTHS
        }
    result["copy"] = {
        str(length): copy_accuracy(model, tokenizer, length, n_samples=min(n_samples, 16), data=held)
        for length in EVAL_LENGTHS
    }
    result["passkey_decoded_2048"] = retrieval_accuracy(
        model, tokenizer, "passkey", 2048, n_samples=min(n_samples, 16), data=held, decode=True
    )
    entropy_inputs = [s.ids for s in probe_samples(tokenizer, "kv", 1024, 4, seed=99, data=held)]
    entropy_inputs += [held.haystack.ids[i * 1024 : (i + 1) * 1024].tolist() for i in range(4)]
    ids = np.asarray(entropy_inputs)
    result["attention_entropy"] = attention_entropy_profile(model, ids).round(4).tolist()
    result["attention_entropy_normalized"] = (
        attention_entropy_profile(model, ids, normalized=True).round(4).tolist()
    )
    result["attention_entropy_last32"] = (
        attention_entropy_profile(model, ids, last_queries=32).round(4).tolist()
    )
    result["n_parameters"] = int(sum(p.numel() for p in model.parameters()))
    result["eval_wall_time_s"] = time.perf_counter() - start
    return result


def _loss_curve_png(log: list[dict[str, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in log]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].plot(steps, [r["text_loss"] for r in log], lw=0.8, label="non-answer tokens")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("cross-entropy (nats)")
    ax[0].legend()
    ax[1].plot(steps, [r["answer_acc"] for r in log], lw=0.8, color="C1")
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("answer-token accuracy (train batch)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def _quality_bar(ev: dict[str, Any]) -> str:
    """The issue's bar: >= 90% on key->value and passkey at 2k, MQAR above chance, ppl far below unigram."""
    r = ev["retrieval"]
    checks = [
        (f"key->value at 2048 >= 0.90 (measured {r['kv']['2048']:.3f})", r["kv"]["2048"] >= 0.9),
        (f"passkey at 2048 >= 0.90 (measured {r['passkey']['2048']:.3f})", r["passkey"]["2048"] >= 0.9),
        (
            f"MQAR at 2048 clearly above chance {CHANCE['mqar']:.3f} (measured {r['mqar']['2048']:.3f})",
            r["mqar"]["2048"] >= 3 * CHANCE["mqar"],
        ),
        (
            f"held-out perplexity far below unigram ({ev['heldout_perplexity']:.1f} vs "
            f"{ev['unigram_perplexity']:.1f})",
            ev["heldout_perplexity"] <= 0.25 * ev["unigram_perplexity"],
        ),
    ]
    lines = [f"- [{'x' if ok else ' '}] {text}: **{'met' if ok else 'NOT met'}**" for text, ok in checks]
    if not all(ok for _, ok in checks[:3]):
        lines.append(
            "\nThe retrieval skills did **not** emerge within the training budget: the in-context copying "
            "(induction) circuit that key->value, passkey and MQAR retrieval rely on has not formed (see the "
            "copy test below: the second copy of a chunk is predicted no better than the first). Use this "
            "checkpoint as a trained language model with a realistic attention-entropy profile, not as a "
            "retrieval model, until a longer training run replaces it."
        )
    return "\n".join(lines)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _mixture_text(mixture: dict[str, float]) -> str:
    total = sum(mixture.values())
    return ", ".join(f"{kind} {weight / total:.0%}" for kind, weight in mixture.items() if weight > 0)


def _phase_mixtures(phases: list[dict]) -> str:
    own = [p for p in phases if p.get("mixture")]
    if not own:
        return ""
    return "; except " + "; ".join(
        f"the {p['seq_len']}-token phase: {_mixture_text(p['mixture'])}" for p in own
    )


def write_model_card(name: str, evaluation: dict[str, Any], path: str | Path | None = None) -> Path:
    """Write ``evaluation.json``, ``loss_curve.png`` and ``MODEL_CARD.md`` next to the checkpoint."""
    directory = Path(path) if path is not None else checkpoint_dir(name)
    spec = get_spec(name)
    meta = json.loads((directory / "training_log.json").read_text())
    log = meta["log"]
    (directory / "evaluation.json").write_text(json.dumps(evaluation, indent=1))
    _loss_curve_png(log, directory / "loss_curve.png")
    config = json.loads((directory / "config.json").read_text())
    arch_keys = [k for k in spec.model_config if k in config]
    retrieval_rows = [
        [kind, *[f"{evaluation['retrieval'][kind][str(n)]:.3f}" for n in EVAL_LENGTHS], f"{CHANCE[kind]:.1e}"]
        for kind in PROBE_KINDS
    ]
    copy_rows = [
        [str(n), *[f"{evaluation['copy'][str(n)][k]:.3f}" for k in ("first", "copy", "gain")]]
        for n in EVAL_LENGTHS
    ]
    entropy = np.asarray(evaluation["attention_entropy"])
    entropy_norm = np.asarray(evaluation["attention_entropy_normalized"])
    entropy_last = np.asarray(evaluation["attention_entropy_last32"])
    entropy_rows = [
        [
            str(layer),
            f"{entropy[layer].mean():.3f}",
            f"{entropy_norm[layer].mean():.3f}",
            f"{entropy_last[layer].mean():.3f}",
            " ".join(f"{h:.2f}" for h in entropy[layer]),
        ]
        for layer in range(len(entropy))
    ]
    every = max(1, len(log) // 12)
    curve_rows = [
        [
            str(r["step"]),
            str(r["seq_len"]),
            f"{r['loss']:.3f}",
            f"{r['text_loss']:.3f}",
            f"{r['answer_acc']:.3f}",
        ]
        for r in log[::every] + ([log[-1]] if (len(log) - 1) % every else [])
    ]
    train_cfg = meta["train_config"]
    phases = ", ".join(f"{p['steps']} steps x {p['batch']} x {p['seq_len']}" for p in train_cfg["phases"])
    tokens = sum(p["steps"] * p["batch"] * p["seq_len"] for p in train_cfg["phases"])
    text = f"""# {name}

{spec.description}. Class `{spec.architecture}` from `transformers`; {evaluation["n_parameters"]:,} parameters
(tied input/output embeddings), weights stored in float16 (`model.safetensors`), loaded in float32 by
`neurips26.zoo.load({name!r})`.

**Scale honesty:** a few-million-parameter model trained for ~{meta["wall_time_s"] / 60:.0f} minutes on one
CPU thread. It exists so the KV-cache and quantization methods run on a *trained* model with real retrieval
heads through the same `transformers` code path as Llama-3.1-8B / DeepSeek-V3; its numbers say nothing
about the magnitude of effects at scale.

## Architecture
{_table(["field", "value"], [[k, f"`{config[k]}`"] for k in arch_keys])}

Tokenizer: byte-level BPE, {config["vocab_size"]} tokens, digits split one per token, trained with
`tokenizers` on the stdlib train split (`neurips26.zoo.tokenizer`).

## Data
The CPython {meta.get("python_version", platform.python_version())} standard-library source on the
machine (`neurips26.data.text`, `test`/`tests`/`site-packages` folders excluded), split by a hash of each
file's path: 90% train, 10% held-out. Debian's Python documentation is not installed on the build machine,
so there is no English-prose corpus beyond the docstrings and comments in the code.
Training sequences are drawn from a mixture (`neurips26.zoo.training.build_batch`): plain code (`text`),
a code chunk and its exact copy (`repeat`), random tokens repeated with a random period (`randrep`, the pure
copying/induction signal) and retrieval probes spliced into code (`neurips26.data.probes`): key->value
bindings (`kv`), passkey and MQAR with power-law query gaps; answer tokens weigh {train_cfg["answer_weight"]}x
in the loss. Mixture weights: {_mixture_text(train_cfg["mixture"])}{_phase_mixtures(train_cfg["phases"])}.

## Training
Reproduce with `neurips26 zoo train {name}` (deterministic with one torch thread; a test checks the first
logged losses). Curriculum: {phases} ({tokens / 1e6:.2f} M tokens). AdamW lr {train_cfg["learning_rate"]},
betas ({train_cfg["beta1"]}, {train_cfg["beta2"]}), weight decay {train_cfg["weight_decay"]}, warm-up
{train_cfg["warmup_steps"]} steps then cosine to {train_cfg["min_lr_ratio"]:.0%}, grad clip
{train_cfg["grad_clip"]}, seed {train_cfg["seed"]}.
Wall time: **{meta["wall_time_s"]:.0f} s** ({meta["steps"]} steps, torch {meta["torch_version"]},
{meta["torch_threads"]} thread, on a shared 2-core machine).

![loss curve](loss_curve.png)

{_table(["step", "seq len", "weighted loss", "non-answer loss", "answer-token acc"], curve_rows)}

## Status against the issue's quality bar
{_quality_bar(evaluation)}

## Evaluation
Measured by `neurips26 zoo eval {name}` ({evaluation["eval_wall_time_s"]:.0f} s).

**Held-out perplexity** ({evaluation["perplexity_setting"]}): **{evaluation["heldout_perplexity"]:.2f}**
vs **{evaluation["unigram_perplexity"]:.1f}** for an add-one unigram model of the same tokenizer.

**Retrieval** (exact match per query, full cache, {evaluation["n_samples"]} held-out probes per cell;
key->value with {EVAL_PROBE_SETTINGS["kv"]["n_bindings"]} bindings of 4-digit values, passkey of 5 digits,
MQAR with {EVAL_PROBE_SETTINGS["mqar"]["n_pairs"]} pairs of 2-digit values; scored by teacher-forced argmax,
which equals greedy decoding's exact match):

{_table(["probe", "512", "1024", "2048", "chance"], retrieval_rows)}

**Induction (copy) test**: a 64-token held-out code chunk, filler code, the same chunk again; next-token
accuracy on the second copy vs the first (no in-context help):

{_table(["context", "first copy", "second copy", "gain"], copy_rows)}

Passkey at 2048 by prefill + greedy `generate` (the path a KV-cache method sees):
{evaluation["passkey_decoded_2048"]:.3f}.

**Attention entropy per layer** (nats, mean over heads and queries; inputs: 4 key->value probes and 4
held-out code windows of 1024 tokens). "normalized" divides each row by log(#visible keys);
"last 32" averages only the final 32 queries (an observation window):

{_table(["layer", "mean", "normalized", "last 32", "per head"], entropy_rows)}
"""
    (directory / "MODEL_CARD.md").write_text(text)
    return directory / "MODEL_CARD.md"
