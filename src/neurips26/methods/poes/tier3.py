"""Tier 3: the evolutionary loop of tier 2 replayed on a real LM's recorded responses.

The recording (``real_recording.py``) holds, per WordNet task, a real LM's choice log-likelihoods for a
fixed pool of candidate prompts on every item. A replay task splits the items at random into an
evaluation pool (what schedulers may score) and a held-out test set (the reported accuracy); the
optimizer starts from one prompt per family and each child is a not-yet-proposed prompt of its parent's
family (a paraphrase or variant) or, less often, of another family. Scores are the recorded 0/1
correctness, so a replay calls no model and any scheduler sees exactly what the LM answered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.core.config import param
from neurips26.core.validation import check_in_range, check_int
from neurips26.methods.poes.real_recording import RecordedTask


@dataclass
class Tier3Settings:
    """How the recorded matrix is replayed."""

    n_splits: int = param(4, "ours: each seed replays 4 random pool/test splits of each of the 3 tasks")
    n_pool: int = param(100, "ours: half of each task's 200 items may be scored; the other half is held out")
    rounds: int = param(2, "ours: 4 seed prompts + 2 rounds of 4 children propose 12 of the 16 candidates")
    same_family: float = param(0.7, "ours: a child is mostly a paraphrase/variant of its parent")

    def __post_init__(self) -> None:
        for name in ("n_splits", "n_pool", "rounds"):
            check_int(name, getattr(self, name), 1)
        check_in_range("same_family", self.same_family, 0.0, 1.0)


class RecordedScorer:
    """Recorded correctness of candidate prompts (by index) on a pool/test split of one task's items."""

    def __init__(self, recorded: RecordedTask, pool: np.ndarray, test: np.ndarray) -> None:
        self._correct = recorded.correct
        self._items = {"pool": np.asarray(pool), "test": np.asarray(test)}
        self.labels = {split: recorded.answers[ix] for split, ix in self._items.items()}
        self._embeddings = recorded.embeddings[self._items["pool"]].astype(np.float64)

    def pool_embeddings(self) -> np.ndarray:
        return self._embeddings

    def scores(self, prompt: int, split: str) -> np.ndarray:
        """0/1 correctness of candidate ``prompt`` on every item of ``split`` ("pool" or "test")."""
        return self._correct[prompt, self._items[split]]


def split_items(n_items: int, n_pool: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random split of ``n_items`` into ``n_pool`` pool items and the rest (held out)."""
    if not 0 < n_pool < n_items:
        raise ValueError(f"n_pool must lie in (0, {n_items}), got {n_pool}")
    order = np.random.default_rng([seed, 3]).permutation(n_items)
    return np.sort(order[:n_pool]), np.sort(order[n_pool:])


class FamilyMutator:
    """Proposes candidate prompts of the fixed pool, each at most once while unproposed ones remain.

    ``initial`` cycles through the families (a random member of each); ``mutate`` returns a member of the
    parent's family with probability ``same_family``, else of another family.
    """

    def __init__(self, families: tuple[str, ...], same_family: float) -> None:
        self.families = np.array(families)
        self.order = list(dict.fromkeys(families))
        self.same_family = same_family
        self.proposed: set[int] = set()
        self._initial_calls = 0

    def _pick(self, options: np.ndarray, rng: np.random.Generator) -> int:
        fresh = [int(i) for i in options if int(i) not in self.proposed]
        if not fresh:  # the family is exhausted: any unproposed prompt, else any prompt
            fresh = [i for i in range(len(self.families)) if i not in self.proposed] or list(
                range(len(self.families))
            )
        choice = fresh[int(rng.integers(len(fresh)))]
        self.proposed.add(choice)
        return choice

    def initial(self, rng: np.random.Generator, n_demos: int = 0) -> int:
        family = self.order[self._initial_calls % len(self.order)]
        self._initial_calls += 1
        return self._pick(np.flatnonzero(self.families == family), rng)

    def mutate(self, prompt: int, rng: np.random.Generator) -> int:
        same = self.families == self.families[prompt]
        return self._pick(np.flatnonzero(same if rng.random() < self.same_family else ~same), rng)
