"""POES speed: lazy vs naive greedy, one scheduling round, and the 1PL refit's scaling.

Run: ``OMP_NUM_THREADS=1 python benchmarks/poes/bench_poes.py [greedy]`` (Markdown tables; ~2 minutes, \
    ``greedy``:
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
from neurips26.methods.poes.selection import (
    SubsetObjective,
    _float32_upper_bounds,
    lazy_greedy,
    rbf_similarity,
)


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


def naive_greedy_float32(objective: SubsetObjective, k: int) -> list[int]:
    """Plain greedy with lazy greedy's float32 trick and no laziness: each step one float32 pass gives
    certified upper bounds on every gain; exact gains only for the items whose bound reaches the exact
    gain of the largest bound. Same subset as :func:`naive_greedy` (for a float32 similarity)."""
    n = len(objective.utility)
    sim = objective.similarity
    lam_utility = objective.lam * objective.utility
    scale = (1.0 - objective.lam) * objective.coverage_scale
    coverage = np.zeros(n, dtype=sim.dtype)
    chosen: list[int] = []
    for _ in range(k):
        covered = coverage.sum(dtype=np.float64)
        upper = _float32_upper_bounds(np.maximum(sim, coverage).sum(axis=1), lam_utility, scale, covered, n)
        upper[chosen] = -np.inf
        top = int(np.argmax(upper))
        exact = objective.gains(coverage, np.array([top]))[0]
        rows = np.flatnonzero(upper >= exact)
        gains = np.full(n, -np.inf)
        gains[rows] = objective.gains(coverage, rows)
        i = int(np.argmax(gains))
        chosen.append(i)
        coverage = np.maximum(coverage, sim[i])
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
    greedy, on a real POES round's objective and on a random one; beside them, the float32 bounds alone
    (naive greedy with them) and the lazy bounds alone (lazy greedy with exact float64 full passes)."""
    print(f"\n## Greedy at {n_items} items, {n_prompts} prompts (ms, median of 30 interleaved calls)\n")
    print(
        "| objective | k | seed | lam | naive | naive, float32 bounds | lazy, exact passes | lazy "
        "| lazy vs naive | same subset (all four) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict = {}
    for kind in ("poes", "random"):
        for k in ks:
            for seed in range(seeds):
                objective = greedy_objectives(kind, seed, n_items, n_prompts, k)
                fns = {
                    "naive": lambda o=objective, k=k: naive_greedy(o, k),
                    "naive32": lambda o=objective, k=k: naive_greedy_float32(o, k),
                    "lazy64": lambda o=objective, k=k: lazy_greedy(o, k, float32_bounds=False),
                    "lazy": lambda o=objective, k=k: lazy_greedy(o, k),
                }
                subsets = [fn() for fn in fns.values()]
                same = all(subset == subsets[0] for subset in subsets)
                t = interleaved(fns)
                for name in ("naive32", "lazy64", "lazy"):
                    ratios.setdefault((kind, k, name), []).append(t["naive"] / t[name])
                cells = " | ".join(f"{1e3 * t[name]:.2f}" for name in fns)
                speed = t["naive"] / t["lazy"]
                print(f"| {kind} | {k} | {seed} | {objective.lam:.2f} | {cells} | {speed:.1f}x | {same} |")
    print("\nSpeed-up over naive greedy, min / median / max over seeds:\n")
    print("| objective | k | naive, float32 bounds | lazy, exact passes | lazy |\n|---|---|---|---|---|")
    for kind in ("poes", "random"):
        for k in ks:
            row = [ratios[(kind, k, name)] for name in ("naive32", "lazy64", "lazy")]
            text = " | ".join(f"{min(r):.1f} / {np.median(r):.1f} / {max(r):.1f}x" for r in row)
            print(f"| {kind} | {k} | {text} |")


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
