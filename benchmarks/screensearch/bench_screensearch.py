"""ScreenSearch speed: retrieval + dedup of a new screen at 1k/10k/100k stored states, versus a linear
exact-Jaccard scan; actions per second per real-app worker; synthetic throughput per Ray worker count.

    /work/notes/cpurun .venv/bin/python benchmarks/screensearch/bench_screensearch.py --sizes 1000 \
        10000 100000
    .venv/bin/python benchmarks/screensearch/bench_screensearch.py --sizes --real galculator mousepad \
        gnumeric \\
        abiword pcmanfm web_wizard                                     # actions/s per real-app worker
    /work/notes/cpurun .venv/bin/python benchmarks/screensearch/bench_screensearch.py --sizes --ray 1 2 4 8 \\
        --ray-budget 2000                                              # synthetic throughput per workers

Stored screens are token sets shaped like our screens: ~80 tokens each, 30 from a shared template
vocabulary (menus, frames) and 50 from a Zipf-distributed pool of 200k page tokens. A query is a stored
screen with 4 tokens replaced (a toast, a changed label): dedup must find it, and retrieval returns the
K = 8 best BM25 matches re-scored by exact Jaccard (what the ambiguity signal reads).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from neurips26.methods.screensearch.graph import StateGraph
from neurips26.methods.screensearch.index import exact_scan


def _screens(n: int, rng: np.random.Generator) -> list[list[str]]:
    template = [f"t{i:011x}" for i in range(300)]
    ranks = np.arange(1, 200_001)
    zipf = 1.0 / ranks
    zipf /= zipf.sum()
    pages = rng.choice(200_000, size=(n, 50), p=zipf)
    starts = rng.integers(0, 270, size=n)
    return [
        template[s : s + 30] + [f"p{int(v):011x}" for v in row] for s, row in zip(starts, pages, strict=True)
    ]


def bench_retrieval(
    sizes: list[int], queries: int = 200, seed: int = 0, query_terms: tuple[int, ...] = (32, 16)
) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        graph = StateGraph(dedup_threshold=0.85)
        screens = _screens(n, rng)
        start = time.perf_counter()
        for state, tokens in enumerate(screens, 1):
            graph.index.add(state, tokens)
        build_s = time.perf_counter() - start
        picks = rng.choice(n, size=queries, replace=False)
        scans = []
        for i in picks[: max(5, queries // 20)]:
            t0 = time.perf_counter()
            exact_scan(graph.index.sets, [*screens[i][:-4], "x", "y", "z", "w"], 0.85)
            scans.append(time.perf_counter() - t0)
        for terms in query_terms:
            graph.index.query_terms = terms
            ours, dedup_only, found = [], [], 0
            for i in picks:
                query = screens[i][:-4] + [f"q{int(v):011x}" for v in rng.integers(0, 10**9, 4)]
                t0 = time.perf_counter()
                dup = graph.index.near_duplicates(query, 0.85)
                t1 = time.perf_counter()
                graph.index.similar(query, k=8, min_similarity=0.7)
                ours.append(time.perf_counter() - t0)
                dedup_only.append(t1 - t0)
                found += bool(dup) and dup[0][0] == i + 1
            row = {
                "stored": n,
                "query_terms": terms,
                "build_s": round(build_s, 2),
                "dedup_median_ms": round(1000 * statistics.median(dedup_only), 3),
                "ours_median_ms": round(1000 * statistics.median(ours), 3),
                "ours_p95_ms": round(1000 * float(np.percentile(ours, 95)), 3),
                "scan_median_ms": round(1000 * statistics.median(scans), 3),
                "speedup": round(statistics.median(scans) / statistics.median(ours), 1),
                "dedup_recall": found / queries,
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def bench_real(apps: list[str], actions: int = 30, policy: str = "random") -> list[dict]:
    """Actions per second of one real-app worker (``policy``, ``actions`` actions after start-up)."""
    from neurips26.methods.screensearch import Explorer, ScreenSearchConfig
    from neurips26.methods.screensearch.experiment import POLICIES, ScreenSearchExperimentConfig, make_backend

    rows = []
    for name in apps:
        start = time.perf_counter()
        app = make_backend(ScreenSearchExperimentConfig(app=name), 0)
        startup = time.perf_counter() - start
        try:
            config = ScreenSearchConfig(dedup_threshold=1.0)
            explorer = Explorer(app, POLICIES[policy](), config=config, seed=0)
            stats = explorer.run(actions)
            row = {
                "app": name,
                "policy": policy,
                "actions": stats.actions,
                "actions_per_s": round(stats.actions / stats.seconds, 2),
                "startup_s": round(startup, 2),
                "restarts": stats.restarts,
                "crashes": stats.crashes,
                "states": explorer.graph.num_states,
            }
        finally:
            app.close()
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def bench_ray(workers: list[int], budget: int = 300) -> list[dict]:
    """Synthetic throughput with ``n`` Ray explorer actors of ``budget`` actions each (one world).

    ``seconds`` counts actor start-up, exploration and ingestion into the single graph-store actor;
    ``ray_init_s`` (starting the local Ray instance) is reported apart. ``workers=1`` runs in-process.
    """
    import tempfile

    import ray

    from neurips26.methods.screensearch.distributed import explore

    rows = []
    for n in workers:
        init = 0.0
        if n > 1:
            t0 = time.perf_counter()
            ray.init(num_cpus=n, include_dashboard=False, log_to_driver=False)
            init = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            summary = explore("synthetic", "screensearch", budget, n, f"{folder}/g.sqlite", seed=0)
            seconds = time.perf_counter() - start
        ray.shutdown()
        row = {
            "workers": n,
            "budget_per_worker": budget,
            "actions": summary["actions"],
            "ray_init_s": round(init, 1),
            "seconds": round(seconds, 1),
            "actions_per_s": round(summary["actions"] / seconds, 1),
            "states": summary["states"],
            "cores": os.cpu_count(),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--query-terms", type=int, nargs="*", default=[32, 16])
    parser.add_argument(
        "--real", nargs="*", default=None, help="real apps (none given: galculator web_wizard)"
    )
    parser.add_argument("--real-actions", type=int, default=30)
    parser.add_argument("--ray", type=int, nargs="*", default=None)
    parser.add_argument("--ray-budget", type=int, default=300, help="actions per Ray worker")
    args = parser.parse_args()
    if args.sizes:
        bench_retrieval(args.sizes, query_terms=tuple(args.query_terms))
    if args.real is not None:
        bench_real(args.real or ["galculator", "web_wizard"], args.real_actions)
    if args.ray:
        bench_ray(args.ray, args.ray_budget)
