"""``POESScheduler``: which examples a prompt optimizer should score this round, and which prompt is best."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.irt import IRTFit, fit_1pl_map
from neurips26.methods.poes.selection import (
    SubsetObjective,
    WeightController,
    bounded_swaps,
    discrimination_utility,
    lazy_greedy,
    rbf_similarity,
)

Responses = Mapping[Hashable, Mapping[Hashable, float]]


@dataclass
class RoundInfo:
    """What the last ``select`` did: controller weight, leaders (prompt ids), swaps, cold/warm start."""

    weight: float = math.nan
    leaders: list[Hashable] = field(default_factory=list)
    swaps: int = 0
    cold_start: bool = True


class POESScheduler:
    """Prompt-aware online evaluation scheduling (POES; arXiv 2604.11328).

    Prompts are examinees, pool items are test items. Each round: (1) fit 1PL IRT by MAP on every
    response so far (warm-started); (2) leaders = top ``n_leaders`` prompts by ability; (3) utility
    u_i = sum_leaders P(1 - P); (4) coverage = facility location over item similarities; (5) cold start
    by lazy greedy on ``lam * u + (1 - lam) * coverage``, warm start by at most ``max_swaps`` swaps that
    each beat ``switching_cost``; (6) lam set by a controller from the leaders' margin and stalls;
    (7) :meth:`best` ranks prompts by IRT ability, never raw accuracy on different subsets.

    Parameters
    ----------
    k:
        Items to return per round, 1 <= k <= len(items).
    items:
        The evaluation pool's ids (unique, hashable), e.g. GEPA valset ids.
    embeddings:
        Item features (len(items), dim) for coverage; None makes every item cover only itself.
    config:
        :class:`POESConfig`.
    """

    def __init__(
        self,
        k: int,
        items: Sequence[Hashable],
        embeddings: np.ndarray | None = None,
        config: POESConfig | None = None,
    ) -> None:
        items = list(items)
        if not items:
            raise ValueError("items must be a non-empty pool of example ids")
        if len(set(items)) != len(items):
            raise ValueError("items must be unique ids")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(items):
            raise ValueError(f"k must be an integer in [1, {len(items)}] (the pool size), got {k!r}")
        self.k = k
        self.items = items
        self.config = config if config is not None else POESConfig()
        if not isinstance(self.config, POESConfig):
            raise TypeError(f"config must be a POESConfig, got {type(self.config).__name__}")
        self._item_index = {item: i for i, item in enumerate(items)}
        if embeddings is None:
            self.similarity = np.eye(len(items), dtype=np.float32)
        else:
            embeddings = np.asarray(embeddings)
            if embeddings.ndim != 2 or embeddings.shape[0] != len(items):
                raise ValueError(f"embeddings must have shape ({len(items)}, dim), got {embeddings.shape}")
            self.similarity = rbf_similarity(embeddings)
        self.prompts: list[Hashable] = []
        self._prompt_index: dict[Hashable, int] = {}
        self._fit: IRTFit | None = None
        self._subset: list[int] | None = None
        self._raw_mean = np.zeros(0)
        self._seen = np.zeros(0, dtype=bool)
        c = self.config
        self._controller = WeightController(
            c.min_weight, c.max_weight, c.margin_midpoint, c.patience, c.stall_factor
        )
        self.last_round = RoundInfo()

    # ---- responses -> arrays ------------------------------------------------------------------
    def _prompt(self, prompt: Hashable) -> int:
        index = self._prompt_index.get(prompt)
        if index is None:
            index = self._prompt_index[prompt] = len(self.prompts)
            self.prompts.append(prompt)
        return index

    def _arrays(self, responses: Responses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not isinstance(responses, Mapping):
            raise TypeError(
                f"responses must be a mapping prompt -> {{item: score}}, got {type(responses).__name__}"
            )
        p_idx: list[int] = []
        i_idx: list[int] = []
        values: list[float] = []
        for prompt, row in responses.items():
            if not isinstance(row, Mapping):
                raise TypeError(
                    f"responses[{prompt!r}] must map item ids to scores, got {type(row).__name__}"
                )
            p = self._prompt(prompt)
            for item, score in row.items():
                i = self._item_index.get(item)
                if i is None:
                    raise ValueError(
                        f"responses[{prompt!r}] names item {item!r}, which is not in the pool (items)"
                    )
                p_idx.append(p)
                i_idx.append(i)
                values.append(float(score))
        scores = np.asarray(values, dtype=np.float64)
        bad = ~np.isfinite(scores) | (scores < 0) | (scores > 1)
        if bad.any():
            raise ValueError(f"responses must hold scores in [0, 1] (no NaN); got {scores[bad][:3].tolist()}")
        return np.asarray(p_idx, dtype=np.int64), np.asarray(i_idx, dtype=np.int64), scores

    # ---- public API -----------------------------------------------------------------------------
    def select(self, responses: Responses) -> list[Hashable]:
        """The k item ids to score next, given every response logged so far (prompt -> {item: score})."""
        p_idx, i_idx, scores = self._arrays(responses)
        return [self.items[i] for i in self.select_indices(p_idx, i_idx, scores, len(self.prompts))]

    def observe(self, responses: Responses) -> dict[Hashable, float]:
        """Refit the 1PL model on ``responses`` without selecting; returns every prompt's ability."""
        p_idx, i_idx, scores = self._arrays(responses)
        self.observe_indices(p_idx, i_idx, scores, len(self.prompts))
        return self.abilities()

    def best(self) -> Hashable:
        """The best prompt so far: highest IRT ability (or raw mean when ``rank_by_ability`` is off)."""
        if self._fit is None or not self.prompts:
            raise RuntimeError("best() needs at least one select() call with responses")
        return self.prompts[self.best_index()]

    def abilities(self) -> dict[Hashable, float]:
        """Posterior ability of every prompt seen so far."""
        if self._fit is None:
            return {}
        return {p: float(t) for p, t in zip(self.prompts, self._fit.theta, strict=False)}

    def predicted_accuracy(self, prompt: Hashable) -> float:
        """Mean 1PL success probability of ``prompt`` over the whole pool (a valset-score estimate)."""
        if self._fit is None or prompt not in self._prompt_index:
            raise ValueError(f"prompt {prompt!r} has no responses yet")
        theta = self._fit.theta[self._prompt_index[prompt]]
        return float(np.mean(1.0 / (1.0 + np.exp(self._fit.difficulty - theta))))

    # ---- array interface (what simulators and the GEPA policy call) -------------------------
    def best_index(self) -> int:
        """Index (into ``self.prompts``) of the best prompt."""
        assert self._fit is not None
        seen = self._seen
        if self.config.rank_by_ability:
            key = np.where(seen, self._fit.theta, -np.inf)
        else:
            key = np.where(seen, self._raw_mean, -np.inf)
        return int(np.argmax(key))

    def observe_indices(
        self, prompt_idx: np.ndarray, item_idx: np.ndarray, scores: np.ndarray, n_prompts: int
    ) -> IRTFit:
        """Refit the 1PL model (warm-started) on the whole log; returns the fit."""
        c = self.config
        previous = self._fit
        self._fit = fit_1pl_map(
            prompt_idx,
            item_idx,
            scores,
            n_prompts,
            len(self.items),
            theta0=None if previous is None else previous.theta,
            difficulty0=None if previous is None else previous.difficulty,
            prior_theta_sd=c.prior_theta_sd,
            prior_difficulty_sd=c.prior_difficulty_sd,
        )
        counts = np.bincount(prompt_idx, minlength=n_prompts)
        self._seen = counts > 0
        self._raw_mean = np.bincount(prompt_idx, scores, minlength=n_prompts) / np.maximum(counts, 1)
        return self._fit

    def round_objective(
        self, prompt_idx: np.ndarray, item_idx: np.ndarray, scores: np.ndarray, n_prompts: int
    ) -> tuple[SubsetObjective, np.ndarray]:
        """Refit on the log and build this round's objective F; returns (F, leader prompt indices).

        Steps (1)-(4) and (6) of a round: 1PL refit, leaders, discrimination utility, the controller's
        weight (its state advances once per call). :meth:`select_indices` then optimises F.
        """
        c = self.config
        fit = self.observe_indices(prompt_idx, item_idx, scores, n_prompts)
        n = len(self.items)
        seen = np.flatnonzero(self._seen)
        ranking_key = fit.theta if c.rank_by_ability else self._raw_mean
        leaders = seen[np.argsort(-ranking_key[seen], kind="stable")[: c.n_leaders]]
        if leaders.size:
            utility = discrimination_utility(
                fit.theta[leaders], np.full(leaders.size, 1.0 / leaders.size), fit.difficulty
            )
        else:  # no response yet: every item is equally informative at the prior
            utility = np.ones(n)
        utility = utility / utility.max()
        if not c.use_coverage:
            lam = 1.0
        elif not c.use_discrimination:
            lam = 0.0
        elif c.use_controller:
            lam = self._controller.update(fit.theta[seen], fit.theta_sd[seen])
        else:
            lam = c.discrimination_weight
        return SubsetObjective(utility, self.similarity, lam, self.k / n), leaders

    def select_indices(
        self, prompt_idx: np.ndarray, item_idx: np.ndarray, scores: np.ndarray, n_prompts: int
    ) -> list[int]:
        """:meth:`select` on index arrays (prompt indices < n_prompts, item indices into ``items``)."""
        c = self.config
        n = len(self.items)
        objective, leaders = self.round_objective(prompt_idx, item_idx, scores, n_prompts)
        lam = objective.lam
        cold = self._subset is None or not c.bound_swaps
        if self.k == n:
            subset, swaps = list(range(n)), 0
        elif cold:
            subset, swaps = lazy_greedy(objective, self.k), 0
        else:
            assert self._subset is not None
            subset, swaps = bounded_swaps(objective, self._subset, c.max_swaps, c.switching_cost)
        self._subset = subset
        self.last_round = RoundInfo(
            lam, [self.prompts[p] if p < len(self.prompts) else p for p in leaders], swaps, cold
        )
        return list(subset)

    def state_dict(self) -> dict[str, Any]:
        """Current subset, abilities and difficulties (for logging)."""
        return {
            "subset": None if self._subset is None else [self.items[i] for i in self._subset],
            "theta": None if self._fit is None else self._fit.theta.tolist(),
            "difficulty": None if self._fit is None else self._fit.difficulty.tolist(),
        }
