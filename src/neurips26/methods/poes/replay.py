"""Record once, replay any scheduler offline: a JSONL log of (prompt hash, example id, score).

A recording starts with a header naming the dataset's hash (its example ids, and their contents when
given), so a replay on another dataset fails loudly. Each prompt's text is stored once, then one line per
scored (prompt, example). With a full recording (every proposed prompt on every example), any scheduler
can be replayed exactly: it asks for scores and the replayer answers from the file.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

FORMAT_VERSION = 1
Prompt = str | Mapping[str, str]


def prompt_hash(prompt: Prompt) -> str:
    """Stable 16-hex-digit hash of a prompt (a string or a GEPA-style {component: text} mapping)."""
    if isinstance(prompt, str):
        payload = prompt
    elif isinstance(prompt, Mapping):
        payload = json.dumps(dict(prompt), sort_keys=True)
    else:
        raise TypeError(f"prompt must be a str or a mapping of str to str, got {type(prompt).__name__}")
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def dataset_hash(example_ids: Sequence[Hashable], contents: Sequence[str] | None = None) -> str:
    """SHA-256 of the ordered example ids (and their contents, when given)."""
    if contents is not None and len(contents) != len(example_ids):
        raise ValueError(
            f"contents must have one entry per example id ({len(example_ids)}), got {len(contents)}"
        )
    rows = [
        [repr(i), None if contents is None else str(c)]
        for i, c in zip(example_ids, contents or [None] * len(example_ids), strict=True)
    ]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def _check_score(score: float) -> float:
    value = float(score)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"score must lie in [0, 1] and be finite, got {score!r}")
    return value


class ResponseRecorder:
    """Append every (prompt, example, score) of a live run to a JSONL file.

    Parameters
    ----------
    path:
        The recording file (created or overwritten).
    example_ids:
        The evaluation pool's ids (JSON-serialisable: str or int).
    contents:
        Optional example texts, folded into the dataset hash.
    """

    def __init__(
        self, path: str | Path, example_ids: Sequence[Hashable], contents: Sequence[str] | None = None
    ) -> None:
        self.path = Path(path)
        self.example_ids = list(example_ids)
        self._known = set(self.example_ids)
        self._prompts: set[str] = set()
        self._file: TextIO = self.path.open("w", encoding="utf-8")
        header = {
            "type": "header",
            "version": FORMAT_VERSION,
            "dataset_hash": dataset_hash(self.example_ids, contents),
            "n_examples": len(self.example_ids),
        }
        self._file.write(json.dumps(header) + "\n")

    def record(self, prompt: Prompt, example_id: Hashable, score: float) -> None:
        """Log one score."""
        if example_id not in self._known:
            raise ValueError(f"example_id {example_id!r} is not in the recorder's example_ids")
        value = _check_score(score)
        key = prompt_hash(prompt)
        if key not in self._prompts:
            self._prompts.add(key)
            self._file.write(json.dumps({"type": "prompt", "hash": key, "prompt": prompt}) + "\n")
        self._file.write(
            json.dumps({"type": "score", "prompt": key, "example": example_id, "score": value}) + "\n"
        )

    def wrap(self, score_fn: Callable[[Prompt, Hashable], float]) -> Callable[[Prompt, Hashable], float]:
        """A scoring function that calls ``score_fn`` (e.g. an LLM program + metric) and records each call."""

        def recorded(prompt: Prompt, example_id: Hashable) -> float:
            score = score_fn(prompt, example_id)
            self.record(prompt, example_id, score)
            return score

        return recorded

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ResponseRecorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ResponseReplayer:
    """Answer score queries from a recording, exactly; refuses a recording of another dataset.

    Parameters
    ----------
    path:
        A file written by :class:`ResponseRecorder`.
    example_ids, contents:
        The dataset the replay runs on; its hash must equal the recording's.
    """

    def __init__(
        self, path: str | Path, example_ids: Sequence[Hashable], contents: Sequence[str] | None = None
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"path {str(self.path)!r} is not a recording file")
        self.scores: dict[str, dict[Hashable, float]] = {}
        self.prompts: dict[str, Prompt] = {}
        expected = dataset_hash(list(example_ids), contents)
        with self.path.open(encoding="utf-8") as handle:
            header = json.loads(handle.readline() or "{}")
            if header.get("type") != "header":
                raise ValueError(f"path {str(self.path)!r} has no recording header")
            if header["dataset_hash"] != expected:
                raise ValueError(
                    f"the recording {str(self.path)!r} was made on a different dataset (hash mismatch: "
                    f"recorded {header['dataset_hash'][:12]}, example_ids/contents give {expected[:12]})"
                )
            for line in handle:
                entry = json.loads(line)
                if entry["type"] == "prompt":
                    self.prompts[entry["hash"]] = entry["prompt"]
                    self.scores.setdefault(entry["hash"], {})
                elif entry["type"] == "score":
                    self.scores.setdefault(entry["prompt"], {})[entry["example"]] = float(entry["score"])

    def score(self, prompt: Prompt, example_id: Hashable) -> float:
        """The recorded score; ``KeyError`` naming the pair when it was never recorded."""
        key = prompt_hash(prompt)
        row = self.scores.get(key)
        if row is None:
            raise KeyError(f"prompt {key} was not recorded in {str(self.path)!r}")
        if example_id not in row:
            raise KeyError(f"example {example_id!r} was not recorded for prompt {key}")
        return row[example_id]

    def prompt_order(self) -> list[Prompt]:
        """Prompts in the order they were first recorded."""
        return list(self.prompts.values())


def run_rounds(
    scheduler: Any,
    rounds: Sequence[Sequence[Prompt]],
    score: Callable[[Prompt, Hashable], float],
) -> tuple[list[list[Hashable]], list[Hashable], dict[Hashable, dict[Hashable, float]]]:
    """Drive a scheduler over fixed rounds of prompt proposals (live with an LM, or from a replayer).

    Each round: ``scheduler.select(responses)`` picks examples, every proposal of the round is scored on
    them with ``score``, ``scheduler.observe(responses)`` (when it has one) takes the new scores, and
    ``scheduler.best()`` names the best prompt (by :func:`prompt_hash`). Returns the per-round selections,
    the per-round best prompt and the response matrix {prompt hash: {example id: score}}.
    """
    responses: dict[Hashable, dict[Hashable, float]] = {}
    selections: list[list[Hashable]] = []
    bests: list[Hashable] = []
    observe = getattr(scheduler, "observe", None)
    for proposals in rounds:
        chosen = list(scheduler.select(responses))
        selections.append(chosen)
        for prompt in proposals:
            row = responses.setdefault(prompt_hash(prompt), {})
            for example in chosen:
                row[example] = float(score(prompt, example))
        if observe is not None:
            observe(responses)
        bests.append(scheduler.best())
    return selections, bests, responses
