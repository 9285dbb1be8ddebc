"""Does masking content (a calculator's display value) in the ambiguity signal change what ScreenSearch finds
on a real app? ScreenSearch with ``mask_content`` on and off, frontier-only PUCT and random, equal budgets.

    /work/notes/cpurun .venv/bin/python benchmarks/screensearch/screensearch_content_mask.py --app \
        galculator \\
        --budget 60 --seeds 0 1

Prints one JSON line per run (states found, ambiguity mass at the end, the share of the budget spent on
actions the signal called ambiguous, replay success) and a summary per system.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

from neurips26.methods.screensearch import Explorer, ScreenSearchConfig
from neurips26.methods.screensearch.experiment import POLICIES, ScreenSearchExperimentConfig, make_backend

SYSTEMS = {
    "screensearch": ("screensearch", {}),
    "screensearch_unmasked": ("screensearch", {"mask_content": False}),
    "frontier_puct": ("screensearch", {"beta": 0.0}),
    "random": ("random", {}),
}


def run(app: str, system: str, budget: int, seed: int) -> dict:
    kind, overrides = SYSTEMS[system]
    config = replace(ScreenSearchConfig(dedup_threshold=1.0), **overrides)
    backend = make_backend(ScreenSearchExperimentConfig(app=app), seed)
    try:
        explorer = Explorer(backend, POLICIES[kind](), config=config, seed=seed)
        start = time.perf_counter()
        stats = explorer.run(budget)
        seconds = time.perf_counter() - start
    finally:
        backend.close()
    estimator = explorer.estimator
    pairs = list(explorer.graph.outcomes)
    ambiguous = [pair for pair in pairs if estimator.ambiguity(*pair) > 0]
    return {
        "app": app,
        "system": system,
        "seed": seed,
        "budget": budget,
        "states": explorer.graph.num_states,
        "ambiguous_pairs": len(ambiguous),
        "tried_pairs": len(pairs),
        "ambiguity_mass": round(estimator.mass(), 4),
        "replay_success": round(stats.replay_success, 3),
        "seconds": round(seconds, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default="galculator")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    args = parser.parse_args()
    rows = []
    for seed in args.seeds:
        for system in args.systems:
            row = run(args.app, system, args.budget, seed)
            print(json.dumps(row), flush=True)
            rows.append(row)
    for system in args.systems:
        mine = [r for r in rows if r["system"] == system]
        summary = {
            "summary": system,
            "states_mean": statistics.mean(r["states"] for r in mine),
            "states": [r["states"] for r in mine],
            "ambiguous_pairs": [r["ambiguous_pairs"] for r in mine],
        }
        print(json.dumps(summary), flush=True)
