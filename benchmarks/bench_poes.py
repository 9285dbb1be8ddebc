"""POES speed: lazy vs naive greedy, one scheduling round, and the 1PL refit's scaling.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_poes.py [greedy]`` (Markdown tables; ~2 minutes, ``greedy``:
only the lazy-vs-naive tables).
Issue targets: one round (1,000 items, 50 prompts) < 50 ms; lazy greedy >= 5x faster than naive greedy at
that size with the same subset; refit cost linear in the number of logged responses (10^3 .. 10^6).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from neurips26.methods.poes import POESScheduler
from neurips26.methods.poes.irt import fit_1pl_map
from neurips26.methods.poes.selection import SubsetObjective, lazy_greedy, rbf_similarity


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


def round_log(rng: np.random.Generator, n_items: int, n_prompts: int, per_prompt: int = 40):
    """A sparse log: ``n_prompts`` 1PL examinees, each scored on ``per_prompt`` random items."""
    theta, b = rng.normal(size=n_prompts), rng.normal(size=n_items)
    p = np.repeat(np.arange(n_prompts), per_prompt)
    i = rng.integers(0, n_items, p.size)
    y = (rng.random(p.size) < 1 / (1 + np.exp(b[i] - theta[p]))).astype(float)
    return p, i, y


def greedy_objectives(kind: str, seed: int, n_items: int, n_prompts: int, k: int) -> SubsetObjective:
    """``poes``: the objective a POESScheduler builds in a round (its 1PL refit on ``n_prompts`` prompts'
    responses, its leaders, utility and controller weight) over clustered embeddings; ``random``: a
    uniform random utility, isotropic Gaussian embeddings and lam = 0.5."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        emb = rng.normal(size=(n_items, 16))
        return SubsetObjective(rng.random(n_items), rbf_similarity(emb), 0.5, k / n_items)
    scheduler = POESScheduler(k, list(range(n_items)), clustered_embeddings(rng, n_items))
    objective, _ = scheduler.round_objective(*round_log(rng, n_items, n_prompts), n_prompts)
    return objective


def bench_greedy(n_items: int = 1000, n_prompts: int = 50, ks=(10, 20, 40), seeds: int = 3) -> None:
    """Naive greedy (every gain recomputed each step with the objective's vectorised kernel) vs lazy
    greedy, on a real POES round's objective and on a random one."""
    print(f"\n## Greedy at {n_items} items, {n_prompts} prompts (median of 30 interleaved calls)\n")
    print("| objective | k | seed | lam | naive ms | lazy ms | speed-up | same subset |")
    print("|---|---|---|---|---|---|---|---|")
    ratios: dict = {}
    for kind in ("poes", "random"):
        for k in ks:
            for seed in range(seeds):
                objective = greedy_objectives(kind, seed, n_items, n_prompts, k)
                t = interleaved(
                    {
                        "naive": lambda o=objective, k=k: naive_greedy(o, k),
                        "lazy": lambda o=objective, k=k: lazy_greedy(o, k),
                    }
                )
                same = naive_greedy(objective, k) == lazy_greedy(objective, k)
                ratio = t["naive"] / t["lazy"]
                ratios.setdefault((kind, k), []).append(ratio)
                print(
                    f"| {kind} | {k} | {seed} | {objective.lam:.2f} | {1e3 * t['naive']:.2f} | "
                    f"{1e3 * t['lazy']:.2f} | {ratio:.1f}x | {same} |"
                )
    print("\n| objective | k | speed-up, min / median / max over seeds |\n|---|---|---|")
    for (kind, k), r in ratios.items():
        print(f"| {kind} | {k} | {min(r):.1f}x / {np.median(r):.1f}x / {max(r):.1f}x |")


def bench_round(n_items: int = 1000, n_prompts: int = 50, k: int = 20, per_prompt: int = 40) -> None:
    rng = np.random.default_rng(1)
    p, i, y = round_log(rng, n_items, n_prompts, per_prompt)
    emb = clustered_embeddings(rng, n_items)
    colds = []
    for _ in range(5):  # cold rounds: a fresh scheduler (1PL from zero, lazy greedy)
        scheduler = POESScheduler(k, list(range(n_items)), emb)
        start = time.perf_counter()
        scheduler.select_indices(p, i, y, n_prompts)
        colds.append(time.perf_counter() - start)
    cold, cold_worst = 1e3 * np.median(colds), 1e3 * max(colds)
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
    cold_text = f"median {cold:.1f} ms, max {cold_worst:.1f} ms"
    print(f"- cold round (1PL from zero + lazy greedy, 5 runs): {cold_text}")


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
