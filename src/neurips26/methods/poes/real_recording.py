"""Tier 3's recorded matrix: a real LM's log-likelihoods of every candidate prompt on every WordNet item.

A fixed pool of candidate prompts per task, written as an automatic prompt optimizer would propose them
(families of paraphrases and variants of differing quality: zero-shot instructions, one-shot and
three-shot variants of them, and off-task instructions), is scored once with a real LM
(:func:`neurips26.zoo.real_lm.load_real`) on every item of the three tasks of ``wordnet_tasks.py``; the
log-probabilities of the four choices are saved, with the prompt texts, item ids and a dataset hash
(``replay.dataset_hash``), in one compressed ``.npz`` shipped with the package, so the ``real`` profile
replays every scheduler without the weights. Regenerate it (29 minutes wall on two cores shared at load
10-16: three task processes of one thread each, 2.3 GB peak RSS each; ``--checkpoint-dir`` resumes an
interrupted run prompt by prompt)::

    python -m neurips26.methods.poes.real_recording --checkpoint-dir /tmp/poes-ckpt \
        --out src/neurips26/methods/poes/data/real_lm_wordnet.npz
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.core.measure import peak_rss_mb
from neurips26.methods.poes.choice_scoring import choice_log_probs, choice_token_ids, render_demo
from neurips26.methods.poes.replay import dataset_hash, prompt_hash
from neurips26.methods.poes.wordnet_tasks import TASK_NAMES, ChoiceItem, ChoiceTask, build_task

RECORDING_PATH = Path(__file__).parent / "data" / "real_lm_wordnet.npz"
RECORD_COMMAND = (
    "python -m neurips26.methods.poes.real_recording --checkpoint-dir /tmp/poes-ckpt "
    "--out src/neurips26/methods/poes/data/real_lm_wordnet.npz"
)
N_ITEMS = 200
EMBED_DIM = 16

GOOD_INSTRUCTIONS = {
    "category": (
        "Classify each dictionary definition as an animal, a plant, a food, or a body part.",
        "Read the definition and say what kind of thing it describes: animal, plant, food or body.",
        "Each WordNet gloss below defines an animal, a plant, a food, or a part of the body. "
        "Give its category.",
        "Which category does the defined thing belong to? Options: animal, plant, food, body.",
    ),
    "hypernym": (
        "For each word, give the more general word it is a kind of (its hypernym).",
        "Name the broader category that each word belongs to.",
        "Every word below is a specific kind of something. Say what it is a kind of.",
        "Give the hypernym: a dog is a kind of canine, a rose is a kind of shrub.",
    ),
    "antonym": (
        "For each adjective, give its antonym (the word with the opposite meaning).",
        "Write the opposite of each word.",
        "Each adjective below has an opposite. Name it.",
        "Give the antonym: the opposite of hot is cold, the opposite of early is late.",
    ),
}
# what a careless optimizer step also proposes: empty, generic or off-task instructions
OFF_TASK_INSTRUCTIONS = (
    "",
    "Answer the following question.",
    "Translate the following text into French.",
    "Write a short poem about the sea.",
)
FAMILIES = ("instruction", "one_shot", "three_shot", "off_task")


@dataclass(frozen=True)
class CandidatePrompt:
    """A candidate prompt: its family (what an optimizer's mutation keeps) and its text (the prefix)."""

    family: str
    text: str


def candidate_prompts(task: ChoiceTask) -> list[CandidatePrompt]:
    """The task's fixed pool: 4 families x 4 variants (16 prompts), demonstrations from ``task.demos``."""
    good = GOOD_INSTRUCTIONS[task.name]
    demos = [render_demo(task.name, d) for d in task.demos]
    out = [CandidatePrompt("instruction", f"{g}\n\n") for g in good]
    out += [CandidatePrompt("one_shot", f"{g}\n\n{demos[i]}") for i, g in enumerate(good)]
    out += [
        CandidatePrompt("three_shot", f"{g}\n\n" + "".join(demos[4 + (3 * i + j) % 8] for j in range(3)))
        for i, g in enumerate(good)
    ]
    out += [CandidatePrompt("off_task", f"{o}\n\n" if o else "") for o in OFF_TASK_INSTRUCTIONS]
    return out


def item_contents(items: tuple[ChoiceItem, ...]) -> list[str]:
    """What the dataset hash sees of each item: subject, choices, answer."""
    return [json.dumps([i.subject, list(i.choices), i.answer]) for i in items]


def item_embeddings(
    model: Any, tokenizer: Any, items: tuple[ChoiceItem, ...], dim: int = EMBED_DIM
) -> np.ndarray:
    """Prompt-independent item features for POES's coverage term: the mean input embedding of the
    subject's tokens, projected on its top ``dim`` principal components (signs fixed), float32."""
    import torch

    table = model.get_input_embeddings().weight
    with torch.inference_mode():
        means = np.stack(
            [
                table[tokenizer(i.subject, add_special_tokens=False).input_ids].float().mean(0).numpy()
                for i in items
            ]
        ).astype(np.float64)
    centred = means - means.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ vt[:dim].T
    projected *= np.where(projected[np.abs(projected).argmax(0), np.arange(dim)] < 0, -1.0, 1.0)
    return projected.astype(np.float32)


def _scored(
    model: Any, tokenizer: Any, task: ChoiceTask, prefix: str, checkpoint_dir: Path | None
) -> np.ndarray:
    """One prompt's log-probabilities on every item, read from ``checkpoint_dir`` when an interrupted
    recording already scored it (keyed by the prompt's and the dataset's hash)."""
    key = f"{task.name}-{prompt_hash(prefix)}-{dataset_hash([i.id for i in task.items])[:16]}.npy"
    if checkpoint_dir is not None and (checkpoint_dir / key).is_file():
        return np.load(checkpoint_dir / key)
    scored = choice_log_probs(model, tokenizer, task.name, prefix, task.items)
    if checkpoint_dir is not None:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        np.save(checkpoint_dir / key, scored)
    return scored


def record_task(
    name: str,
    model_name: str,
    n_items: int = N_ITEMS,
    n_prompts: int | None = None,
    checkpoint_dir: Path | None = None,
) -> dict[str, Any]:
    """Score every candidate prompt (the first ``n_prompts`` when given) on every item of one task."""
    import torch

    from neurips26.zoo.real_lm import load_real

    torch.set_num_threads(1)  # one thread per task process: a busy machine stalls multi-thread barriers
    start = time.perf_counter()
    model, tokenizer = load_real(model_name)
    load_s = time.perf_counter() - start
    task = build_task(
        name, n_items, choice_filter=lambda i: choice_token_ids(tokenizer, i.choices) is not None
    )
    prompts = candidate_prompts(task)[:n_prompts]
    start = time.perf_counter()
    rows = []
    for number, prompt in enumerate(prompts):
        rows.append(_scored(model, tokenizer, task, prompt.text, checkpoint_dir))
        print(
            f"{name}: prompt {number + 1}/{len(prompts)} at {time.perf_counter() - start:.0f} s", flush=True
        )
    log_probs = np.stack(rows)
    return {
        "log_probs": log_probs,
        "answers": np.array([i.answer for i in task.items], dtype=np.int8),
        "item_ids": np.array([i.id for i in task.items]),
        "prompts": np.array([p.text for p in prompts]),
        "families": np.array([p.family for p in prompts]),
        "embeddings": item_embeddings(model, tokenizer, task.items),
        "dataset_hash": np.array(dataset_hash([i.id for i in task.items], item_contents(task.items))),
        "seconds": np.array([load_s, time.perf_counter() - start]),
        "peak_rss_mb": np.array(peak_rss_mb()),
    }


@dataclass(frozen=True)
class RecordedTask:
    """One task's recorded matrix, read back from the ``.npz``."""

    name: str
    log_probs: np.ndarray  # (n_prompts, n_items, 4)
    answers: np.ndarray  # (n_items,)
    item_ids: tuple[str, ...]
    prompts: tuple[str, ...]
    families: tuple[str, ...]
    embeddings: np.ndarray  # (n_items, EMBED_DIM)
    dataset_hash: str

    @property
    def correct(self) -> np.ndarray:
        """(n_prompts, n_items) 0/1: the highest-likelihood choice is the answer."""
        return (self.log_probs.argmax(-1) == self.answers[None]).astype(np.float64)


def load_recording(path: str | Path = RECORDING_PATH) -> tuple[dict[str, RecordedTask], dict[str, Any]]:
    """Every task of a recording and its metadata (model, command, seconds, peak memory)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recording {path} not found; regenerate it with `{RECORD_COMMAND}`")
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        tasks = {}
        for name in meta["tasks"]:
            tasks[name] = RecordedTask(
                name,
                data[f"{name}.log_probs"],
                data[f"{name}.answers"].astype(np.int64),
                tuple(str(x) for x in data[f"{name}.item_ids"]),
                tuple(str(x) for x in data[f"{name}.prompts"]),
                tuple(str(x) for x in data[f"{name}.families"]),
                data[f"{name}.embeddings"],
                str(data[f"{name}.dataset_hash"]),
            )
    return tasks, meta


def save_recording(
    path: str | Path, model_name: str, results: dict[str, dict[str, Any]], wall_s: float
) -> None:
    """Write every task's arrays and one metadata record (with the regenerating command) to ``path``."""
    arrays = {}
    for name, result in results.items():
        for key in ("log_probs", "answers", "item_ids", "prompts", "families", "embeddings", "dataset_hash"):
            arrays[f"{name}.{key}"] = result[key]
    meta = {
        "model": model_name,
        "tasks": list(results),
        "command": RECORD_COMMAND,
        "wall_s": round(wall_s, 1),
        "load_s": {n: round(float(r["seconds"][0]), 1) for n, r in results.items()},
        "scoring_s": {n: round(float(r["seconds"][1]), 1) for n, r in results.items()},
        "peak_rss_mb": {n: round(float(r["peak_rss_mb"]), 1) for n, r in results.items()},
        "prompt_hashes": {n: [prompt_hash(str(p)) for p in r["prompts"]] for n, r in results.items()},
        "threads_per_task": 1,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(path).with_suffix(".tmp.npz")
    np.savez_compressed(tmp, meta=np.array(json.dumps(meta)), **arrays)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record tier 3's prompts x items matrix with a real LM.")
    parser.add_argument("--out", default=str(RECORDING_PATH))
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--jobs", type=int, default=len(TASK_NAMES), help="task processes, one thread each")
    parser.add_argument(
        "--checkpoint-dir", type=Path, default=None, help="resume: one file per scored prompt"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {
            name: pool.submit(record_task, name, args.model, checkpoint_dir=args.checkpoint_dir)
            for name in TASK_NAMES
        }
        results = {name: f.result() for name, f in futures.items()}
    save_recording(args.out, args.model, results, time.perf_counter() - start)
    print(f"wrote {args.out} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
