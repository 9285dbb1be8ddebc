"""The SAD experiment: does solver-aware decomposition beat the solver-blind (SL) decomposer?

Models come from a small checkpoint bundle trained on our sampler's lengths 1-4
(``python -m neurips26.methods.sad.checkpoints``): one synthesizer, one no-decomposition synthesizer,
one SL-pretrained decomposer, and from it three fine-tunes with equal steps (SL continued, SAD, RL
without ``L_sup``). ``--set retrain=true`` redoes the fine-tunes per seed with ``method.*``.

Test data per seed: fresh tasks from our sampler (in-distribution: lengths 1-4; length generalisation:
length 5), deduplicated against the training tasks by I/O signature, and, when ``exedec_dir`` names a
folder holding ExeDec's DeepCoder ``NONE`` and ``LENGTH_GENERALIZATION`` test files (Shi et al., ICLR
2024; CC-BY 4.0; not shipped with the package), a seed-chosen subset of each. Every cell says in its
details whether those splits were evaluated, and why not (``n/a: ...``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile, Progress
from neurips26.bench.setup import Setup, SetupContext
from neurips26.core.config import nested, param
from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.analysis import accuracy_analysis
from neurips26.methods.sad.checkpoints import WEIGHTS_DIR, load_bundle, model_from, signature_hash
from neurips26.methods.sad.config import SADConfig
from neurips26.methods.sad.executor import execute, make_states
from neurips26.methods.sad.models import Decomposer, Synthesizer
from neurips26.methods.sad.sampler import Task, sample_tasks, step_records, task_from_exedec
from neurips26.methods.sad.search import enumerative_search, synthesize
from neurips26.methods.sad.training import StepTensors, encode_records, train_sad, train_supervised

SPLITS = {"id": (1, 2, 3, 4), "len": (5,)}
EXEDEC_SPLITS = {"exedec_id": "NONE", "exedec_len": "LENGTH_GENERALIZATION"}
# sha256 of google-deepmind/exedec data/test_data/deepcoder/<split>.jsonl: the ExeDec metrics are those of
# these exact files (the config holds only their folder)
EXEDEC_SHA256 = {
    "NONE": "285a425c3a63bde4c860631a3cebff642ff57e06c012a29b08daaa676441366a",
    "LENGTH_GENERALIZATION": "5230506b594069f48d52658fb78647e0d79e1178d3c01ab7aefdd135791f0c77",
}


@dataclass
class SADExperimentConfig:
    """Data, search and checkpoint settings shared by every system."""

    method: SADConfig = nested(SADConfig, "the SAD objective's defaults (config.py); used when retrain=true")
    bundle: str = param("default", "ours: the committed checkpoint bundle (weights/sad_<bundle>.pt)")
    num_tasks: int = param(30, "ours: tasks per split per seed that fit the ~4-minute default on 2 cores")
    exedec_dir: str = param(
        "",
        "issue: a folder with ExeDec's deepcoder NONE.jsonl and LENGTH_GENERALIZATION.jsonl (not shipped: "
        "CC-BY 4.0 data of google-deepmind/exedec, data/test_data/deepcoder); empty: those splits are n/a",
    )
    state_beam: int = param(2, "ours: beam over program states (paper: 10; CPU budget)")
    subgoal_beam: int = param(2, "ours: decomposer beam per state (paper: 10; CPU budget)")
    statement_beam: int = param(3, "ours: synthesizer beam per subgoal")
    enumerative_factor: float = param(1.0, "issue: the enumerative baseline gets the same execution budget")
    retrain: bool = param(False, "ours: fine-tune per seed instead of loading the bundle's fine-tunes")

    def __post_init__(self) -> None:
        if not isinstance(self.exedec_dir, str):
            raise TypeError(f"exedec_dir must be a folder path as a string, got {self.exedec_dir!r}")
        for name in ("num_tasks", "state_beam", "subgoal_beam", "statement_beam"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.enumerative_factor <= 0:
            raise ValueError(f"enumerative_factor must be > 0, got {self.enumerative_factor}")


@dataclass(frozen=True)
class System:
    """One system: how it searches (``mode``), which decomposer it uses, which synthesizer."""

    name: str
    mode: str  # decompose | kbest | oracle | no_decomposition | enumerative
    decomposer: str | None = None  # fine-tune name in the bundle
    sup_weight: float = 1.0
    rl_weight: float = 1.0


SHARED_MODELS = ("synthesizer", "no_decomposition", "sl_base")


@dataclass(frozen=True)
class Bundle:
    """The checkpoint bundle and the models every system shares (the fine-tunes are built per cell)."""

    weights: dict
    models: dict[str, torch.nn.Module]

    def model(self, key: str) -> torch.nn.Module:
        return self.models[key] if key in self.models else model_from(self.weights, key)


def _load_bundle(config: SADExperimentConfig, profile: Profile, seed: int, context: SetupContext) -> Bundle:
    weights = load_bundle(WEIGHTS_DIR / f"sad_{config.bundle}.pt")
    return Bundle(weights, {key: model_from(weights, key) for key in SHARED_MODELS})


def exedec_unavailable(exedec_dir: str) -> str | None:
    """Why ExeDec's splits are not evaluated (an ``n/a: ...`` line), or None when both files are there
    and are the published ones (sha256)."""
    if not exedec_dir:
        return (
            "n/a: exedec_dir is empty (ExeDec's test files are not part of the repository; "
            "--set exedec_dir=FOLDER evaluates them)"
        )
    folder = Path(exedec_dir).expanduser()
    missing = [f"{name}.jsonl" for name in EXEDEC_SHA256 if not (folder / f"{name}.jsonl").is_file()]
    if missing:
        return f"n/a: ExeDec files not found at {folder} (missing {', '.join(missing)})"
    for name, expected in EXEDEC_SHA256.items():
        digest = hashlib.sha256((folder / f"{name}.jsonl").read_bytes()).hexdigest()
        if digest != expected:
            return (
                f"n/a: {folder / f'{name}.jsonl'} is not ExeDec's published file "
                f"(sha256 {digest[:12]}..., expected {expected[:12]}...)"
            )
    return None


def _exedec_note(config: SADExperimentConfig) -> str:
    """The line every cell stores about ExeDec's splits (its ``details``)."""
    reason = exedec_unavailable(config.exedec_dir)
    if reason is not None:
        return reason
    folder = Path(config.exedec_dir).expanduser()
    return f"evaluated: {config.num_tasks} tasks per seed from each of {', '.join(EXEDEC_SHA256)} at {folder}"


def _test_tasks(split: str, seed: int, num_tasks: int, bundle: Bundle, exedec_dir: str) -> tuple[Task, ...]:
    if split in SPLITS:
        exclude = set(bundle.weights["train_hashes"].tolist())
        rng = np.random.default_rng(10_000 + seed)
        tasks: list[Task] = []
        while len(tasks) < num_tasks:
            for t in sample_tasks(rng, num_tasks - len(tasks), SPLITS[split]):
                if signature_hash(t.signature()) not in exclude:
                    tasks.append(t)
        return tuple(tasks)
    path = Path(exedec_dir).expanduser() / f"{EXEDEC_SPLITS[split]}.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    chosen = np.random.default_rng(20_000 + seed).choice(len(records), num_tasks, replace=False)
    return tuple(task_from_exedec(records[i]) for i in sorted(chosen))


def _beams(config: SADExperimentConfig) -> tuple[int, int, int]:
    return config.state_beam, config.subgoal_beam, config.statement_beam


def _needs_oracle(profile: Profile) -> bool:
    """Whether a system of the profile decodes subgoals (then ``beyond_oracle`` needs the GT oracle)."""
    return any(SYSTEMS[name].decomposer is not None for name in (profile.systems or SYSTEMS))


@dataclass(frozen=True)
class SeedTasks:
    """The seed's test tasks per split and which of them the GT-subgoal oracle solves (when needed)."""

    tasks: dict[str, tuple[Task, ...]]
    oracle_solved: dict[str, np.ndarray]


def _seed_tasks_key(config: SADExperimentConfig, profile: Profile, seed: int) -> tuple[Any, ...]:
    splits = tuple(_splits(config))
    return (
        config.bundle,
        config.exedec_dir,
        seed,
        config.num_tasks,
        splits,
        _beams(config),
        _needs_oracle(profile),
    )


def _seed_tasks(config: SADExperimentConfig, profile: Profile, seed: int, context: SetupContext) -> SeedTasks:
    bundle: Bundle = context.bundle
    tasks = {
        split: _test_tasks(split, seed, config.num_tasks, bundle, config.exedec_dir)
        for split in _splits(config)
    }
    oracle = {}
    if _needs_oracle(profile):
        synth = bundle.model("synthesizer")
        oracle = {
            split: synthesize(list(chosen), synth, None, "oracle", *_beams(config)).solved
            for split, chosen in tasks.items()
        }
    return SeedTasks(tasks, oracle)


SETUP = (
    Setup("bundle", build=_load_bundle, key=lambda config, profile, seed: config.bundle),
    Setup("seed_tasks", build=_seed_tasks, key=_seed_tasks_key),
)


def _splits(config: SADExperimentConfig) -> list[str]:
    present = exedec_unavailable(config.exedec_dir) is None
    return list(SPLITS) + (list(EXEDEC_SPLITS) if present else [])


def _retrained(system: System, config: SADExperimentConfig, bundle: Bundle, seed: int) -> Decomposer:
    """Fine-tune the bundle's SL decomposer for this seed with ``config.method`` (``retrain=true``)."""
    spec = bundle.weights["spec"]
    tasks = sample_tasks(
        np.random.default_rng(spec["data_seed"]), spec["num_train_tasks"], tuple(spec["train_lengths"])
    )
    data = encode_records(step_records(tasks))
    model = copy.deepcopy(bundle.model("sl_base"))
    m = config.method
    if system.decomposer == "sl":
        train_supervised(model, data, m.steps, m.batch_size, m.lr, seed=100 + seed, grad_clip=m.grad_clip)
    else:
        cfg = SADConfig(**{**asdict(m), "sup_weight": system.sup_weight * m.sup_weight})
        train_sad(model, bundle.model("synthesizer"), data, cfg, seed=100 + seed)
    return model.eval()


def step_metrics(
    tasks: tuple[Task, ...], decomposer: Decomposer, synthesizer: Synthesizer, beam: int = 2
) -> dict[str, float]:
    """On the GT trajectory of every task: GT-subgoal exact match of the greedy subgoal, the GT
    subgoal's presence among the decomposer's ``beam`` best (coverage, what k-best decoding exploits),
    synthesis accuracy given the decomposer's own subgoal (top-1 statement realises it) and the
    synthesizer's CE of the GT statement given that subgoal (SAD's reward, negated)."""
    data: StepTensors = encode_records(step_records(list(tasks)))
    with torch.no_grad():
        subgoal = decomposer.generate(data.decomposer_input(), greedy=True)
        match = (subgoal == data.subgoal_seq[:, : subgoal.shape[1]]).all(1).numpy()
        kbest, _ = decomposer.beam_search(data.decomposer_input(), beam)
        gt = data.subgoal_seq[:, None, : kbest.shape[2]]
        covered = (kbest == gt).all(2).any(1).numpy()
        target = tok.chunk_subgoal_tokens(subgoal, data.context.state.shape[1])
        lp = synthesizer.log_probs(data.context, target)
        ce = -lp.gather(1, data.statement[:, None]).squeeze(1).numpy()
        top = lp.argmax(1).numpy()
    records = step_records(list(tasks))
    realised = np.zeros(len(records), dtype=bool)
    states = make_states([r.state for r in records]) if len({len(r.state[0]) for r in records}) == 1 else None
    for i, r in enumerate(records):
        wanted = tok.parse_subgoal(subgoal[i].tolist(), len(r.outputs))
        if wanted is None:
            continue
        one = states.take(np.array([i])) if states is not None else make_states([r.state])
        res = execute(one, np.array([0]), np.array([top[i]]))
        if res.ok.all():
            got = tuple(
                int(res.values[0, e, 0])
                if res.kind[0] == 1
                else tuple(int(v) for v in res.values[0, e, : res.lengths[0, e]])
                for e in range(len(r.outputs))
            )
            realised[i] = got == wanted
    return {
        "gt_match": float(match.mean()),
        "gt_in_beam": float(covered.mean()),
        "synth_acc": float(realised.mean()),
        "synth_ce": float(ce.mean()),
    }


def run(
    system: System,
    config: SADExperimentConfig,
    context: SetupContext,
    profile: Profile,
    seed: int,
    progress: Progress,
) -> dict[str, Any]:
    bundle: Bundle = context.bundle
    seed_tasks: SeedTasks = context.seed_tasks
    synth = bundle.model("no_decomposition" if system.mode == "no_decomposition" else "synthesizer")
    decomposer = None
    if system.decomposer is not None:
        decomposer = (
            _retrained(system, config, bundle, seed)
            if config.retrain
            else bundle.model(f"finetuned/{system.decomposer}/{_bundle_seed(bundle, seed)}")
        )
    metrics: dict[str, Any] = {}
    start = time.perf_counter()
    for split in _splits(config):
        tasks = seed_tasks.tasks[split]
        if system.mode == "enumerative":
            budget = _neural_budget(tasks, config)
            result = enumerative_search(list(tasks), budget, seed=seed)
        else:
            result = synthesize(
                list(tasks),
                synth,
                decomposer,
                system.mode,
                config.state_beam,
                config.subgoal_beam,
                config.statement_beam,
            )
        metrics[f"task_acc_{split}"] = float(result.solved.mean())
        metrics[f"executions_{split}"] = float(result.executions.mean())
        if decomposer is not None:
            if system.mode == "decompose":  # k-best decoding reuses SAD's decomposer: same step metrics
                steps = step_metrics(tasks, decomposer, synth, config.subgoal_beam)
                metrics[f"gt_mismatch_{split}"] = 1.0 - steps["gt_match"]
                metrics[f"gt_in_beam_{split}"] = steps["gt_in_beam"]
                metrics[f"synth_acc_{split}"] = steps["synth_acc"]
                metrics[f"synth_ce_{split}"] = steps["synth_ce"]
            oracle = seed_tasks.oracle_solved[split]
            metrics[f"beyond_oracle_{split}"] = float((result.solved & ~oracle).mean())
    metrics["search_seconds"] = time.perf_counter() - start
    metrics["details"] = {"exedec": _exedec_note(config)}
    return metrics


def _bundle_seed(bundle: Bundle, seed: int) -> int:
    seeds = bundle.weights["spec"]["finetune_seeds"]
    return int(seeds[seed % len(seeds)])


def _neural_budget(tasks: tuple[Task, ...], config: SADExperimentConfig) -> int:
    """Worst-case statement executions per task of the neural search (state x subgoal x statement beams
    per round, length + 1 rounds), times ``enumerative_factor``."""
    rounds = max(len(t.program) for t in tasks) + 1
    return int(
        config.enumerative_factor * rounds * config.state_beam * config.subgoal_beam * config.statement_beam
    )


SYSTEMS = {
    "sad": System("sad", "decompose", "sad"),
    "sl_decomposer": System("sl_decomposer", "decompose", "sl", rl_weight=0.0),
    "no_decomposition": System("no_decomposition", "no_decomposition"),
    "gt_oracle": System("gt_oracle", "oracle"),
    "kbest": System("kbest", "kbest", "sad"),  # analysis reference: SAD's beam, GT subgoal when covered
    "rl_only": System("rl_only", "decompose", "rl_only", sup_weight=0.0),
    "enumerative": System("enumerative", "enumerative"),
}

_ALL_SPLITS = list(SPLITS) + list(EXEDEC_SPLITS)
_NAMES = {
    "id": "our in-distribution (lengths 1-4)",
    "len": "our length generalisation (length 5)",
    "exedec_id": "ExeDec NONE",
    "exedec_len": "ExeDec LENGTH_GENERALIZATION",
}
_PER_SPLIT = tuple(
    m
    for s in _ALL_SPLITS
    for m in (
        Metric(f"task_acc_{s}", "max", "fraction", f"end-to-end task accuracy, {_NAMES[s]}"),
        Metric(
            f"gt_mismatch_{s}",
            "max",
            "fraction",
            f"1 - GT-subgoal exact match on GT-trajectory steps, {_NAMES[s]} "
            "(the accuracy paradox: SAD higher)",
        ),
        Metric(
            f"gt_in_beam_{s}",
            "max",
            "fraction",
            f"GT subgoal among the decomposer's subgoal_beam best on GT-trajectory steps, {_NAMES[s]}",
        ),
        Metric(
            f"synth_acc_{s}",
            "max",
            "fraction",
            f"synthesizer top-1 realises the decomposer's own subgoal, {_NAMES[s]}",
        ),
        Metric(
            f"synth_ce_{s}",
            "min",
            "nats",
            f"synthesizer CE of the GT statement given own subgoal, {_NAMES[s]}",
        ),
        Metric(
            f"beyond_oracle_{s}",
            "max",
            "fraction",
            f"tasks solved that the GT-subgoal oracle fails, {_NAMES[s]}",
        ),
        Metric(f"executions_{s}", "min", "statements", f"statements executed per task, {_NAMES[s]}"),
    )
)
METRICS = (
    *_PER_SPLIT,
    Metric("search_seconds", "min", "s", "wall time of all searches of the cell", timing=True),
)


def _factory(system: System):
    return lambda config: System(
        system.name,
        system.mode,
        system.decomposer,
        sup_weight=system.sup_weight * (config.method.sup_weight if config.retrain else 1.0),
        rl_weight=system.rl_weight,
    )


# Positive contrasts (issue #48). Ground-truth subgoals vs no decomposition: the paper's premise that good
# subgoals help the synthesizer. An RL decomposer that never sees GT subgoals mismatches them more than
# the SL decomposer trained on them, and its subgoals are harder to synthesize.
TASK_CONTRAST = ("gt_oracle", "no_decomposition")
MISMATCH_CONTRAST = ("rl_only", "sl_decomposer")
SYNTH_CONTRAST = ("sl_decomposer", "rl_only")

EXPERIMENT = Experiment(
    slug="sad",
    config_cls=SADExperimentConfig,
    claims=(
        Claim(
            "SAD beats the solver-blind SL decomposer on length-generalisation task accuracy",
            "task_acc_len",
            "sad",
            ("sl_decomposer",),
            controls=("rl_only",),
            contrast=TASK_CONTRAST,
        ),
        Claim(
            "SAD beats the solver-blind SL decomposer on in-distribution task accuracy",
            "task_acc_id",
            "sad",
            ("sl_decomposer",),
            controls=("rl_only",),
            contrast=TASK_CONTRAST,
        ),
        Claim(
            "accuracy paradox: SAD matches GT subgoals less often than the SL decomposer (in-distribution)",
            "gt_mismatch_id",
            "sad",
            ("sl_decomposer",),
            # control: a decomposer trained by reward alone never imitates GT either; if it mismatches GT
            # as much, the mismatch alone is no paradox of SAD's (the verdict says vacuous)
            controls=("rl_only",),
            contrast=MISMATCH_CONTRAST,
        ),
        Claim(
            "SAD's subgoals are easier for the synthesizer than the SL decomposer's (in-distribution)",
            "synth_acc_id",
            "sad",
            ("sl_decomposer",),
            controls=("rl_only",),
            contrast=SYNTH_CONTRAST,
        ),
    ),
    metrics=METRICS,
    systems={name: _factory(system) for name, system in SYSTEMS.items()},
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=45,
            seeds=1,
            overrides={"num_tasks": 6},
            systems=("sad", "sl_decomposer", "gt_oracle", "enumerative"),
        ),
        "default": Profile("default", budget_s=270, seeds=5),  # 244 s measured (one worker, other core busy)
        "full": Profile(  # retrain: three 1,000-step fine-tunes per seed (~30 core-minutes each seed)
            "full",
            budget_s=10800,
            seeds=5,
            overrides={"num_tasks": 200, "state_beam": 3, "subgoal_beam": 3, "retrain": True},
        ),
    },
    run=run,
    setup=SETUP,
    ours="sad",
    analyses={"accuracy": accuracy_analysis},  # every system's accuracies on every split + the figure
)
