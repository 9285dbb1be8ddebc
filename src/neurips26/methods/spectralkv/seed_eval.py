"""Every press of a profile on one seed's data, sharing each forward pass (see :mod:`.replay`).

For one seed the data are drawn once: ``text_batch`` held-out windows of ``context_tokens + 100`` tokens and
the retrieval probes (:mod:`.probing`). Each batch is prefilled once with the full cache; every (system,
keep ratio) then replays its press on that capture and decodes from its own compressed cache:

* text: ``continuation_ppl`` (the next ``continuation_tokens`` tokens, teacher-forced, one at a time),
  ``fidelity_error`` (attention-output error of those decode queries over the prefix), the ledger
  (``kept_fraction``, ``budget_exact``), ``peak_cache_mb``, ``press_s`` (the press's own step) and
  ``jaccard_snapkv`` (overlap of the kept positions with SnapKV's at the same keep ratio, per layer and
  KV head);
* redundancy set, built in key/value space: the half of the text windows whose *full* cache has the
  highest measured near-duplicate share (cosine >= 0.95 of the joint key/value vectors, per layer and KV
  head, :func:`~neurips26.methods.spectralkv.duplicates.near_duplicate_share`); on them
  ``redundancy_ppl`` and ``near_dup_share`` (share of a press's *kept* entries that near-duplicate an
  earlier kept one), with ``full_dup_share`` the measured share of the full cache;
* probes, questions after a distractor: ``kv_acc``, ``passkey_acc``, ``retrieval_acc`` (all answers pooled)
  and ``probe_fidelity_error`` (attention-output error of the question and answer queries, which differ
  from the observation window); with ``"window"`` among the placements also ``*_window_acc``.

The result for every (system, ratio) is kept in memory by the experiment (floats only), so the harness's
cells of one seed share the forward passes; each number equals what a separate ``with press(model)``
prefill gives (tested).
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from neurips26.methods.spectralkv.config import SpectralKVConfig

__all__ = ["evaluate_seed"]

PressFactory = Callable[[], Any]  # a fresh press (None: the full cache)


def _row_dup_share(keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None) -> np.ndarray:
    from neurips26.methods.spectralkv.duplicates import near_duplicate_share

    return np.array(
        [
            near_duplicate_share(
                keys[b : b + 1], values[b : b + 1], mask=None if mask is None else mask[b : b + 1]
            )
            for b in range(keys.shape[0])
        ]
    )


def evaluate_seed(
    model: Any,
    tokenizer: Any,
    data: Any,
    config: SpectralKVConfig,
    presses: dict[tuple[str, float], tuple[PressFactory, bool]],
    seed: int,
) -> dict[tuple[str, float], dict[str, float]]:
    """Metrics of every ``(system, keep ratio)`` in ``presses`` on seed ``seed``'s data.

    ``presses[(name, ratio)] = (factory, eager)``: ``factory()`` builds a fresh press, ``eager`` says it
    needs the attention matrix. SnapKV's kept set at each ratio is computed for ``jaccard_snapkv`` whether
    or not SnapKV is among the systems.
    """
    from neurips26.methods.spectralkv.evaluation import decode_continuation
    from neurips26.methods.spectralkv.ledger import ledger_from_cache
    from neurips26.methods.spectralkv.press_eval import kept_mask, text_batch
    from neurips26.methods.spectralkv.probing import probe_batch, score_answers
    from neurips26.methods.spectralkv.replay import (
        capture_prefill,
        kept_jaccard,
        kept_positions,
        replay_press,
    )

    model.set_attn_implementation("sdpa")
    n, m = config.context_tokens, config.continuation_tokens
    rng = np.random.default_rng([seed, 20261204])
    sums: dict[tuple[str, float], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rows: dict[tuple[str, float], dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    full_dup: list[np.ndarray] = []
    ratios = sorted({ratio for _, ratio in presses})

    def replay(capture: Any, press: Any, eager: bool) -> tuple[Any, Any, float]:
        start = time.perf_counter()
        prefill = replay_press(model, capture, press, attentions=eager)
        return press, prefill, time.perf_counter() - start

    # 1. text windows: perplexity, fidelity, ledger, memory, overlap with SnapKV, redundancy
    windows = text_batch(data.haystack.ids, rng, config.text_batch, n + m)
    for chunk in windows.split(config.chunk):
        capture = capture_prefill(model, chunk[:, :n])
        full_dup.append(
            np.mean(
                [_row_dup_share(k, v, None) for k, v in zip(capture.keys, capture.values, strict=True)], 0
            )
        )
        snap: dict[float, list[torch.Tensor]] = {}
        for ratio in ratios:
            from kvpress import SnapKVPress

            reference = SnapKVPress(
                compression_ratio=1 - ratio,
                window_size=config.method.window_size,
                kernel_size=config.method.kernel_size,
            )
            _, prefill, _ = replay(capture, reference, False)
            snap[ratio] = [
                kept_positions(capture.keys[i], layer.keys, prefill.masked[i])
                for i, layer in enumerate(prefill.cache.layers)
            ]
        for key, (factory, eager) in presses.items():
            ratio = key[1]
            press, prefill, seconds = replay(capture, factory(), eager)
            out = sums[key]
            out["press_s"].append(seconds)
            ledger = ledger_from_cache(
                model, prefill.cache, n, 1 - ratio if press is not None else 0.0, prefill.masked
            )
            out["kept_fraction"].append(ledger.kept_fraction)
            out["budget_exact"].append(float(ledger.matches_nominal))
            out["peak_cache_mb"].append(prefill.peak_cache_bytes / 2**20)
            kept = [
                kept_positions(capture.keys[i], layer.keys, prefill.masked[i])
                for i, layer in enumerate(prefill.cache.layers)
            ]
            out["jaccard_snapkv"].append(kept_jaccard(torch.stack(kept), torch.stack(snap[ratio])))
            shares = [
                _row_dup_share(layer.keys, layer.values, kept_mask(masked, layer.keys))
                for layer, masked in zip(prefill.cache.layers, prefill.masked, strict=True)
            ]
            rows[key]["dup"].append(np.mean(shares, 0))
            decoded = decode_continuation(
                model, prefill, chunk[:, n:], fidelity=True, fidelity_stride=config.fidelity_stride
            )
            rows[key]["nll"].append(decoded.row_nll)
            out["fidelity_error"].append(float(decoded.fidelity_error or 0.0))
    dup = np.concatenate(full_dup)
    redundant = np.argsort(-dup, kind="stable")[: max(1, len(dup) // 2)]

    # 2. probes: questions after a distractor (and, if asked, inside the window)
    hits: dict[tuple[str, float], dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for placement in config.probe_placements:
        for kind in config.probe_kinds:
            count = config.passkey_probes if kind == "passkey" else config.kv_probes
            if count == 0:
                continue
            batch = probe_batch(
                tokenizer,
                data,
                kind,
                config.probe_context,
                count,
                seed=1000 + seed,
                placement=placement,
                distractor=config.distractor_tokens,
            )
            name = f"{kind}_acc" if placement == "distractor" else f"{kind}_window_acc"
            for lo in range(0, count, config.chunk):
                part = slice(lo, lo + config.chunk)
                sub = dataclasses.replace(
                    batch,
                    prefix=batch.prefix[part],
                    suffix=batch.suffix[part],
                    real=batch.real[part],
                    answers=batch.answers[part],
                )
                capture = capture_prefill(model, sub.prefix)
                for key, (factory, eager) in presses.items():
                    _, prefill, _ = replay(capture, factory(), eager)
                    decoded = decode_continuation(
                        model, prefill, sub.suffix, fidelity=placement == "distractor", weights=sub.real
                    )
                    hits[key][name].extend(score_answers(sub, decoded.predictions))
                    if placement == "distractor":
                        hits[key]["all"].extend(hits[key][name][-sub.n_answers :])
                        weight = float(sub.real[:, 1:].sum())
                        sums[key]["_probe_fid"].append(float(decoded.fidelity_error or 0.0) * weight)
                        sums[key]["_probe_w"].append(weight)

    results: dict[tuple[str, float], dict[str, float]] = {}
    for key in presses:
        out = {name: float(np.mean(v)) for name, v in sums[key].items() if not name.startswith("_")}
        nll = np.concatenate(rows[key]["nll"])
        out["continuation_ppl"] = float(np.exp(nll.mean()))
        out["redundancy_ppl"] = float(np.exp(nll[redundant].mean()))
        out["near_dup_share"] = float(np.concatenate(rows[key]["dup"])[redundant].mean())
        out["full_dup_share"] = float(dup[redundant].mean())
        out["text_dup_share"] = float(dup.mean())
        for name, values in hits[key].items():
            out["retrieval_acc" if name == "all" else name] = float(np.mean(values))
        if sums[key]["_probe_w"]:
            out["probe_fidelity_error"] = float(sum(sums[key]["_probe_fid"]) / sum(sums[key]["_probe_w"]))
        results[key] = out
    return results
