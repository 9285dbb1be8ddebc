"""Scale-out: explorers as Ray actors, one graph-store actor as the single SQLite writer.

Paper says: one "shared deduplicated state graph across VM workers". We chose: each
:class:`ExplorerWorker` owns its backend (display, bus and app, or browser, or synthetic world) and explores
with its own in-memory view; it ships its event log (screens with their tokens, transitions) to the one
:class:`GraphStore`, which deduplicates every screen into the shared SQLite graph (WAL) and counts every
transition. Why: one writer keeps SQLite consistent without locks across processes, and dedup in the store
makes states found by two workers one state. Limitation: during a run, workers do not see each other's
discoveries (they merge at the end of each shipment). ``workers=1`` runs the same code in-process.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from neurips26.methods.screensearch.graph import StateGraph
from neurips26.methods.screensearch.screen import Screen

SYSTEM_OVERRIDES = {
    "screensearch": ("screensearch", {}),
    "frontier_puct": ("screensearch", {"beta": 0.0}),
    "ambiguity_only": ("screensearch", {"frontier_weight": 0.0}),
    "screensearch_noprior": ("screensearch", {"prior": "uniform"}),
    "novelty_uct": ("novelty_uct", {}),
    "bfs": ("bfs", {}),
    "dfs": ("dfs", {}),
    "random": ("random", {}),
}


def ingest(graph: StateGraph, events: list[tuple], worker: str) -> dict[str, int]:
    """Replay a worker's event log into ``graph`` (dedup on insert); returns counts added."""
    last: list[int] = []
    transitions = 0
    for event in events:
        if event[0] == "screen":
            _, tree, app, window, truth, tokens = event
            screen = Screen.from_tree(tree, app=app, window=window, truth=truth)
            state, _ = graph.add_screen(screen, tokens, worker)
            last = [*last[-1:], state]
        else:
            _, signature, history = event
            graph.record(last[0], signature, last[1], history)
            transitions += 1
    graph.commit()
    return {"transitions": transitions}


REAL_APP_DEDUP = 1.0  # ours: on real apps the content is the state (a calculator display): exact dedup


def run_worker(
    app: str,
    policy: str,
    budget: int,
    seed: int,
    worker: str,
    dedup_threshold: float | None = None,
    world_seed: int | None = None,
) -> dict[str, Any]:
    """One explorer, in this process: returns its event log and counters.

    ``seed`` seeds the policy, ``world_seed`` (default: ``seed``) the synthetic world, so several workers
    explore one app with different policy seeds. ``dedup_threshold=None``: the config default on the
    synthetic world, 1.0 (exact) on real apps.
    """
    from neurips26.methods.screensearch.config import ScreenSearchConfig
    from neurips26.methods.screensearch.experiment import POLICIES, ScreenSearchExperimentConfig, make_backend
    from neurips26.methods.screensearch.explorer import Explorer

    if policy not in SYSTEM_OVERRIDES:
        raise ValueError(f"policy={policy!r} unknown; choose one of {sorted(SYSTEM_OVERRIDES)}")
    kind, overrides = SYSTEM_OVERRIDES[policy]
    if dedup_threshold is None and app != "synthetic":
        dedup_threshold = REAL_APP_DEDUP
    if dedup_threshold is not None:
        overrides = {**overrides, "dedup_threshold": dedup_threshold}
    backend = make_backend(ScreenSearchExperimentConfig(app=app), seed if world_seed is None else world_seed)
    try:
        explorer = Explorer(
            backend,
            POLICIES[kind](),
            config=replace(ScreenSearchConfig(), **overrides),
            seed=seed,
            worker=worker,
            keep_events=True,
        )
        stats = explorer.run(budget)
    finally:
        backend.close()
    return {
        "events": explorer.events,
        "actions": stats.actions,
        "replays": stats.replays,
        "replay_failures": stats.replay_failures,
        "crashes": stats.crashes,
    }


def explore(
    app: str,
    policy: str,
    budget: int,
    workers: int,
    db: str,
    seed: int = 0,
    dedup_threshold: float | None = None,
) -> dict[str, int]:
    """Explore ``app`` with ``workers`` explorers into the graph at ``db``; returns a summary.

    Workers explore the same app (the synthetic world of ``seed``) with policy seeds ``seed + i``.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if budget <= 0:
        raise ValueError(f"budget must be > 0, got {budget}")
    if workers == 1:
        results = [run_worker(app, policy, budget, seed, "w0", dedup_threshold)]
        graph = StateGraph(db, dedup_threshold=_threshold(app, dedup_threshold))
        ingest(graph, results[0]["events"], "w0")
    else:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        threshold = _threshold(app, dedup_threshold)
        store = ray.remote(GraphStore).remote(db, threshold)
        actors = [
            ray.remote(ExplorerWorker).remote(app, policy, seed, f"w{i}", threshold) for i in range(workers)
        ]
        results = ray.get([a.explore.remote(budget) for a in actors])
        ray.get([store.ingest.remote(r["events"], f"w{i}") for i, r in enumerate(results)])
        ray.get(store.close.remote())
        graph = StateGraph(db, dedup_threshold=threshold)
    summary = {
        "actions": sum(r["actions"] for r in results),
        "replays": sum(r["replays"] for r in results),
        "replay_failures": sum(r["replay_failures"] for r in results),
        "crashes": sum(r["crashes"] for r in results),
        "states": graph.num_states,
        "transitions": sum(sum(c.values()) for c in graph.outcomes.values()),
    }
    graph.close()
    return summary


def _threshold(app: str, dedup_threshold: float | None) -> float:
    if dedup_threshold is not None:
        return dedup_threshold
    from neurips26.methods.screensearch.config import ScreenSearchConfig

    return ScreenSearchConfig().dedup_threshold if app == "synthetic" else REAL_APP_DEDUP


class GraphStore:
    """The single writer of the shared SQLite graph (a Ray actor in scale-out, a plain object otherwise)."""

    def __init__(self, db: str, dedup_threshold: float = 0.85) -> None:
        self.graph = StateGraph(db, dedup_threshold=dedup_threshold)

    def ingest(self, events: list[tuple], worker: str) -> dict[str, int]:
        return ingest(self.graph, events, worker)

    def counts(self) -> dict[str, int]:
        return {
            "states": self.graph.num_states,
            "transitions": sum(sum(c.values()) for c in self.graph.outcomes.values()),
        }

    def close(self) -> None:
        self.graph.close()


class ExplorerWorker:
    """One explorer with its own backend (a Ray actor in scale-out)."""

    def __init__(
        self, app: str, policy: str, seed: int, name: str, dedup_threshold: float | None = None
    ) -> None:
        self.app, self.policy, self.seed, self.name = app, policy, seed, name
        self.dedup_threshold = dedup_threshold

    def explore(self, budget: int) -> dict[str, Any]:
        seed = self.seed + int(self.name[1:])
        return run_worker(self.app, self.policy, budget, seed, self.name, self.dedup_threshold, self.seed)
