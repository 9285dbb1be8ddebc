"""POES speed: lazy vs naive greedy, one scheduling round, and the 1PL refit's scaling.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_poes.py`` (prints a Markdown table; ~1 minute).
Issue targets: one round (1,000 items, 50 prompts) < 50 ms; lazy greedy >= 5x faster than naive greedy at
that size with the same subset; refit cost linear in the number of logged responses (10^3 .. 10^6).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from neurips26.methods.poes import POESScheduler
from neurips26.methods.poes.irt import fit_1pl_map
from neurips26.methods.poes.selection import SubsetObjective, discrimination_utility, lazy_greedy


def naive_greedy(objective: SubsetObjective, k: int) -> list[int]:
    """Plain greedy: every marginal gain recomputed (vectorised) at every step."""
    coverage = np.zeros(len(objective.utility), dtype=objective.similarity.dtype)
    chosen: list[int] = []
    for _ in range(k):
        gains = objective.gains(coverage)
        gains[chosen] = -np.inf
        i = int(np.argmax(gains))
        chosen.append(i)
        coverage = np.maximum(coverage, objective.similarity[i])
    return chosen


def best_of(fn, *args, repeats: int = 5, **kwargs) -> float:
    """Best wall time of ``repeats`` calls of ``fn(*args, **kwargs)``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return min(times)


def clustered_embeddings(rng: np.random.Generator, n: int, clusters: int = 20, dim: int = 16) -> np.ndarray:
    centres = rng.normal(size=(clusters, dim))
    return centres[rng.integers(0, clusters, n)] + 0.5 * rng.normal(size=(n, dim))


def interleaved(fns: dict, repeats: int = 30) -> dict:
    """Median wall time of each function, the calls interleaved so machine load hits all of them alike."""
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def bench_greedy(n_items: int = 1000, k: int = 20, n_prompts: int = 50, seeds: int = 3) -> None:
    """Naive greedy (every gain recomputed each step, the same vectorised kernel) vs lazy greedy on the
    objective of a real POES round: 1PL difficulties fitted on ``n_prompts`` prompts' responses."""
    print(f"\n## Greedy at {n_items} items, {n_prompts} prompts, k = {k} (median of 30 interleaved calls)\n")
    print("| embeddings | seed | naive ms | lazy ms | speed-up | same subset |\n|---|---|---|---|---|---|")
    for kind in ("clustered", "isotropic"):
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            emb = (
                clustered_embeddings(rng, n_items) if kind == "clustered" else rng.normal(size=(n_items, 16))
            )
            scheduler = POESScheduler(k, list(range(n_items)), emb)
            theta, b = rng.normal(size=n_prompts), rng.normal(size=n_items)
            p = np.repeat(np.arange(n_prompts), 40)
            i = rng.integers(0, n_items, p.size)
            y = (rng.random(p.size) < 1 / (1 + np.exp(b[i] - theta[p]))).astype(float)
            fit = fit_1pl_map(p, i, y, n_prompts, n_items)
            leaders = np.argsort(-fit.theta)[:4]
            utility = discrimination_utility(fit.theta[leaders], np.full(4, 0.25), fit.difficulty)
            objective = SubsetObjective(utility / utility.max(), scheduler.similarity, 0.5, k / n_items)
            t = interleaved(
                {
                    "naive": lambda o=objective: naive_greedy(o, k),
                    "lazy": lambda o=objective: lazy_greedy(o, k),
                }
            )
            same = naive_greedy(objective, k) == lazy_greedy(objective, k)
            print(
                f"| {kind} | {seed} | {1e3 * t['naive']:.2f} | {1e3 * t['lazy']:.2f} | "
                f"{t['naive'] / t['lazy']:.1f}x | {same} |"
            )


def bench_round(n_items: int = 1000, n_prompts: int = 50, k: int = 20, per_prompt: int = 40) -> None:
    rng = np.random.default_rng(1)
    theta, b = rng.normal(size=n_prompts), rng.normal(size=n_items)
    p = np.repeat(np.arange(n_prompts), per_prompt)
    i = rng.integers(0, n_items, p.size)
    y = (rng.random(p.size) < 1 / (1 + np.exp(b[i] - theta[p]))).astype(float)
    scheduler = POESScheduler(k, list(range(n_items)), clustered_embeddings(rng, n_items))
    cold = best_of(scheduler.select_indices, p, i, y, n_prompts, repeats=1)
    times = []
    for r in range(10):  # warm rounds: 4 new prompts per round, each scored on the subset
        new = n_prompts + 4 * r
        subset = np.asarray(scheduler.state_dict()["subset"])
        p = np.concatenate([p, np.repeat(np.arange(new, new + 4), k)])
        i = np.concatenate([i, np.tile(subset, 4)])
        y = np.concatenate([y, (rng.random(4 * k) < 0.6).astype(float)])
        start = time.perf_counter()
        scheduler.select_indices(p, i, y, new + 4)
        times.append(time.perf_counter() - start)
    median, worst = 1e3 * np.median(times), 1e3 * max(times)
    print(f"\n## One round at {n_items} items, {n_prompts}+ prompts, k = {k}\n")
    print(f"- warm round (1PL refit + utility + <= m swaps): median {median:.1f} ms, max {worst:.1f} ms")
    print(f"- cold round (1PL from zero + lazy greedy): {1e3 * cold:.1f} ms")


def bench_refit() -> None:
    print("\n## 1PL MAP refit vs logged responses\n")
    print("| responses | cold ms | warm ms (1% new) | cold us / response |\n|---|---|---|---|")
    rng = np.random.default_rng(2)
    for n in (10**3, 10**4, 10**5, 10**6):
        n_prompts, n_items = max(10, n // 1000), 1000
        theta, b = rng.normal(size=n_prompts), rng.normal(size=n_items)
        p = rng.integers(0, n_prompts, n)
        i = rng.integers(0, n_items, n)
        y = (rng.random(n) < 1 / (1 + np.exp(b[i] - theta[p]))).astype(float)
        repeats = 3 if n < 10**6 else 1
        cold = best_of(fit_1pl_map, p, i, y, n_prompts, n_items, repeats=repeats)
        m = int(0.99 * n)
        fit = fit_1pl_map(p[:m], i[:m], y[:m], n_prompts, n_items)
        warm = best_of(
            fit_1pl_map,
            p,
            i,
            y,
            n_prompts,
            n_items,
            theta0=fit.theta,
            difficulty0=fit.difficulty,
            repeats=repeats,
        )
        print(f"| {n:,} | {1e3 * cold:.1f} | {1e3 * warm:.1f} | {1e6 * cold / n:.2f} |")


if __name__ == "__main__":
    bench_greedy()
    if sys.argv[1:] == ["greedy"]:
        sys.exit()
    bench_round()
    bench_refit()
