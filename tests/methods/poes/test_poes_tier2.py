"""Tier 2 plumbing: WordNet glosses, the few-shot scorer (with a stand-in encoder) and the mutator."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from neurips26.methods.poes.baselines import POESRoundScheduler, RandomMinibatch
from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.tier2 import (
    EmbeddingCache,
    MiniLMFewShotScorer,
    RuleMutator,
    Tier2Settings,
    load_corpus,
    make_task,
    optimize,
)
from neurips26.methods.poes.wordnet_glosses import WORDNET_DIR, read_noun_glosses, sample_glosses

pytestmark = pytest.mark.skipif(
    not (WORDNET_DIR / "data.noun").is_file(), reason="wordnet-base not installed"
)


def bag_of_words_encoder(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in for MiniLM: hashed bag of words, normalised (no model download in tests)."""
    out = np.zeros((len(texts), 256))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, int(hashlib.md5(word.encode()).hexdigest()[:6], 16) % 256] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_glosses_are_labelled_by_lexicographer_file() -> None:
    glosses = read_noun_glosses()
    assert len(glosses) > 80_000
    sample = sample_glosses(("noun.animal", "noun.food"), 5, seed=0)
    assert sorted(g.label for g in sample) == ["noun.animal"] * 5 + ["noun.food"] * 5
    with pytest.raises(ValueError, match="classes"):
        sample_glosses(("noun.nothing",), 1, seed=0)
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        read_noun_glosses("/nonexistent")


SMALL = Tier2Settings(n_tasks=1, corpus_per_class=20, per_class_pool=8, per_class_test=8, per_class_bank=4)


def test_prompt_text_changes_real_responses_and_the_loop_runs() -> None:
    corpus = load_corpus(SMALL.corpus_per_class, SMALL.n_paraphrases)
    task = make_task(corpus, 0, SMALL)
    assert len(task.pool) == len(task.test) == 80 and len(task.bank) == 40
    assert not {g.id for g in task.pool} & {g.id for g in task.test}  # held-out test never scored
    scorer = MiniLMFewShotScorer(EmbeddingCache(bag_of_words_encoder), corpus, task)
    mutator = RuleMutator(corpus, task)
    rng = np.random.default_rng(0)
    prompts = [mutator.initial(rng, 2)]
    for _ in range(30):
        prompts.append(mutator.mutate(prompts[-1], rng))
    accuracies = {float(scorer.scores(p, "pool").mean()) for p in prompts}
    assert len(accuracies) > 3  # edits to demonstrations / descriptions / instruction change the scores
    assert all(0.0 <= a <= 1.0 for a in accuracies)
    for factory in (lambda pool: POESRoundScheduler(pool, 5, POESConfig()), lambda pool: RandomMinibatch()):
        result = optimize(factory, scorer, mutator, k=5, seed=0, rounds=3)
        assert 0.0 <= result["test_accuracy"] <= result["best_proposed_accuracy"] <= 1.0
        assert result["regret"] == pytest.approx(result["best_proposed_accuracy"] - result["test_accuracy"])
        assert result["calls"] <= 4 * 4 * 5


def test_every_text_is_encoded_once_across_tasks() -> None:
    corpus = load_corpus(SMALL.corpus_per_class, SMALL.n_paraphrases)
    seen: list[str] = []

    def counting(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return bag_of_words_encoder(texts)

    cache = EmbeddingCache(counting)
    for seed in range(3):
        MiniLMFewShotScorer(cache, corpus, make_task(corpus, seed, SMALL))
    assert len(seen) == len(set(seen)) and set(seen) <= set(corpus.texts())


def test_tier2_settings_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="corpus_per_class"):
        Tier2Settings(corpus_per_class=10, per_class_pool=8, per_class_test=8, per_class_bank=4)
    with pytest.raises(ValueError, match="n_demos"):
        Tier2Settings(per_class_bank=2, n_demos=2)
