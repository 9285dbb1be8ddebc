"""POES in GEPA: the evaluation-policy hook end to end with a no-LM adapter and a rule-based proposer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

gepa = pytest.importorskip("gepa")

from gepa.core.adapter import EvaluationBatch  # noqa: E402

from neurips26.methods.poes import POESConfig  # noqa: E402
from neurips26.methods.poes.integration import POESEvaluationPolicy, RecordingAdapter  # noqa: E402
from neurips26.methods.poes.replay import ResponseRecorder, ResponseReplayer, prompt_hash  # noqa: E402

VOCABULARY = [f"w{i}" for i in range(12)]


def make_examples(seed: int, n: int, prefix: str = "") -> list[dict[str, Any]]:
    """Each example is solved when the instruction holds at least ``need`` of its keywords."""
    rng = np.random.default_rng(seed)
    return [
        {
            "id": i,
            "uid": f"{prefix}{i}",
            "keys": frozenset(rng.choice(VOCABULARY, 4, replace=False).tolist()),
            "need": int(rng.integers(1, 4)),
        }
        for i in range(n)
    ]


class KeywordAdapter:
    """A GEPA adapter with no language model: a candidate's instruction is scored by keyword overlap."""

    propose_new_texts = None

    def __init__(self) -> None:
        self.calls = 0

    def evaluate(
        self, batch: list[dict], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        words = set(candidate["instruction"].split())
        scores = [float(len(words & ex["keys"]) >= ex["need"]) for ex in batch]
        self.calls += len(batch)
        traces = [{"example": ex["id"]} for ex in batch] if capture_traces else None
        return EvaluationBatch(outputs=list(scores), scores=scores, trajectories=traces)

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        return {
            c: [{"Inputs": "", "Generated Outputs": "", "Feedback": "add keywords"}]
            for c in components_to_update
        }


def keyword_proposer(seed: int) -> Any:
    rng = np.random.default_rng(seed)

    def propose(
        candidate: dict[str, str], reflective_dataset: Any, components_to_update: list[str]
    ) -> dict[str, str]:
        words = candidate["instruction"].split()
        if len(words) > 1 and rng.random() < 0.3:
            words.pop(int(rng.integers(len(words))))
        words.append(str(rng.choice(VOCABULARY)))
        return {"instruction": " ".join(words)}

    return propose


def run_gepa(policy: Any, tmp_path: Any, seed: int = 0, adapter: Any = None) -> tuple[Any, Any]:
    adapter = adapter if adapter is not None else KeywordAdapter()
    result = gepa.optimize(
        seed_candidate={"instruction": "w0"},
        trainset=make_examples(1, 20, "train"),
        valset=make_examples(2, 60, "val"),
        adapter=adapter,
        custom_candidate_proposer=keyword_proposer(seed),
        reflection_minibatch_size=4,
        max_metric_calls=400,
        val_evaluation_policy=policy,
        run_dir=str(tmp_path),
        seed=seed,
        display_progress_bar=False,
        logger=_QuietLogger(),
    )
    return result, adapter


class _QuietLogger:
    def log(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_gepa_runs_end_to_end_with_poes_policy(tmp_path: Any) -> None:
    rng = np.random.default_rng(0)
    policy = POESEvaluationPolicy(k=10, embeddings=rng.normal(size=(60, 4)))
    result, _ = run_gepa(policy, tmp_path / "poes")
    assert len(result.candidates) > 3
    assert policy.scheduler is not None
    # every candidate was scored on at most k validation examples (sparse evaluation) ...
    assert all(0 < len(scores) <= 10 for scores in result.val_subscores)
    # ... while GEPA's default policy scores all 60
    full, _ = run_gepa("full_eval", tmp_path / "full")
    assert all(len(scores) == 60 for scores in full.val_subscores)
    # GEPA's best candidate is POES's highest-ability prompt, not the best raw mean
    abilities = policy.scheduler.abilities()
    assert result.best_idx == max(abilities, key=abilities.get)


def test_policy_rejects_bad_k() -> None:
    with pytest.raises(ValueError, match="k must"):
        POESEvaluationPolicy(k=0)


def test_policy_valset_score_is_the_irt_prediction(tmp_path: Any) -> None:
    policy = POESEvaluationPolicy(k=8, config=POESConfig(n_leaders=2))
    result, _ = run_gepa(policy, tmp_path / "p2", seed=1)
    assert policy.scheduler is not None
    for idx in range(len(result.candidates)):
        assert 0.0 < policy.scheduler.predicted_accuracy(idx) < 1.0


def test_recording_adapter_logs_every_score_of_a_gepa_run_for_exact_replay(tmp_path: Any) -> None:
    train, val = make_examples(1, 20, "train"), make_examples(2, 60, "val")
    ids = [ex["uid"] for ex in train + val]

    def example_id(ex: dict) -> str:
        return ex["uid"]

    inner = KeywordAdapter()
    with ResponseRecorder(tmp_path / "gepa.jsonl", ids) as recorder:
        result, _ = run_gepa(
            POESEvaluationPolicy(k=10),
            tmp_path / "rec",
            adapter=RecordingAdapter(inner, recorder, example_id),
        )
    replayer = ResponseReplayer(tmp_path / "gepa.jsonl", ids)
    recorded = sum(len(row) for row in replayer.scores.values())
    assert 0 < recorded <= inner.calls
    by_id = {example_id(ex): ex for ex in train + val}
    for candidate in result.candidates:
        for key, score in replayer.scores[prompt_hash(candidate)].items():
            assert score == inner.evaluate([by_id[key]], candidate).scores[0]
