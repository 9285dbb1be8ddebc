"""SpectralKV versus kvpress's baselines on the zoo's trained tiny Llama.

Every cell (system x keep ratio x seed) prefills the same held-out data under the system's press and
measures what the compressed cache does afterwards:

* ``continuation_ppl`` -- perplexity of the next tokens decoded from the compressed 2k-token prefix
  (the PG-19 protocol, scaled down), on a batch of held-out stdlib windows;
* ``fidelity_error`` -- for every query those decode steps issue, the relative error of each layer's
  attention output over the kept prefix entries versus over all prefix entries;
* ``redundancy_ppl`` and ``near_dup_share`` -- the redundancy stress set (a passage repeated 4 times,
  then its start again), and the share of the kept entries that near-duplicate another kept entry;
* ``retrieval_acc`` (and per kind) -- key->value, passkey and MQAR probes decoded after compression;
* ``peak_cache_mb`` -- the most KV-cache bytes held at any point of the prefill; ``kept_fraction`` and
  ``budget_exact`` from the budget ledger; ``prefill_s`` -- wall time of the batched prefill.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from typing import Any

import numpy as np

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile, Progress
from neurips26.methods.spectralkv.baselines import BASELINES, PressRecipe, make_baseline
from neurips26.methods.spectralkv.config import SpectralKVConfig

__all__ = ["EXPERIMENT", "OURS", "run_cell"]

OURS = "spectralkv"
ABLATIONS: dict[str, dict[str, str]] = {
    # name: the switches of the method's config (experiment config ``method``) that differ from ours
    "spectralkv": {},
    "spectralkv-static": {"budget_mode": "static"},
    "spectralkv-entropy-only": {"selector": "topk"},
    "spectralkv-coreset-only": {"budget_mode": "uniform"},
    "spectralkv-restart": {"rank_strategy": "restart"},  # the slower, more faithful rank strategy
}
COMPRESSING_BASELINES = tuple(b for b in BASELINES if b != "full-cache")


def _ours(name: str) -> Any:
    switches = ABLATIONS[name]

    def factory(config: SpectralKVConfig) -> PressRecipe:
        method = dataclasses.replace(config.method, **switches) if switches else config.method
        static = method.budget_mode == "static"

        def build(ratio: float, seed: int, profile: Any) -> Any:
            from neurips26.methods.spectralkv.integration import SpectralKVPress

            return SpectralKVPress.from_config(method, ratio, profile if static else None)

        description = f"SpectralKV ({method.budget_mode} budgets, {method.selector}, {method.rank_strategy})"
        return PressRecipe(name, build, "sdpa", description, static)

    return factory


def _baseline(name: str) -> Any:
    def factory(config: SpectralKVConfig) -> PressRecipe:
        return make_baseline(name, config.method)

    return factory


@functools.lru_cache(maxsize=2)
def _model(name: str) -> tuple[Any, Any]:
    from neurips26 import zoo

    return zoo.load(name)


@functools.lru_cache(maxsize=2)
def _heldout(name: str) -> Any:
    from neurips26.zoo.evaluation import heldout_tokens

    return heldout_tokens(_model(name)[1])


@functools.lru_cache(maxsize=4)
def _static_profile(name: str, prompts: int, tokens: int, gamma: float, window: int, sinks: int) -> Any:
    """The offline profile: calibrated on train-split windows, never on the test data."""
    import torch

    from neurips26.methods.spectralkv.integration import calibrate_budget_profile
    from neurips26.zoo.press_eval import text_batch
    from neurips26.zoo.training import load_corpus_tokens

    model, tokenizer = _model(name)
    model.set_attn_implementation("sdpa")
    train = load_corpus_tokens(tokenizer, "train")
    batch = text_batch(train.haystack.ids, np.random.default_rng(2026), prompts, tokens)
    windows = [row[None] for row in torch.unbind(batch)]
    return calibrate_budget_profile(model, windows, gamma=gamma, window_size=window, n_sink=sinks)


def run_cell(
    system: PressRecipe, config: SpectralKVConfig, profile: Profile, seed: int, progress: Progress
) -> dict[str, float]:
    """Run one (system, keep ratio, seed) cell and return every metric."""

    from neurips26.methods.spectralkv.duplicates import near_duplicate_share
    from neurips26.methods.spectralkv.evaluation import decode_continuation, repeated_text_batch
    from neurips26.methods.spectralkv.ledger import ledger_from_cache
    from neurips26.zoo.press_eval import compressed_prefill, kept_mask, text_batch

    model, tokenizer = _model(config.model)
    model.set_attn_implementation(system.attention)
    data = _heldout(config.model)
    ratio = config.compression_ratio
    budget_profile = (
        _static_profile(
            config.model,
            config.calibration_prompts,
            config.calibration_tokens,
            config.method.gamma,
            config.method.window_size,
            config.method.n_sink,
        )
        if system.needs_profile
        else None
    )
    press = system.press(ratio, seed, budget_profile) if ratio > 0 else None
    n, m = config.context_tokens, config.continuation_tokens
    rng = np.random.default_rng([seed, 20261202])
    metrics: dict[str, float] = {}

    # 1. held-out text: continuation perplexity, fidelity for the decode queries, peak cache, ledger
    ids = text_batch(data.haystack.ids, rng, config.text_batch, n + m)
    start = time.perf_counter()
    prefill = compressed_prefill(model, ids[:, :n], press, keep_full=True)
    metrics["prefill_s"] = time.perf_counter() - start
    ledger = ledger_from_cache(model, prefill.cache, n, ratio if press is not None else 0.0, prefill.masked)
    metrics["kept_fraction"] = ledger.kept_fraction
    metrics["budget_exact"] = float(ledger.matches_nominal)
    metrics["peak_cache_mb"] = prefill.peak_cache_bytes / 2**20
    decoded = decode_continuation(model, prefill, ids[:, n:], fidelity=True)
    metrics["continuation_ppl"] = float(np.exp(decoded.nll))
    metrics["fidelity_error"] = float(decoded.fidelity_error or 0.0)

    # 2. redundancy stress: repeated passage, then its start again
    repeated = repeated_text_batch(data.haystack.ids, rng, config.text_batch, n, config.redundancy_copies, m)
    prefill = compressed_prefill(model, repeated[:, :n], press)
    shares = [
        near_duplicate_share(layer.keys, layer.values, mask=kept_mask(masked, layer.keys))
        for layer, masked in zip(prefill.cache.layers, prefill.masked, strict=True)
    ]
    metrics["near_dup_share"] = float(np.mean(shares))
    metrics["redundancy_ppl"] = float(np.exp(decode_continuation(model, prefill, repeated[:, n:]).nll))

    # 3. retrieval probes decoded after compressing the context
    metrics.update(_retrieval(model, tokenizer, data, press, config, seed, progress))
    return metrics


def _retrieval(
    model: Any, tokenizer: Any, data: Any, press: Any, config: SpectralKVConfig, seed: int, progress: Progress
) -> dict[str, float]:
    from neurips26.zoo.evaluation import retrieval_accuracy

    if config.probe_samples == 0 or not config.probe_kinds:
        return {}

    def context() -> Any:
        return press(model) if press is not None else contextlib.nullcontext()

    per_kind: dict[str, list[float]] = {kind: [] for kind in config.probe_kinds}
    cells = [(kind, length) for kind in config.probe_kinds for length in config.probe_contexts]
    for kind, length in progress.loop(cells, total=len(cells), desc="probes"):
        acc = retrieval_accuracy(
            model,
            tokenizer,
            kind,
            length,
            n_samples=config.probe_samples,
            seed=1000 + seed,
            context=context,
            data=data,
            decode=True,
        )
        per_kind[kind].append(acc)
    out = {f"{kind}_acc": float(np.mean(v)) for kind, v in per_kind.items()}
    out["retrieval_acc"] = float(np.mean(list(out.values())))
    return out


METRICS = (
    Metric("continuation_ppl", "min", "", "perplexity of the tokens decoded after the compressed 2k prefix"),
    Metric("fidelity_error", "min", "", "attention-output error over the prefix for the decode queries"),
    Metric("redundancy_ppl", "min", "", "continuation perplexity on the repeated-passage set"),
    Metric(
        "near_dup_share", "min", "", "share of kept entries near-duplicating another kept one (cos >= 0.95)"
    ),
    Metric("retrieval_acc", "max", "", "mean exact match over the probe kinds"),
    Metric("kv_acc", "max", "", "key->value probes"),
    Metric("passkey_acc", "max", "", "passkey probes"),
    Metric("mqar_acc", "max", "", "MQAR probes (last query)"),
    Metric("peak_cache_mb", "min", "MiB", "most KV-cache bytes held during the prefill (one batch)"),
    Metric("kept_fraction", "min", "", "kept entries / full cache, from the budget ledger"),
    Metric("budget_exact", "max", "", "1 when the ledger's total equals the nominal budget"),
    Metric("prefill_s", "min", "s", "wall time of the batched prefill under the press"),
)

AGGRESSIVE = {"keep_ratio": (0.125, 0.0625)}
# the strongest presses of the full sweep (attention error: TOVA and H2O lead, SnapKV/AdaKV/PyramidKV next)
# and StreamingLLM; the full profile runs all ten compressing baselines, the default these six
VERSUS = ("snapkv", "pyramidkv", "adakv", "h2o", "tova", "streamingllm")
NAIVE = ("random",)  # a press that knows nothing: if it satisfies a claim, the claim shows nothing
CLAIMS = (
    Claim(
        "At aggressive keep ratios SpectralKV keeps attention outputs for future queries closer to the full "
        "cache than the strongest baseline presses",
        "fidelity_error",
        OURS,
        VERSUS,
        controls=NAIVE,
        where=AGGRESSIVE,
    ),
    Claim(
        "At aggressive keep ratios (12.5%, 6.25%) SpectralKV gives lower continuation perplexity than the "
        "strongest baseline presses",
        "continuation_ppl",
        OURS,
        VERSUS,
        controls=NAIVE,
        where=AGGRESSIVE,
    ),
    Claim(
        "At aggressive keep ratios SpectralKV retrieves better than the strongest baseline presses",
        "retrieval_acc",
        OURS,
        VERSUS,
        controls=NAIVE,
        where=AGGRESSIVE,
    ),
    Claim(
        "The static-budget variant brings SpectralKV's peak prefill KV memory down to that of a press that "
        "compresses each layer in its own hook (SnapKV)",
        "peak_cache_mb",
        "spectralkv-static",
        ("snapkv",),
        kind="noninferior",
        margin=0.10,
        margin_source=(
            "ours: a profile moves budget between layers, so the peak (compressed earlier layers + the "
            "current one in full) may exceed a uniform press's by one layer's budget: at most "
            "k / ((L - 1) k + n) = 9% for the 4-layer model at 12.5% keep"
        ),
        controls=("spectralkv", "full-cache"),  # both hold every layer's full cache at once
    ),
    Claim(
        "The static-budget variant loses negligible quality (attention error within 2% of the dynamic one)",
        "fidelity_error",
        "spectralkv-static",
        (OURS,),
        kind="noninferior",
        margin=0.02,
        margin_source=(
            "ours: the paper's 'negligible loss' read as within 2% of the dynamic variant's attention error; "
            "SnapKV (the control) was 4% worse at 12.5% keep in the full sweep"
        ),
        controls=("snapkv", "random"),
    ),
)

SYSTEMS = {name: _ours(name) for name in ABLATIONS} | {name: _baseline(name) for name in BASELINES}

PROFILES = {
    "smoke": Profile(
        "smoke",
        budget_s=60,
        seeds=1,
        overrides={
            "context_tokens": 256,
            "continuation_tokens": 8,
            "text_batch": 1,
            "probe_contexts": [256],
            "probe_samples": 1,
            "probe_kinds": ["passkey"],
            "calibration_prompts": 1,
            "calibration_tokens": 128,
        },
        grid={"keep_ratio": [0.25]},
    ),
    "default": Profile(
        "default",
        budget_s=120,  # measured: 119 s wall for 60 cells, one worker, zoo model load included
        seeds=5,
        overrides={
            "context_tokens": 1024,
            "text_batch": 2,
            "continuation_tokens": 32,
            "probe_contexts": [1024],
            "probe_samples": 1,
            "probe_kinds": ["passkey"],
        },
        grid={"keep_ratio": [0.125]},
        systems=(*list(ABLATIONS)[:4], "full-cache", *VERSUS, *NAIVE),
    ),
    "full": Profile(
        "full",
        budget_s=5400,
        seeds=5,
        overrides={"probe_contexts": [1024, 2048], "probe_samples": 16, "text_batch": 8},
        grid={"keep_ratio": [0.5, 0.25, 0.125, 0.0625], "model": ["tiny-llama", "tiny-qwen3"]},
    ),
}

EXPERIMENT = Experiment(
    slug="spectralkv",
    config_cls=SpectralKVConfig,
    claims=CLAIMS,
    metrics=METRICS,
    systems=SYSTEMS,
    profiles=PROFILES,
    run=run_cell,
    ours=OURS,
)
