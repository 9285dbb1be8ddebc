"""Evaluation schedulers POES is compared with, and POES itself, as round schedulers of the simulator.

Each spends one round's budget (prompt x item calls) on the new candidates, then ranks every prompt.
Provenance: the random minibatch is GEPA's / DSPy's default (re-implemented here as a sampler); the fixed
facility-location subset re-implements SESS's idea (a submodular subset fixed before optimization; SESS
has no library); max-information selection calls catsim's ``MaxInfoSelector``; successive halving over
candidates is ours (Jamieson & Talwalkar 2016 applied to a round's candidates); full evaluation is GEPA's
``FullEvaluationPolicy`` at its (larger) cost.
"""

from __future__ import annotations

import math

import numpy as np

from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.irt import fit_1pl_map
from neurips26.methods.poes.scheduler import POESScheduler
from neurips26.methods.poes.selection import SubsetObjective, lazy_greedy, rbf_similarity
from neurips26.methods.poes.simulator import Evaluate, ItemPool, ResponseLog


def _per_candidate(budget: int, candidates: list[int], n_items: int) -> int:
    return max(1, min(n_items, budget // max(1, len(candidates))))


class SharedItemsScheduler:
    """A round scheduler that scores every candidate on one item set per round (``items_for_round``);
    prompts are ranked by raw mean accuracy unless a subclass says otherwise."""

    def items_for_round(
        self, log: ResponseLog, candidates: list[int], budget: int, rng: np.random.Generator
    ) -> np.ndarray:
        raise NotImplementedError

    def run_round(
        self,
        log: ResponseLog,
        candidates: list[int],
        budget: int,
        evaluate: Evaluate,
        rng: np.random.Generator,
    ) -> None:
        items = self.items_for_round(log, candidates, budget, rng)
        for prompt in candidates:
            evaluate(prompt, items)

    def ranking(self, log: ResponseLog) -> np.ndarray:
        return log.mean_accuracy()


class FullEvaluation(SharedItemsScheduler):
    """Every candidate on every item (GEPA's FullEvaluationPolicy): exact, at n_items / k times the cost."""

    def items_for_round(
        self, log: ResponseLog, candidates: list[int], budget: int, rng: np.random.Generator
    ) -> np.ndarray:
        return np.arange(log.n_items)


class RandomMinibatch(SharedItemsScheduler):
    """A fresh uniform random minibatch each round (GEPA/DSPy default); prompts ranked by raw mean."""

    def items_for_round(
        self, log: ResponseLog, candidates: list[int], budget: int, rng: np.random.Generator
    ) -> np.ndarray:
        return rng.choice(log.n_items, _per_candidate(budget, candidates, log.n_items), replace=False)


class FixedSubset(SharedItemsScheduler):
    """One subset chosen before optimization and used every round; prompts ranked by raw mean.

    ``how="random"``: a uniform random subset. ``how="facility_location"``: greedy facility location on
    the item embeddings (SESS-like, re-implemented), i.e. coverage only and never updated.
    """

    def __init__(self, pool: ItemPool, how: str) -> None:
        if how not in ("random", "facility_location"):
            raise ValueError(f"how must be 'random' or 'facility_location', got {how!r}")
        self.pool = pool
        self.how = how
        self.items: np.ndarray | None = None

    def items_for_round(
        self, log: ResponseLog, candidates: list[int], budget: int, rng: np.random.Generator
    ) -> np.ndarray:
        if self.items is None:
            k = _per_candidate(budget, candidates, log.n_items)
            if self.how == "random":
                self.items = rng.choice(log.n_items, k, replace=False)
            else:
                sim = rbf_similarity(self.pool.embeddings)
                self.items = np.asarray(lazy_greedy(SubsetObjective(np.zeros(log.n_items), sim, 0.0, 1.0), k))
        return self.items


class MaxInfoLeader(SharedItemsScheduler):
    """Computerized adaptive testing for the current leader: k items of maximum 1PL information at the
    leader's ability (catsim's ``MaxInfoSelector`` on our 1PL difficulties); prompts ranked by ability."""

    def __init__(self, config: POESConfig) -> None:
        self.config = config
        self.theta: np.ndarray | None = None
        self.difficulty: np.ndarray | None = None

    def _fit(self, log: ResponseLog) -> None:
        p, i, y = log.arrays()
        fit = fit_1pl_map(
            p,
            i,
            y,
            log.n_prompts,
            log.n_items,
            theta0=self.theta,
            difficulty0=self.difficulty,
            prior_theta_sd=self.config.prior_theta_sd,
            prior_difficulty_sd=self.config.prior_difficulty_sd,
        )
        self.theta, self.difficulty = fit.theta, fit.difficulty
        self.seen = (~np.isnan(log.scores)).any(axis=1)

    def items_for_round(
        self, log: ResponseLog, candidates: list[int], budget: int, rng: np.random.Generator
    ) -> np.ndarray:
        from catsim.item_bank import ItemBank
        from catsim.selection import MaxInfoSelector

        self._fit(log)
        assert self.theta is not None and self.difficulty is not None
        leader_theta = float(self.theta[self.seen].max()) if self.seen.any() else 0.0
        n = log.n_items
        bank = ItemBank(
            np.column_stack([np.ones(n), self.difficulty, np.zeros(n), np.ones(n)]), validate=False
        )
        selector = MaxInfoSelector()
        chosen: list[int] = []
        for _ in range(_per_candidate(budget, candidates, n)):
            chosen.append(
                int(selector.select(item_bank=bank, administered_items=chosen, est_theta=leader_theta))
            )
        return np.asarray(chosen)

    def ranking(self, log: ResponseLog) -> np.ndarray:
        self._fit(log)
        assert self.theta is not None
        return np.where(self.seen, self.theta, -np.inf)


class SuccessiveHalving:
    """Successive halving over the round's candidates plus the incumbent (ours): the budget is split over
    ceil(log2(m)) rungs; each rung scores the survivors on fresh random items and keeps the better half by
    raw mean. The winner becomes the incumbent, which is the prompt returned."""

    def __init__(self) -> None:
        self.incumbent: int | None = None

    def run_round(
        self,
        log: ResponseLog,
        candidates: list[int],
        budget: int,
        evaluate: Evaluate,
        rng: np.random.Generator,
    ) -> None:
        alive = list(candidates) + ([self.incumbent] if self.incumbent is not None else [])
        rungs = max(1, math.ceil(math.log2(len(alive))))
        per_rung = budget // rungs
        while True:
            per_prompt = max(1, per_rung // len(alive))
            for prompt in alive:
                unseen = np.flatnonzero(np.isnan(log.scores[prompt]))
                if unseen.size:
                    evaluate(prompt, rng.choice(unseen, min(per_prompt, unseen.size), replace=False))
            if len(alive) == 1:
                break
            means = log.mean_accuracy()[alive]
            keep = np.argsort(-means, kind="stable")[: math.ceil(len(alive) / 2)]
            alive = [alive[j] for j in sorted(keep)]
            if len(alive) == 1:
                break
        self.incumbent = alive[0]

    def ranking(self, log: ResponseLog) -> np.ndarray:
        key = log.mean_accuracy()
        if self.incumbent is not None:
            key = key.copy()
            key[self.incumbent] = np.inf
        return key


class POESRoundScheduler(SharedItemsScheduler):
    """POES in the simulator: every candidate is scored on the scheduler's subset; ranking by ability."""

    def __init__(self, pool: ItemPool, k: int, config: POESConfig) -> None:
        self.scheduler = POESScheduler(k, list(range(pool.n_items)), pool.embeddings, config)

    def items_for_round(
        self, log: ResponseLog, candidates: list[int], budget: int, rng: np.random.Generator
    ) -> np.ndarray:
        p, i, y = log.arrays()
        return np.asarray(self.scheduler.select_indices(p, i, y, log.n_prompts))

    def ranking(self, log: ResponseLog) -> np.ndarray:
        p, i, y = log.arrays()
        fit = self.scheduler.observe_indices(p, i, y, log.n_prompts)
        seen = (~np.isnan(log.scores)).any(axis=1)
        key = fit.theta if self.scheduler.config.rank_by_ability else log.mean_accuracy()
        return np.where(seen, key, -np.inf)
