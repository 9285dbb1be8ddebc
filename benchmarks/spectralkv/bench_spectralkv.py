"""SpectralKV speed and memory: compression-step time vs SnapKV, pivoting cost vs context, peak prefill cache.

    PYTHONPATH=src python benchmarks/spectralkv/bench_spectralkv.py [--contexts 1024 2048 4096] [--reps 5]

(1) The compression step is every press hook's time during one prefill of the zoo's tiny-llama (the
model's own attention excluded), summed over layers: SnapKV (kvpress) vs SpectralKV with its default
(segments) rank strategy, with the restart strategy, and with exact pivoting (whole context as pool, no
early stop). Repetitions are interleaved and the median is reported, so
background load hits every press alike. (2) Pivoting alone for a fixed budget of 128 tokens at growing
context: cost should grow linearly. (3) Peak KV-cache bytes during the prefill: full cache, dynamic
(entropy) SpectralKV, static SpectralKV and SnapKV. (4) A yardstick for compiled pivoting: one LAPACK
pivoted QR (``sgeqp3``, what ``scipy.linalg.qr(pivoting=True)`` calls) of one head's pool per (layer, KV
head), next to SnapKV's whole step. ``--sections`` picks which to run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from kvpress import SnapKVPress
from transformers import DynamicCache

from neurips26 import zoo
from neurips26.methods.spectralkv import (
    SpectralKVPress,
    calibrate_budget_profile,
    core,
    duplicates,
    integration,
)
from neurips26.methods.spectralkv.core import select_coreset
from neurips26.methods.spectralkv.features import forced_token_mask, metric_features
from neurips26.methods.spectralkv.press_eval import compressed_prefill
from neurips26.zoo.evaluation import heldout_tokens


def timed_hooks(press: Any) -> list[float]:
    """Wrap ``press.forward_hook`` so every call's wall time is appended to the returned list."""
    times: list[float] = []
    hook = press.forward_hook

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = hook(*args, **kwargs)
        times.append(time.perf_counter() - start)
        return out

    press.forward_hook = wrapper
    return times


def compression_step_ms(
    model: Any, ids: torch.Tensor, presses: dict[str, Any], reps: int
) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in presses}
    for rep in range(reps + 1):  # the first round warms up
        for name, press in presses.items():
            times = timed_hooks(press)
            with torch.no_grad(), press(model):
                model(ids, past_key_values=DynamicCache())
            press.forward_hook = type(press).forward_hook.__get__(press)
            if rep:
                samples[name].append(1e3 * sum(times))
    return {name: statistics.median(v) for name, v in samples.items()}


def pivoting_ms(n: int, budget: int, reps: int) -> float:
    g = torch.Generator().manual_seed(n)
    keys, values = torch.randn(1, 2, n, 64, generator=g), torch.randn(1, 2, n, 64, generator=g)
    queries, scores = torch.randn(1, 2, 64, 64, generator=g), torch.rand(1, 2, n, generator=g)
    features = metric_features(keys, values, queries, scores=scores)
    forced = forced_token_mask(n, 4, 32)
    default = SpectralKVPress()  # the press's own speed knobs
    options = {
        "block_size": default.block_size,
        "pool_factor": default.pool_factor,
        "energy_tol": default.energy_tol,
        "strategy": default.rank_strategy,
        "segment_budget": default.segment_budget,
    }
    select_coreset(features, scores, budget, forced, **options)
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        select_coreset(features, scores, budget, forced, **options)
        runs.append(1e3 * (time.perf_counter() - start))
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--keep", type=float, default=0.125)
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["step", "pivoting", "memory", "lapack", "stages"],
        help="which tables to print",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer = zoo.load("tiny-llama")
    stream = torch.from_numpy(heldout_tokens(tokenizer).haystack.ids.astype("int64"))
    if "step" in args.sections:
        compression_step_table(model, stream, args)
    if "pivoting" in args.sections:
        pivoting_table(args.reps)
    if "memory" in args.sections:
        memory_table(model, stream, args)
    if "lapack" in args.sections:
        lapack_table(model, args)
    if "stages" in args.sections:
        stages_table(model, stream, args)


# the stages of one prefill's compression, as (module, attribute) of the functions that run them
_STAGES = {
    "window attention": (integration, "_window_attention"),
    "entropy": (integration, "attention_concentration"),
    "candidate pool": (integration, "metric_candidates"),
    "duplicate sweep": (duplicates.DuplicatePairs, "find"),
    "pivoting": (core, "_segment_picks"),
    "score fill": (core, "_fill_by_score"),
    "layer budgets": (integration, "allocate_layer_budgets"),
    "cache write": (SpectralKVPress, "_write_selection"),
}


def stages_table(model: Any, stream: torch.Tensor, args: argparse.Namespace) -> None:
    """Median time per prefill of each stage of the default press (the wrapped functions' own wall time)."""
    print(f"\n## stages of the default press's step (ms per prefill, keep {args.keep})")
    print("| context | " + " | ".join(_STAGES) + " | whole step |")
    print("|---|" + "---|" * (len(_STAGES) + 1))
    for n in args.contexts:
        press = SpectralKVPress(compression_ratio=1 - args.keep)
        samples: dict[str, list[float]] = {name: [] for name in [*_STAGES, "whole step"]}
        with _timed_stages() as spent:
            for rep in range(args.reps + 1):  # the first round warms up
                spent.clear()
                step = timed_hooks(press)
                with torch.no_grad(), press(model):
                    model(stream[:n][None], past_key_values=DynamicCache())
                press.forward_hook = type(press).forward_hook.__get__(press)
                if rep:
                    for name in _STAGES:
                        samples[name].append(1e3 * spent.get(name, 0.0))
                    samples["whole step"].append(1e3 * sum(step))
        cells = " | ".join(f"{statistics.median(v):.1f}" for v in samples.values())
        print(f"| {n} | {cells} |")


@contextlib.contextmanager
def _timed_stages() -> Iterator[dict[str, float]]:
    """Wrap every stage function so its wall time adds up per stage; unwrap on exit."""
    spent: dict[str, float] = {}
    originals = {name: inspect.getattr_static(owner, attr) for name, (owner, attr) in _STAGES.items()}

    def timed(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    try:
        for name, (owner, attr) in _STAGES.items():
            raw = originals[name]
            if isinstance(raw, classmethod):  # wrap the bound method, which then needs no binding
                setattr(owner, attr, staticmethod(timed(name, getattr(owner, attr))))
            else:  # a function (of a module, or a method that binds as before)
                setattr(owner, attr, timed(name, raw))
        yield spent
    finally:
        for name, (owner, attr) in _STAGES.items():
            setattr(owner, attr, originals[name])


def compression_step_table(model: Any, stream: torch.Tensor, args: argparse.Namespace) -> None:
    ratio = 1 - args.keep
    print(
        f"## compression step per prefill (ms, all {model.config.num_hidden_layers} layers, keep {args.keep})"
    )
    print(
        "| context | SnapKV | SpectralKV default (segments) | ratio | SpectralKV restart | ratio "
        "| SpectralKV exact pivoting | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in args.contexts:
        ids = stream[:n][None]
        presses = {
            "snapkv": SnapKVPress(compression_ratio=ratio, window_size=32, kernel_size=5),
            "ours": SpectralKVPress(compression_ratio=ratio),
            "restart": SpectralKVPress(compression_ratio=ratio, rank_strategy="restart"),
            "exact": SpectralKVPress(compression_ratio=ratio, block_size=1, pool_factor=None, energy_tol=0.0),
        }
        ms = compression_step_ms(model, ids, presses, args.reps)
        cells = " | ".join(f"{ms[k]:.1f} | {ms[k] / ms['snapkv']:.2f}x" for k in ("ours", "restart", "exact"))
        print(f"| {n} | {ms['snapkv']:.1f} | {cells} |")


def pivoting_table(reps: int) -> None:
    print("\n## pivoting alone, fixed budget 128 tokens per head (2 KV heads, D = 128)")
    print("| context | ms | ms per 1k tokens |")
    print("|---|---|---|")
    for n in (1024, 2048, 4096, 8192):
        ms = pivoting_ms(n, 128, reps)
        print(f"| {n} | {ms:.2f} | {ms / (n / 1024):.2f} |")


def memory_table(model: Any, stream: torch.Tensor, args: argparse.Namespace) -> None:
    ratio = 1 - args.keep
    print(f"\n## peak KV cache during prefill (MiB, batch 1, keep {args.keep})")
    print("| context | full cache | SpectralKV dynamic | SpectralKV static | SnapKV | static vs full |")
    print("|---|---|---|---|---|---|")
    profile = calibrate_budget_profile(model, [stream[i * 1024 : (i + 1) * 1024][None] for i in range(4)])
    for n in (*args.contexts, 8192):
        ids = stream[:n][None]
        peaks = {
            name: compressed_prefill(model, ids, press).peak_cache_bytes / 2**20
            for name, press in {
                "full": None,
                "dynamic": SpectralKVPress(compression_ratio=ratio),
                "static": SpectralKVPress(compression_ratio=ratio, budget_mode="static", profile=profile),
                "snapkv": SnapKVPress(compression_ratio=ratio, window_size=32),
            }.items()
        }
        row = " | ".join(f"{peaks[k]:.1f}" for k in ("full", "dynamic", "static", "snapkv"))
        print(f"| {n} | {row} | -{100 * (1 - peaks['static'] / peaks['full']):.0f}% |")


def lapack_table(model: Any, args: argparse.Namespace) -> None:
    """One compiled pivoted QR (LAPACK sgeqp3) per (layer, KV head) over a pool of the default size."""
    from scipy.linalg.lapack import sgeqp3

    rows = model.config.num_hidden_layers * model.config.num_key_value_heads
    dim = 2 * model.config.head_dim  # the joint key-value feature dim
    pool_factor = SpectralKVPress().pool_factor or 1.0
    print(
        f"\n## one LAPACK sgeqp3 per (layer, KV head) = {rows} calls, D = {dim}, "
        f"pool {pool_factor:g} x budget"
    )
    print("| context | pool | ms per call | ms for all calls |")
    print("|---|---|---|---|")
    g = np.random.default_rng(0)
    for n in args.contexts:
        pool = int(pool_factor * max(1, int(n * args.keep)))
        matrix = np.asfortranarray(g.standard_normal((dim, pool), dtype=np.float32))
        runs = []
        for _ in range(args.reps + 1):
            start = time.perf_counter()
            sgeqp3(matrix.copy(order="F"), overwrite_a=1)
            runs.append(1e3 * (time.perf_counter() - start))
        per_call = statistics.median(runs[1:])
        print(f"| {n} | {pool} | {per_call:.2f} | {rows * per_call:.1f} |")


if __name__ == "__main__":
    main()
