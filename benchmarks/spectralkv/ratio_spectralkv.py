"""SpectralKV's compression step as a multiple of kvpress's SnapKV step (issue #47: goal <= 1.5x).

    PYTHONPATH=src python benchmarks/spectralkv/ratio_spectralkv.py [--contexts 1024 2048 4096] [--reps 7]
        [--models tiny-llama stock-llama-gqa4]

The step is every press hook's time during one prefill (the model's own attention excluded), summed over
layers, at keep 12.5%. The two presses alternate within one process (SnapKV, SpectralKV, SnapKV, ...; the
first round warms up) and the median over repetitions is reported, so background load hits both alike;
the ratio of the mean wall times shows rare stalls that the median hides. Two clocks: wall time, and the
hook thread's CPU time (``time.thread_time``: with one torch thread the press's work runs in the calling
thread, so on a shared machine this excludes the time the process waited for a core, which wall time
does not; it would miss work handed to other threads, which the press's kernels no longer do).
Models: the zoo's ``tiny-llama`` (4 query / 2 KV heads, head dim 64) and stock transformers configs
with random weights, built here, of a realistic attention shape: GQA groups of 4 (8 query / 2 KV heads,
head dim 64, Llama) and of 7 (14 / 2 heads, Qwen2-0.5B's shape).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from kvpress import SnapKVPress
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from neurips26 import zoo
from neurips26.methods.spectralkv import SpectralKVPress
from neurips26.zoo.evaluation import heldout_tokens

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def stock_model(name: str) -> Any:
    """A stock transformers model with random weights (seed 0) of a realistic attention shape."""
    torch.manual_seed(0)
    common = {"hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4, "vocab_size": 2048}
    # the vocabulary of the zoo tokenizer whose ids the benchmark feeds
    if name == "stock-llama-gqa4":
        config = LlamaConfig(
            num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=8192, **common
        )
        return LlamaForCausalLM(config).eval()
    if name == "stock-qwen2-gqa7":
        config = Qwen2Config(
            num_attention_heads=14, num_key_value_heads=2, head_dim=64, max_position_embeddings=8192, **common
        )
        return Qwen2ForCausalLM(config).eval()
    raise ValueError(f"unknown model {name!r}")


def timed_hooks(press: Any, clock: Callable[[], float]) -> list[float]:
    """Wrap ``press.forward_hook`` so every call's duration on ``clock`` is appended to the returned list."""
    spent: list[float] = []
    hook = press.forward_hook

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        out = hook(*args, **kwargs)
        spent.append(clock() - start)
        return out

    press.forward_hook = wrapper
    return spent


def step_ms(
    model: Any, ids: torch.Tensor, presses: dict[str, Any], reps: int
) -> dict[tuple[str, str, str], float]:
    """Median and mean step (ms per prefill) per (press, clock, statistic), the presses alternating; one
    warm-up round. The mean shows stalls the median hides (a rare call that waits hundreds of ms)."""
    samples: dict[tuple[str, str], list[float]] = {(p, c): [] for p in presses for c in CLOCKS}
    for rep in range(reps + 1):
        for name, press in presses.items():
            spent = {clock: timed_hooks(press, CLOCKS[clock]) for clock in CLOCKS}
            with torch.no_grad(), press(model):
                model(ids, past_key_values=DynamicCache())
            del press.forward_hook  # the instance attributes go; the class's hook is back
            if rep:
                for clock, times in spent.items():
                    samples[(name, clock)].append(1e3 * sum(times))
    stats = {(*key, "median"): statistics.median(values) for key, values in samples.items()}
    return stats | {(*key, "mean"): statistics.fmean(values) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--keep", type=float, default=0.125)
    parser.add_argument("--models", nargs="+", default=["tiny-llama", "stock-llama-gqa4"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average at start: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} (1 / 5 / 15 min)")
    print(f"## compression step per prefill (ms, keep {args.keep}, median of {args.reps} interleaved reps)")
    print(
        "| model | context | SnapKV wall | SpectralKV wall | ratio wall "
        "| SnapKV CPU | SpectralKV CPU | ratio CPU | ratio of mean wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    zoo_model, tokenizer = zoo.load("tiny-llama")
    # held-out stdlib text in the zoo tokenizer's ids (2048 of them, the stock configs' vocabulary too)
    stream = torch.from_numpy(heldout_tokens(tokenizer).haystack.ids.astype("int64"))
    for model_name in args.models:
        model = zoo_model if model_name == "tiny-llama" else stock_model(model_name)
        for n in args.contexts:
            ids = stream[:n][None]
            presses = {
                "snapkv": SnapKVPress(compression_ratio=1 - args.keep, window_size=32, kernel_size=5),
                "spectralkv": SpectralKVPress(compression_ratio=1 - args.keep),
            }
            ms = step_ms(model, ids, presses, args.reps)
            cells = []
            for clock in CLOCKS:
                snap, ours = ms[("snapkv", clock, "median")], ms[("spectralkv", clock, "median")]
                cells += [f"{snap:.1f}", f"{ours:.1f}", f"{ours / snap:.2f}x"]
            cells.append(f"{ms[('spectralkv', 'wall', 'mean')] / ms[('snapkv', 'wall', 'mean')]:.2f}x")
            print(f"| {model_name} | {n} | {' | '.join(cells)} |", flush=True)
    print(f"load average at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
