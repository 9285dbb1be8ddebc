"""Record and replay: a replayed run equals the live run on a fake LM; a dataset mismatch is refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from neurips26.methods.poes import POESScheduler
from neurips26.methods.poes.replay import (
    ResponseRecorder,
    ResponseReplayer,
    dataset_hash,
    prompt_hash,
    run_rounds,
)

EXAMPLES = [f"ex{i}" for i in range(40)]
TEXTS = [f"question {i}" for i in range(40)]


class FakeLM:
    """A deterministic stand-in for an LLM program + metric: correctness from a hash of (prompt, example)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prompt: str, example: str) -> float:
        self.calls += 1
        skill = len(set(prompt.split())) / 10
        digest = int(hashlib.sha256(f"{prompt}|{example}".encode()).hexdigest()[:8], 16) / 16**8
        difficulty = int(example[2:]) / 40
        return float(digest < 0.3 + skill - 0.5 * difficulty)


def proposal_rounds(seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(15)]
    return [[" ".join(rng.choice(words, int(rng.integers(1, 8)))) for _ in range(3)] for _ in range(6)]


def test_replayed_run_equals_live_run(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    lm = FakeLM()
    embeddings = np.random.default_rng(1).normal(size=(40, 3))
    with ResponseRecorder(path, EXAMPLES, TEXTS) as recorder:
        live = run_rounds(POESScheduler(6, EXAMPLES, embeddings), proposal_rounds(), recorder.wrap(lm))
    replayer = ResponseReplayer(path, EXAMPLES, TEXTS)
    calls_before = lm.calls
    replayed = run_rounds(POESScheduler(6, EXAMPLES, embeddings), proposal_rounds(), replayer.score)
    assert lm.calls == calls_before  # the replay never touched the LM
    assert replayed == live
    assert replayer.prompt_order()[0] == proposal_rounds()[0][0]


def test_full_recording_replays_a_different_scheduler_exactly(tmp_path: Path) -> None:
    path = tmp_path / "full.jsonl"
    lm = FakeLM()
    prompts = [p for r in proposal_rounds() for p in r]
    with ResponseRecorder(path, EXAMPLES) as recorder:
        for prompt in prompts:
            for example in EXAMPLES:
                recorder.record(prompt, example, lm(prompt, example))
    replayer = ResponseReplayer(path, EXAMPLES)
    for prompt in prompts[:5]:
        for example in EXAMPLES[:5]:
            assert replayer.score(prompt, example) == FakeLM()(prompt, example)
    scheduler = POESScheduler(4, EXAMPLES)
    selections, bests, _ = run_rounds(scheduler, proposal_rounds(), replayer.score)
    assert all(len(s) == 4 for s in selections) and len(bests) == 6


def test_dataset_hash_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with ResponseRecorder(path, EXAMPLES, TEXTS) as recorder:
        recorder.record("p", "ex0", 1.0)
    with pytest.raises(ValueError, match="different dataset"):
        ResponseReplayer(path, EXAMPLES[:-1], TEXTS[:-1])
    with pytest.raises(ValueError, match="different dataset"):
        ResponseReplayer(path, EXAMPLES, [t + "!" for t in TEXTS])


def test_recorder_and_replayer_reject_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with ResponseRecorder(path, EXAMPLES) as recorder:
        with pytest.raises(ValueError, match="example_id"):
            recorder.record("p", "nope", 1.0)
        with pytest.raises(ValueError, match="score"):
            recorder.record("p", "ex0", float("nan"))
        with pytest.raises(ValueError, match="score"):
            recorder.record("p", "ex0", 2.0)
        recorder.record("p", "ex0", 0.5)
    replayer = ResponseReplayer(path, EXAMPLES)
    with pytest.raises(KeyError, match="not recorded"):
        replayer.score("q", "ex0")
    with pytest.raises(KeyError, match="not recorded"):
        replayer.score("p", "ex1")
    with pytest.raises(ValueError, match="path"):
        ResponseReplayer(tmp_path / "missing.jsonl", EXAMPLES)
    with pytest.raises(ValueError, match="contents"):
        dataset_hash(EXAMPLES, TEXTS[:3])
    assert prompt_hash({"a": "x", "b": "y"}) == prompt_hash({"b": "y", "a": "x"})
