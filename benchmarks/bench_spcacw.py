"""SP-CACW speed: the weight solve at 8/32/128/512 peers, and a round against a FedAvg round.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_spcacw.py`` (in-process, never through Ray).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch

from neurips26.data.federated import digits_federation
from neurips26.methods.spcacw import SPCACWConfig, choose_weights
from neurips26.methods.spcacw.baselines import BaselineConfig, run_baseline
from neurips26.methods.spcacw.engine import FlatMLP, run_weighted


def time_solve(n: int, form: str, solver: str, repeats: int) -> float:
    """Seconds per ``choose_weights`` call for ``n`` clients."""
    rng = np.random.default_rng(n)
    variance = rng.uniform(0.1, 2.0, n)
    bias = rng.uniform(0.0, 1.0, n) ** 2
    bias[0] = 0.0
    choose_weights(variance, bias, scale=1.0, bias_form=form, solver=solver)
    start = time.perf_counter()
    for _ in range(repeats):
        choose_weights(variance, bias, scale=1.0, bias_form=form, solver=solver)
    return (time.perf_counter() - start) / repeats


def time_rounds(rounds: int, hidden: int, all_targets: bool) -> dict[str, float]:
    """Seconds per round of FedAvg and SP-CACW; interleaved, best of 7 (the machine is shared).

    SP-CACW runs with its default ``variance_every=4`` (s_i re-estimated every 4th round) and with
    ``variance_every=1`` (every round); the solve share is the weight solve's part of the SP-CACW run.
    """
    data = digits_federation(seed=0)
    model = FlatMLP((64, hidden, 10))
    config = SPCACWConfig()
    common = {"rounds": rounds, "batch": 32, "seed": 0, "eval_every": rounds}
    runs = {
        "fedavg": lambda: run_baseline(
            BaselineConfig("fedavg"), data, model, lr=config.lr, local_steps=1, targets=[0], **common
        ),
        "spcacw (1 target)": lambda: run_weighted(data, model, config, targets=[0], **common),
        "spcacw (1 target, s every round)": lambda: run_weighted(
            data, model, replace(config, variance_every=1), targets=[0], **common
        ),
    }
    if all_targets:
        runs["spcacw (16 targets)"] = lambda: run_weighted(data, model, config, **common)
    best = dict.fromkeys(runs, float("inf"))
    solve: dict[str, float] = {}
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(7):
        for name, fn in runs.items():
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            if elapsed < best[name]:
                best[name] = elapsed
                if hasattr(result, "solve_seconds"):
                    solve[name + " solve share"] = result.solve_seconds / elapsed
    out = {name: value / rounds for name, value in best.items()}
    out.update(solve)
    return out


def main() -> None:
    torch.set_num_threads(1)
    print("weight solve (ms per call)")
    print(f"{'peers':>6} {'exact/linear':>13} {'exact/squared':>14} {'osqp/linear':>12} {'osqp/squared':>13}")
    pairs = [(s, f) for s in ("exact", "osqp") for f in ("linear", "squared")]
    for n in (8, 32, 128, 512):
        row = [time_solve(n, f, s, 200 if s == "exact" else 3) * 1e3 for s, f in pairs]
        print(f"{n:>6} {row[0]:>13.3f} {row[1]:>14.3f} {row[2]:>12.2f} {row[3]:>13.2f}")
    for hidden in (32, 256):
        print(f"\ndigits round, MLP 64-{hidden}-10, 16 clients, batch 32 (best of 7 runs of 200 rounds)")
        rounds = time_rounds(200, hidden, all_targets=hidden <= 64)
        for name, value in rounds.items():
            shown = f"{value:8.3f}" if "share" in name else f"{value * 1e3:8.3f} ms"
            print(f"  {name:<46} {shown}")
        for name in ("spcacw (1 target)", "spcacw (1 target, s every round)"):
            print(f"  ratio {name} / fedavg".ljust(50) + f"{rounds[name] / rounds['fedavg']:6.2f}")


if __name__ == "__main__":
    main()
