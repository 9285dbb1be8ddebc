"""Measure a ``tiny-*-ctx`` checkpoint against issue #20's bars and write its card.

Every number on the card comes from :func:`evaluate_ctx` (``neurips26 zoo eval NAME``); the card states a
bar as met only when the measurement meets it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.data.probes import ProbeSample
from neurips26.zoo import CHECKPOINT_ROOT, checkpoint_dir, load
from neurips26.zoo.circuits import circuit_report
from neurips26.zoo.ctx import CTX_LAYOUTS, build_ctx_model, probe_settings
from neurips26.zoo.evaluation import (
    attention_entropy_profile,
    context_perplexity,
    heldout_perplexity,
    heldout_tokens,
    probe_samples,
)
from neurips26.zoo.specs import get_spec

__all__ = ["BARS", "evaluate_ctx", "heldout_retrieval", "score_batched", "write_ctx_card"]

# Issue #20's bars.
BARS = {"context_gain": 0.15, "retrieval": 0.90, "ppl_ratio": 1.20, "min_queries": 200}
REFERENCE = "tiny-llama"  # "today's tiny-llama": the perplexity reference
QUERIES_PER_PROBE = {"kv": 4, "passkey": 1, "mqar": 16}  # answer spans per probe (the evaluation settings)


def score_batched(
    model: Any,
    samples: list[ProbeSample],
    batch_size: int = 4,
    context: Callable[[], AbstractContextManager] | None = None,
) -> list[bool]:
    """Exact match per answer span, teacher-forced argmax (as :func:`neurips26.zoo.evaluation.score_probe`),
    several equal-length probes per forward pass; ``context()`` wraps each pass (e.g. a patched attention)."""
    import torch

    hits: list[bool] = []
    for i in range(0, len(samples), batch_size):
        chunk = samples[i : i + batch_size]
        if len({len(s) for s in chunk}) != 1:
            raise ValueError("score_batched needs equal-length probes in a batch")
        ids = torch.tensor([s.ids for s in chunk])
        with torch.no_grad(), (context or nullcontext)():
            pred = model(input_ids=ids).logits.argmax(-1)
        for row, s in enumerate(chunk):
            hits += [bool((pred[row, a - 1 : b - 1] == ids[row, a:b]).all()) for a, b in s.spans]
    return hits


def heldout_retrieval(
    model: Any,
    tokenizer: Any,
    kind: str,
    length: int,
    queries: int,
    *,
    split: str = "heldout",
    seed: int = 2026,
    data: Any = None,
    context: Callable[[], AbstractContextManager] | None = None,
) -> dict:
    """Retrieval accuracy of a ``tiny-*-ctx`` model on at least ``queries`` answer spans whose keys and
    values come from ``split`` (``"heldout"``: never seen in training), as the ctx cards measure it.

    Returns ``{"accuracy", "queries", "probes", "split"}``; ``kind`` is ``kv`` (4 bindings per probe),
    ``passkey`` (one) or ``mqar`` (16); ``context()`` wraps each forward pass (a press, a quantized cache).
    """
    if kind not in QUERIES_PER_PROBE:
        raise ValueError(f"kind must be one of {sorted(QUERIES_PER_PROBE)}, got {kind!r}")
    if queries < 1:
        raise ValueError(f"queries must be >= 1, got {queries}")
    data = data if data is not None else heldout_tokens(tokenizer)
    settings = probe_settings(data, split)
    if kind == "passkey":
        settings.pop("keys")
    n = math.ceil(queries / QUERIES_PER_PROBE[kind])
    samples = probe_samples(tokenizer, kind, length, n, seed=seed, data=data, **settings)
    hits = score_batched(model, samples, context=context)
    return {"accuracy": float(np.mean(hits)), "queries": len(hits), "probes": len(samples), "split": split}


def _reference_perplexity() -> float | None:
    path = CHECKPOINT_ROOT / REFERENCE / "evaluation.json"
    return json.loads(path.read_text())["heldout_perplexity"] if path.is_file() else None


def evaluate_ctx(name: str, *, path: str | Path | None = None, queries: int = 200) -> dict[str, Any]:
    """Every measurement the ``tiny-*-ctx`` card reports (~15 minutes on one thread at 200 queries)."""
    import torch

    start = time.perf_counter()
    model, tokenizer = load(name, path=path)
    held = heldout_tokens(tokenizer)
    ev: dict[str, Any] = {"name": name, "queries_per_cell": queries}
    ev["heldout_perplexity"] = heldout_perplexity(model, tokenizer, data=held)
    ev["reference_perplexity"] = _reference_perplexity()
    ev["perplexity_setting"] = "first 65,536 held-out tokens, windows of 512 (as the tiny-llama card)"
    ev["context_perplexity"] = context_perplexity(model, tokenizer, data=held)
    ev["context_setting"] = "last 100 tokens of the first 32 held-out 2048-token windows"
    ev["retrieval"] = {
        kind: {
            str(n): heldout_retrieval(model, tokenizer, kind, n, queries, split="heldout", data=held)
            for n in (1024, 2048)
        }
        for kind in ("kv", "passkey")
    }
    ev["retrieval"]["mqar"] = {
        "2048": heldout_retrieval(model, tokenizer, "mqar", 2048, 256, split="heldout", data=held)
    }
    ev["retrieval_train_split"] = {
        kind: heldout_retrieval(model, tokenizer, kind, 2048, 100, split="train", data=held)
        for kind in ("kv", "passkey")
    }
    # the written heads: do they survive training? (same measurement on the model as initialised)
    directory = Path(path) if path is not None else checkpoint_dir(name)
    circuit = json.loads((directory / "circuit.json").read_text())
    init_model, _ = build_ctx_model(get_spec(name), tokenizer, CTX_LAYOUTS[name])
    init_model.eval()
    ev["circuit_after"] = circuit_report(model, circuit)
    ev["circuit_init"] = circuit_report(init_model, circuit)
    text = np.stack([held.haystack.ids[i * 1024 : (i + 1) * 1024] for i in range(4)])
    with torch.no_grad():
        ev["entropy_after"] = attention_entropy_profile(model, text, normalized=True).round(4).tolist()
        ev["entropy_init"] = attention_entropy_profile(init_model, text, normalized=True).round(4).tolist()
    # ablation: the written induction head's output switched off (its o_proj columns zeroed), last
    ind = circuit["heads"][-1]
    attn = model.model.layers[ind["layer"]].self_attn
    width = attn.o_proj.weight.shape[1] // model.config.num_attention_heads
    with torch.no_grad():
        attn.o_proj.weight[:, ind["head"] * width : (ind["head"] + 1) * width] = 0.0
    ev["induction_head_off"] = {
        kind: heldout_retrieval(model, tokenizer, kind, 1024, 100, split="heldout", data=held)
        for kind in ("kv", "passkey")
    }
    ev["n_parameters"] = int(sum(p.numel() for p in model.parameters()))
    ev["eval_wall_time_s"] = time.perf_counter() - start
    return ev


def bars(ev: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each bar of issue #20 as ``(text with the measured value, met)``."""
    cp = ev["context_perplexity"]
    gain = 1 - cp["2048"] / cp["128"]
    out = [
        (
            f"uses context: last-100-token perplexity falls >= 15% from 128 to 2048 tokens of context "
            f"(measured {cp['128']:.2f} -> {cp['2048']:.2f}, {gain:.1%})",
            gain >= BARS["context_gain"],
        )
    ]
    for kind in ("kv", "passkey"):
        for n in ("1024", "2048"):
            cell = ev["retrieval"][kind][n]
            out.append(
                (
                    f"{kind} at {n} >= 0.90 on held-out keys/values, >= 200 queries "
                    f"(measured {cell['accuracy']:.3f} on {cell['queries']} queries)",
                    cell["accuracy"] >= BARS["retrieval"] and cell["queries"] >= BARS["min_queries"],
                )
            )
    ref = ev["reference_perplexity"]
    if ref is not None:
        out.append(
            (
                f"held-out perplexity within 20% of tiny-llama's (measured {ev['heldout_perplexity']:.2f} vs "
                f"{ref:.2f}, ratio {ev['heldout_perplexity'] / ref:.2f})",
                ev["heldout_perplexity"] <= BARS["ppl_ratio"] * ref,
            )
        )
    return out


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _head_rows(ev: dict[str, Any]) -> list[list[str]]:
    after = {(h["layer"], h["head"]): h for h in ev["circuit_after"]["heads"]}
    rows = []
    for h in ev["circuit_init"]["heads"]:
        a = after[(h["layer"], h["head"])]
        ent_i = ev["entropy_init"][h["layer"]][h["head"]]
        ent_a = ev["entropy_after"][h["layer"]][h["head"]]
        rows.append(
            [
                f"{h['layer']}.{h['head']}",
                h["role"],
                f"{h['target_mass']:.3f} -> {a['target_mass']:.3f}",
                f"{h['entropy']:.3f} -> {a['entropy']:.3f}",
                f"{ent_i:.3f} -> {ent_a:.3f}",
            ]
        )
    return rows


def write_ctx_card(name: str, ev: dict[str, Any], path: str | Path | None = None) -> Path:
    """Write ``evaluation.json``, ``loss_curve.png`` and ``MODEL_CARD.md`` next to the checkpoint."""
    from neurips26.zoo.cards import _loss_curve_png

    directory = Path(path) if path is not None else checkpoint_dir(name)
    spec = get_spec(name)
    meta = json.loads((directory / "training_log.json").read_text())
    (directory / "evaluation.json").write_text(json.dumps(ev, indent=1))
    _loss_curve_png(meta["log"], directory / "loss_curve.png")
    cfg = meta["train_config"]
    phases = ", ".join(f"{p['steps']} x {p['batch']} x {p['seq_len']}" for p in cfg["phases"])
    tokens = sum(p["steps"] * p["batch"] * p["seq_len"] for p in cfg["phases"])
    checks = bars(ev)
    bar_lines = "\n".join(
        f"- [{'x' if ok else ' '}] {t}: **{'met' if ok else 'NOT met'}**" for t, ok in checks
    )
    cp = ev["context_perplexity"]
    ret_rows = [
        [
            kind,
            *[
                f"{ev['retrieval'][kind][n]['accuracy']:.3f} ({ev['retrieval'][kind][n]['queries']})"
                for n in ("1024", "2048")
            ],
        ]
        for kind in ("kv", "passkey")
    ]
    mq = ev["retrieval"]["mqar"]["2048"]
    tr = ev["retrieval_train_split"]
    off = ev["induction_head_off"]
    layout = CTX_LAYOUTS[name]
    text = f"""# {name}

{spec.description}. Class `{spec.architecture}` from `transformers`, {ev["n_parameters"]:,} parameters,
float16 on disk, float32 from `neurips26.zoo.load({name!r})` (plain `from_pretrained` on this folder).

**What it is:** issue #20's route 1. Before training, a previous-token head for each of the offsets
{list(layout.offsets)} (layer 0) and a {layout.match}-token-match induction head
(layer {layout.induction_layer}, head 0) were written into the random weights by
`neurips26.zoo.circuits.install_circuit`; everything was then trained, nothing frozen, on stdlib code mixed
with key->value / passkey / MQAR records from step 0 (training keys and values only; the probes below use the
disjoint held-out ones, `neurips26.zoo.ctx.split_keys` / `is_heldout`). Scale: {meta["steps"]} steps,
{tokens / 1e6:.2f} M tokens, {meta["wall_time_s"]:.0f} s on one thread of a shared 2-core CPU. Nothing below
says anything about effect sizes at scale.

## Bars of issue #20 (measured by `neurips26 zoo eval {name}`)
{bar_lines}

## Measurements
**Context use** ({ev["context_setting"]}), perplexity by context length:
{_table(["128", "512", "1024", "2048"], [[f"{cp[c]:.2f}" for c in ("128", "512", "1024", "2048")]])}

**Retrieval**, held-out keys and values, full cache, exact match per query (teacher-forced argmax = greedy
exact match); cells: accuracy (queries). key->value: 4 bindings of 4-digit values per probe; passkey:
5 digits.
{_table(["probe", "1024", "2048"], ret_rows)}

MQAR at 2048 (16 pairs, 2-digit values, held-out): {mq["accuracy"]:.3f} on {mq["queries"]} queries.
Training-split keys/values at 2048: key->value {tr["kv"]["accuracy"]:.3f} ({tr["kv"]["queries"]}), passkey
{tr["passkey"]["accuracy"]:.3f} ({tr["passkey"]["queries"]}).

With the written induction head switched off (its output columns zeroed) at 1024 tokens: key->value
{off["kv"]["accuracy"]:.3f} ({off["kv"]["queries"]}), passkey {off["passkey"]["accuracy"]:.3f}
({off["passkey"]["queries"]}).

**Held-out perplexity** ({ev["perplexity_setting"]}): **{ev["heldout_perplexity"]:.2f}** (tiny-llama's
card: {ev["reference_perplexity"]:.2f}).

**The written heads, at initialisation -> after training.** Target mass: attention on token `i - offset`
(previous-token heads) or on the tokens after the earlier occurrences (induction head), on random tokens
repeated with period {ev["circuit_after"]["period"]}; entropy on the same rows, normalised (0: one key,
1: uniform); text entropy: `neurips26.zoo.evaluation.attention_entropy_profile(normalized=True)` on 4 held-out
1024-token windows. Copy accuracy on the repeats: {ev["circuit_init"]["copy_acc"]:.3f} ->
{ev["circuit_after"]["copy_acc"]:.3f}.
{_table(["layer.head", "role", "target mass", "entropy (repeats)", "entropy (text)"], _head_rows(ev))}

## Training
`neurips26 zoo train {name}` (resumable: state in `runs/zoo-ctx/{name}/`), then `neurips26 zoo eval {name}`
({ev["eval_wall_time_s"]:.0f} s). Curriculum {phases} (steps x batch x tokens); mixture
{", ".join(f"{k} {v:.0%}" for k, v in cfg["mixture"].items())}; answer tokens weigh {cfg["answer_weight"]}x;
AdamW lr {cfg["learning_rate"]}, warm-up {cfg["warmup_steps"]}, cosine to {cfg["min_lr_ratio"]:.0%},
weight decay {cfg["weight_decay"]}, seed {cfg["seed"]}. Circuit layout: `{json.dumps(layout.to_dict())}`.

![loss curve](loss_curve.png)
"""
    (directory / "MODEL_CARD.md").write_text(text)
    return directory / "MODEL_CARD.md"
