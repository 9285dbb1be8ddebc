"""POES as GEPA's evaluation policy (gepa 0.1.4 ``EvaluationPolicy``).

GEPA calls ``get_eval_batch(loader, state, target_program_idx)`` to learn which validation ids to score a
candidate on, ``get_best_program(state)`` to name the best candidate and ``get_valset_score(idx, state)``
for a candidate's valset score. ``state.prog_candidate_val_subscores[i]`` is program i's
{validation id: score} map: exactly POES's sparse prompt x item response matrix.

Usage::

    policy = POESEvaluationPolicy(k=20, embeddings=valset_embeddings)
    result = gepa.optimize(seed_candidate, trainset, valset, adapter=adapter,
                           val_evaluation_policy=policy, max_metric_calls=2000, ...)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from gepa.strategies.eval_policy import EvaluationPolicy

from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.scheduler import POESScheduler


class POESEvaluationPolicy(EvaluationPolicy):
    """Score each new GEPA candidate on POES's k validation examples; rank candidates by IRT ability.

    Parameters
    ----------
    k:
        Validation examples per evaluation (<= the valset size).
    embeddings:
        Optional (n_val, dim) features of the validation examples, in ``loader.all_ids()`` order, for
        the coverage term; None makes coverage count distinct items only.
    config:
        :class:`POESConfig`.
    """

    def __init__(
        self, k: int, embeddings: np.ndarray | None = None, config: POESConfig | None = None
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        self.k = k
        self.embeddings = embeddings
        self.config = config if config is not None else POESConfig()
        self.scheduler: POESScheduler | None = None

    def _scheduler_for(self, ids: Sequence[Hashable]) -> POESScheduler:
        if self.scheduler is None:
            self.scheduler = POESScheduler(self.k, list(ids), self.embeddings, self.config)
        elif list(ids) != self.scheduler.items:
            raise ValueError("the validation loader's ids changed during the run; POES needs a fixed pool")
        return self.scheduler

    @staticmethod
    def _responses(state: Any) -> dict[int, dict[Hashable, float]]:
        return {idx: dict(scores) for idx, scores in enumerate(state.prog_candidate_val_subscores)}

    def get_seed_eval_batch(self, loader: Any) -> list[Hashable]:
        """The seed candidate's batch (GEPA's optional hook): POES's cold-start subset."""
        return self._scheduler_for(loader.all_ids()).select({})

    def get_eval_batch(
        self, loader: Any, state: Any, target_program_idx: int | None = None
    ) -> list[Hashable]:
        """POES's subset for the next candidate, from every score GEPA has logged."""
        n = len(state.program_candidates)
        if target_program_idx is not None and not 0 <= target_program_idx <= n:
            raise ValueError(f"target_program_idx must lie in [0, {n}], got {target_program_idx}")
        return self._scheduler_for(loader.all_ids()).select(self._responses(state))

    def _refit(self, state: Any) -> POESScheduler:
        if self.scheduler is None:
            raise RuntimeError("POESEvaluationPolicy has not selected a batch yet")
        self.scheduler.observe(self._responses(state))
        return self.scheduler

    def get_best_program(self, state: Any) -> int:
        """The candidate with the highest IRT ability (never the raw mean over different subsets)."""
        scheduler = self._refit(state)
        best = scheduler.best()
        assert isinstance(best, int)
        return best

    def get_valset_score(self, program_idx: int, state: Any) -> float:
        """The 1PL-predicted mean score of ``program_idx`` over the whole validation pool."""
        n = len(state.prog_candidate_val_subscores)
        if not 0 <= program_idx < n:
            raise ValueError(f"program_idx must lie in [0, {n}), got {program_idx}")
        return self._refit(state).predicted_accuracy(program_idx)


class RecordingAdapter:
    """Wrap any GEPA adapter so every scored (candidate, example) lands in a :class:`ResponseRecorder`.

    Parameters
    ----------
    adapter:
        The GEPA adapter doing the real work (LLM calls + metric).
    recorder:
        A ``ResponseRecorder`` over the ids of the examples that will be scored.
    example_id:
        Maps a data instance to its id in the recorder (e.g. ``lambda ex: ex["id"]``).
    """

    def __init__(self, adapter: Any, recorder: Any, example_id: Any) -> None:
        self.adapter = adapter
        self.recorder = recorder
        self.example_id = example_id
        self.propose_new_texts = getattr(adapter, "propose_new_texts", None)

    def evaluate(self, batch: list[Any], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        result = self.adapter.evaluate(batch, candidate, capture_traces)
        for example, score in zip(batch, result.scores, strict=True):
            self.recorder.record(candidate, self.example_id(example), score)
        return result

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> Any:
        return self.adapter.make_reflective_dataset(candidate, eval_batch, components_to_update)
