"""Tier 1: a misspecified prompt-optimization simulator (no LLM), and the loop that runs a scheduler in it.

Items follow a multidimensional 2PL with guessing and item clusters,
``P(correct) = c_i + (1 - c_i) * sigmoid(a_i . theta_p - b_i)``, while POES assumes a 1PL: the scheduler is
never graded on its own model. Prompts come from an evolutionary optimizer: children are a parent plus
heavy-tailed (Student-t) noise, each family (an initial prompt and its descendants) sharing a skill profile.
Responses are fixed Bernoulli draws per (prompt, item), like a language model at temperature 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy.special import expit


@dataclass(frozen=True)
class ItemPool:
    """Item parameters: loadings (n, D), difficulty (n,), guessing (n,), cluster (n,), embeddings (n, E)."""

    loadings: np.ndarray
    difficulty: np.ndarray
    guessing: np.ndarray
    cluster: np.ndarray
    embeddings: np.ndarray

    @property
    def n_items(self) -> int:
        return len(self.difficulty)

    def probability(self, theta: np.ndarray) -> np.ndarray:
        """Success probability of abilities theta (P, D) on every item -> (P, n)."""
        logits = theta @ self.loadings.T - self.difficulty[None, :]
        return self.guessing + (1.0 - self.guessing) * expit(logits)


def make_item_pool(
    rng: np.random.Generator,
    n_items: int,
    n_dims: int,
    n_clusters: int,
    embed_dim: int,
    guessing_max: float,
    embedding_noise: float,
) -> ItemPool:
    """Clustered items: each cluster loads mostly on one skill and has its own difficulty level.

    Embeddings see the topic (cluster centre plus noise), never the difficulty: like text embeddings.
    """
    cluster = rng.integers(0, n_clusters, n_items)
    cluster_loading = np.abs(rng.normal(0.3, 0.2, size=(n_clusters, n_dims)))
    cluster_loading[np.arange(n_clusters), np.arange(n_clusters) % n_dims] += 1.2
    loadings = np.abs(cluster_loading[cluster] * rng.lognormal(0.0, 0.25, size=(n_items, 1)))
    difficulty = rng.normal(0.0, 0.8, n_clusters)[cluster] + rng.normal(0.0, 1.0, n_items)
    guessing = rng.uniform(0.0, guessing_max, n_items) * (rng.random(n_items) < 0.5)
    centres = rng.normal(size=(n_clusters, embed_dim))
    embeddings = centres[cluster] + embedding_noise * rng.normal(size=(n_items, embed_dim))
    return ItemPool(loadings, difficulty, guessing, cluster, embeddings)


@dataclass
class ResponseLog:
    """Dense score matrix with NaN for unevaluated (prompt, item) pairs; grows as prompts are proposed."""

    n_items: int
    scores: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    calls: int = 0

    def __post_init__(self) -> None:
        self.scores = np.full((0, self.n_items), np.nan)

    @property
    def n_prompts(self) -> int:
        return self.scores.shape[0]

    def add_prompts(self, count: int) -> None:
        self.scores = np.vstack([self.scores, np.full((count, self.n_items), np.nan)])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prompt_idx, item_idx, score) of every logged response."""
        p, i = np.nonzero(~np.isnan(self.scores))
        return p, i, self.scores[p, i]

    def mean_accuracy(self) -> np.ndarray:
        """Raw mean score per prompt over whatever items it was scored on (-inf when none)."""
        counts = (~np.isnan(self.scores)).sum(axis=1)
        sums = np.nansum(self.scores, axis=1)
        return np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)


Evaluate = Callable[[int, np.ndarray], None]


class RoundScheduler(Protocol):
    """What the simulator asks of a scheduler: spend a round's budget, then rank every prompt."""

    def run_round(
        self,
        log: ResponseLog,
        candidates: list[int],
        budget: int,
        evaluate: Evaluate,
        rng: np.random.Generator,
    ) -> None: ...

    def ranking(self, log: ResponseLog) -> np.ndarray: ...


@dataclass(frozen=True)
class SimulationSettings:
    """Sizes of the simulated optimization (see ``POESExperimentConfig`` for sources)."""

    k: int
    n_items: int = 300
    n_dims: int = 3
    n_clusters: int = 6
    embed_dim: int = 8
    embedding_noise: float = 0.5
    guessing_max: float = 0.25
    rounds: int = 20
    children_per_round: int = 4
    n_initial: int = 4
    n_parents: int = 2
    mutation_scale: float = 0.25
    mutation_df: float = 3.0
    mutation_drift: float = -0.05


@dataclass
class SimulationResult:
    """Outcome of one optimization run under one scheduler."""

    final_accuracy: float
    best_proposed_accuracy: float
    calls: int
    overhead_s: float
    rounds: int
    returned: int
    true_accuracy: np.ndarray


def simulate(
    scheduler_factory: Callable[[ItemPool], RoundScheduler],
    settings: SimulationSettings,
    seed: int,
    budget_per_round: int | None = None,
) -> SimulationResult:
    """Run the evolutionary prompt optimizer for ``settings.rounds`` rounds with one scheduler.

    The pool, the initial prompts and every mutation's noise depend on ``seed`` only (common random
    numbers across schedulers); which parents are mutated depends on the scheduler's ranking.
    """
    world = np.random.default_rng([seed, 0])
    pool = make_item_pool(
        world,
        settings.n_items,
        settings.n_dims,
        settings.n_clusters,
        settings.embed_dim,
        settings.guessing_max,
        settings.embedding_noise,
    )
    max_prompts = settings.n_initial + settings.rounds * settings.children_per_round
    profiles = np.abs(world.normal(0.5, 0.5, size=(settings.n_initial, settings.n_dims)))
    base = world.normal(-0.3, 0.3, size=(settings.n_initial, 1)) * np.ones((1, settings.n_dims))
    # pre-drawn randomness, indexed by prompt number (common across schedulers)
    noise = world.standard_t(settings.mutation_df, size=(max_prompts, settings.n_dims))
    uniforms = world.random((max_prompts, settings.n_items))
    parent_draws = world.random(max_prompts)
    scheduler_rng = np.random.default_rng([seed, 1])

    thetas = np.zeros((max_prompts, settings.n_dims))
    family = np.zeros(max_prompts, dtype=np.int64)
    thetas[: settings.n_initial] = base + 0.3 * profiles
    family[: settings.n_initial] = np.arange(settings.n_initial)
    probs = np.zeros((max_prompts, settings.n_items))
    probs[: settings.n_initial] = pool.probability(thetas[: settings.n_initial])
    truth = np.zeros(max_prompts)
    truth[: settings.n_initial] = probs[: settings.n_initial].mean(axis=1)

    log = ResponseLog(settings.n_items)
    log.add_prompts(settings.n_initial)
    scheduler = scheduler_factory(pool)

    def evaluate(prompt: int, items: np.ndarray) -> None:
        items = np.unique(np.asarray(items, dtype=np.int64))
        fresh = items[np.isnan(log.scores[prompt, items])]
        log.scores[prompt, fresh] = (uniforms[prompt, fresh] < probs[prompt, fresh]).astype(np.float64)
        log.calls += fresh.size

    budget = budget_per_round if budget_per_round is not None else settings.children_per_round * settings.k
    overhead = 0.0
    candidates = list(range(settings.n_initial))
    for _ in range(settings.rounds):
        start = time.perf_counter()
        scheduler.run_round(log, candidates, budget, evaluate, scheduler_rng)
        ranking = scheduler.ranking(log)
        overhead += time.perf_counter() - start
        parents = np.argsort(-ranking, kind="stable")[: settings.n_parents]
        first = log.n_prompts
        log.add_prompts(settings.children_per_round)
        candidates = list(range(first, log.n_prompts))
        for child in candidates:
            parent = parents[int(parent_draws[child] * len(parents))]
            step = settings.mutation_scale * (
                noise[child] * profiles[family[parent]] / profiles[family[parent]].mean()
            )
            thetas[child] = thetas[parent] + step + settings.mutation_drift
            family[child] = family[parent]
        probs[candidates] = pool.probability(thetas[candidates])
        truth[candidates] = probs[candidates].mean(axis=1)
    # the last children are scored too, then the scheduler names the best prompt
    start = time.perf_counter()
    scheduler.run_round(log, candidates, budget, evaluate, scheduler_rng)
    returned = int(np.argmax(scheduler.ranking(log)))
    overhead += time.perf_counter() - start
    return SimulationResult(
        final_accuracy=float(truth[returned]),
        best_proposed_accuracy=float(truth[: log.n_prompts].max()),
        calls=log.calls,
        overhead_s=overhead,
        rounds=settings.rounds + 1,
        returned=returned,
        true_accuracy=truth[: log.n_prompts].copy(),
    )
