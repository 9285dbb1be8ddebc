"""RULER-style long-context tasks built from real text that ships with Python (no download, no file
outside the interpreter's own library).

Two fillers, both real text a code model meets in practice:

* prose -- the Python language reference's help topics (:mod:`pydoc_data.topics`, 79 topics, ~465k
  characters of English technical prose);
* code -- the source of pure-Python standard-library modules (:data:`CODE_MODULES`), read from the
  installed interpreter's library folder.

Two retrieval tasks, in the style of RULER (Hsieh et al. 2024):

* ``needle_prose`` -- multi-key needle in a haystack: ``needles`` sentences "The special magic number
  for amber-falcon is 482913." planted at random line boundaries (depth 5-90%) of a prose window; every
  needle is asked once after the context;
* ``kv_code`` -- key-value retrieval in code: ``needles`` assignments ``amber_falcon = 482913`` planted
  at random line boundaries of a source window (indented like the line they precede); every key is
  asked once as ``assert amber_falcon ==``.

The questions are short cues (a 0.5B model's cost is per token fed: every question is a row of the
forward pass of every press at every keep ratio): "The special magic number for amber-falcon is" and
``assert amber_falcon ==``; the answer is the 6-digit value.

Each context also carries its *continuation*: the real text that followed the window (the next
``continuation_tokens`` tokens), held out for perplexity and for greedy agreement with the full cache.

Keys are two words drawn from :data:`WORDS` (distinct in a context); values are 6-digit numbers. The
questions are asked *after* the context (kvpress's convention: the press compresses the context without
seeing the question). Everything is drawn from ``numpy.random.default_rng`` seeded by the caller, so a
seed is one independent context set.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from neurips26.methods.spectralkv.config import REAL_TASKS as TASKS

__all__ = [
    "CODE_MODULES",
    "FULL_CACHE_BAR",
    "TASKS",
    "TASK_METRICS",
    "WORDS",
    "RealContext",
    "build_context",
    "code_lines",
    "prose_lines",
    "task_gate_analysis",
    "task_gate_lines",
]

# pure-Python standard-library modules of ordinary code (no generated tables, no test data)
CODE_MODULES = (
    "argparse",
    "calendar",
    "configparser",
    "csv",
    "dataclasses",
    "difflib",
    "enum",
    "fractions",
    "ftplib",
    "functools",
    "gettext",
    "heapq",
    "ipaddress",
    "optparse",
    "pprint",
    "shlex",
    "smtplib",
    "statistics",
    "string",
    "tarfile",
    "textwrap",
    "uuid",
    "zipfile",
)

WORDS = (
    "amber", "arrow", "basil", "cedar", "cobalt", "comet", "coral", "delta", "ember", "falcon",
    "fern", "garnet", "harbor", "hazel", "indigo", "ivory", "jasper", "juniper", "lagoon", "lantern",
    "maple", "marble", "meadow", "mesa", "nectar", "nimbus", "oak", "onyx", "orchid", "otter",
    "pebble", "pepper", "quartz", "raven", "river", "saffron", "sable", "spruce", "tiger", "topaz",
    "tundra", "velvet", "violet", "walnut", "willow", "zephyr",
)  # fmt: skip


@dataclass
class RealContext:
    """One long context of a task: its token ids, the questions asked after it and its continuation."""

    task: str
    prefix: list[int]  # the context the press compresses
    questions: list[tuple[list[int], list[int]]]  # (question ids, answer ids), asked after the context
    continuation: list[int]  # the real text that followed the window (held out)


@cache
def prose_lines() -> tuple[str, ...]:
    """The lines of every help topic of :mod:`pydoc_data.topics`, topics in sorted order."""
    from pydoc_data.topics import topics

    return tuple(line + "\n" for name in sorted(topics) for line in topics[name].splitlines())


@cache
def code_lines() -> tuple[str, ...]:
    """The source lines of :data:`CODE_MODULES`, read from the running interpreter's library."""
    lines: list[str] = []
    for name in CODE_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise RuntimeError(f"standard-library module {name!r} has no Python source in this interpreter")
        with open(spec.origin, encoding="utf-8") as handle:
            lines.extend(line if line.endswith("\n") else line + "\n" for line in handle)
    return tuple(lines)


def _keys(rng: np.random.Generator, count: int) -> list[tuple[str, str]]:
    """``count`` distinct two-word keys (the words of one key differ)."""
    if count > len(WORDS) // 2:
        raise ValueError(f"needles must be at most {len(WORDS) // 2}, got {count}")
    words = rng.permutation(len(WORDS))[: 2 * count]
    return [(WORDS[words[2 * i]], WORDS[words[2 * i + 1]]) for i in range(count)]


def _needle(task: str, key: tuple[str, str], value: str, next_line: str) -> tuple[str, str, str]:
    """(planted line, question, answer) of one key of ``task``."""
    if task == "needle_prose":
        name = "-".join(key)
        line = f"The special magic number for {name} is {value}.\n"
        question = f"\nThe special magic number for {name} is"
        return line, question, f" {value}"
    if task == "kv_code":
        name = "_".join(key)
        indent = next_line[: len(next_line) - len(next_line.lstrip(" "))]
        line = f"{indent}{name} = {value}\n"
        question = f"\nassert {name} =="
        return line, question, f" {value}"
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _split_question(tokenizer: Any, question: str, answer: str) -> tuple[list[int], list[int]]:
    """Token ids of ``question`` and of ``answer`` as they tokenize together (the answer scored alone)."""
    head, whole = _ids(tokenizer, question), _ids(tokenizer, question + answer)
    if whole[: len(head)] != head or len(whole) == len(head):
        raise ValueError(f"the answer {answer!r} does not tokenize apart from its question {question!r}")
    return head, whole[len(head) :]


def build_context(
    tokenizer: Any,
    task: str,
    rng: np.random.Generator,
    *,
    context_tokens: int,
    needles: int,
    continuation_tokens: int,
    lines: tuple[str, ...] | None = None,
) -> RealContext:
    """One context of ``task``: a window of real text of about ``context_tokens`` tokens (never more)
    starting at a random line, ``needles`` planted keys, their questions and the held-out continuation.

    ``lines`` replaces the task's filler (tests); by default prose for ``needle_prose`` and code for
    ``kv_code``.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if needles < 1 or context_tokens < 64 or continuation_tokens < 2:
        raise ValueError(
            f"need needles >= 1, context_tokens >= 64, continuation_tokens >= 2; got {needles}, "
            f"{context_tokens}, {continuation_tokens}"
        )
    filler = lines if lines is not None else (prose_lines() if task == "needle_prose" else code_lines())
    keys = _keys(rng, needles)
    values = [str(v) for v in rng.integers(100_000, 1_000_000, size=needles)]
    # the needles' share of the window, measured on a typical line (their exact length varies by a token)
    needle_tokens = len(_ids(tokenizer, _needle(task, keys[0], values[0], "")[0])) + 2
    budget = context_tokens - needles * needle_tokens
    start = int(rng.integers(0, len(filler)))
    window: list[str] = []
    used = 0
    at = start
    while True:
        line = filler[at % len(filler)]
        cost = len(_ids(tokenizer, line))
        if used + cost > budget:
            break
        window.append(line)
        used += cost
        at += 1
    tail: list[str] = []
    while len(_ids(tokenizer, "".join(tail))) < continuation_tokens:
        tail.append(filler[at % len(filler)])
        at += 1
    if len(window) < needles + 2:
        raise ValueError(f"context_tokens={context_tokens} leaves too few filler lines for {needles} needles")
    # depth 5-90% of the window's lines, one needle per boundary
    lo, hi = max(1, int(0.05 * len(window))), max(2, int(0.9 * len(window)))
    spots = sorted(rng.choice(np.arange(lo, hi), size=needles, replace=False).tolist())
    planted = list(window)
    questions = []
    for offset, (spot, key, value) in enumerate(zip(spots, keys, values, strict=True)):
        line, question, answer = _needle(task, key, value, window[spot])
        planted.insert(spot + offset, line)
        questions.append(_split_question(tokenizer, question, answer))
    prefix = _ids(tokenizer, "".join(planted))
    while len(prefix) > context_tokens:  # tokens merge differently across lines: trim whole lines
        planted.pop()
        prefix = _ids(tokenizer, "".join(planted))
    if len(planted) < spots[-1] + needles:
        raise ValueError(f"context_tokens={context_tokens}: trimming the window cut a planted needle")
    continuation = _ids(tokenizer, "".join(tail))[:continuation_tokens]
    return RealContext(task, prefix, questions, continuation)


# the declared floor of a task: exact match of a 6-digit value by guessing is 1e-6, and a model that
# cannot retrieve from its own full cache tells nothing about a press; a task whose full cache scores
# below this bar (mean over seeds, at any keep ratio) is dropped: its claim is not read (README)
FULL_CACHE_BAR = 0.8
TASK_METRICS = {"needle_prose": "needle_acc", "kv_code": "kv_code_acc"}


def task_gate_lines(result: dict[str, Any]) -> list[str]:
    """One line per real task of ``result``: the full cache's exact match (mean over seeds and keep
    ratios, and the lowest seed) against :data:`FULL_CACHE_BAR`, and whether the task is kept."""
    lines = []
    for task, metric in TASK_METRICS.items():
        values = [
            cell["metrics"][metric]
            for cell in result.get("cells", [])
            if cell.get("system") == "full-cache" and metric in (cell.get("metrics") or {})
        ]
        if not values:
            continue
        mean = float(np.mean(values))
        verdict = "kept" if mean >= FULL_CACHE_BAR else "DROPPED (its claim is not evidence)"
        lines.append(
            f"- `{task}` ({metric}): full cache {mean:.2f} (lowest cell {min(values):.2f}) against the "
            f"declared bar {FULL_CACHE_BAR} (chance: 1e-6): {verdict}"
        )
    return lines


def task_gate_analysis(result: dict[str, Any]) -> Any:
    """The ``real_tasks`` analysis: the task gate of a ``real`` result (nothing for the tiny profiles)."""
    from neurips26.bench.experiment import Analysis

    lines = task_gate_lines(result)
    return Analysis("\n".join(lines) if lines else "No real-text task in this result.")
