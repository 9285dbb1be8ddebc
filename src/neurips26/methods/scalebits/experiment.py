"""The ScaleBITS experiment: held-out perplexity versus average bits on a tiny Llama (or Qwen3).

Model: the zoo's ``config.model`` (``tiny-llama`` by default, ``tiny-qwen3`` with ``--set
model=tiny-qwen3``) when its checkpoint loads; for ``tiny-llama`` otherwise a tiny byte-level Llama trained
here for ``fallback_steps`` steps on the source text of a few stdlib modules (``inspect.getsource``;
held-out text from other modules). Seeds draw different calibration windows. One progressive run per (system,
seed) yields every budget of the profile's grid; the runner's grid points read its snapshots.
"""

from __future__ import annotations

import copy
import inspect
import math
import time
from dataclasses import dataclass
from typing import Any

import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, NotApplicable, Profile, Progress
from neurips26.core.config import config_hash
from neurips26.methods.scalebits.baselines import (
    GPTQConfig,
    HAWQConfig,
    HQQConfig,
    UniformRTNConfig,
    apply_layer_bits,
    hawq_allocation,
    quantize_gptq_allocation,
    quantize_random,
    uniform_ledger_bits,
)
from neurips26.methods.scalebits.config import ScaleBitsConfig, ScaleBitsExperimentConfig
from neurips26.methods.scalebits.integration import (
    ModelAllocation,
    apply_allocation,
    packed_report,
    quantize_,
    reorder_and_allocate,
    select_linears,
)
from neurips26.methods.scalebits.sfmp import SFMPConfig
from neurips26.methods.scalebits.slim import SliMLLMConfig

TRAIN_MODULES = ("argparse", "textwrap", "string", "json.decoder", "json.encoder", "difflib", "shlex")
HELDOUT_MODULES = ("calendar", "fractions")


@dataclass(frozen=True)
class Recipe:
    """One system: how its allocation is chosen."""

    name: str
    kind: str  # "scalebits", "rtn", "gptq", "hqq", "hawq", "slim", "sfmp", "random"
    sensitivity: str = "dynamic"
    reorder: str = "folded"
    quantizer: str = "rtn"  # how a ScaleBITS / SliM-LLM allocation is rounded: "rtn" or "gptq"


RECIPES = {
    "scalebits": Recipe("scalebits", "scalebits"),
    "static_sensitivity": Recipe("static_sensitivity", "scalebits", sensitivity="static"),
    "scalebits_no_reorder": Recipe("scalebits_no_reorder", "scalebits", reorder="none"),
    "scalebits_gather": Recipe("scalebits_gather", "scalebits", reorder="gather"),
    "random_allocation": Recipe("random_allocation", "random"),
    "uniform_rtn": Recipe("uniform_rtn", "rtn"),
    "uniform_gptq": Recipe("uniform_gptq", "gptq"),
    "uniform_hqq": Recipe("uniform_hqq", "hqq"),
    "hawq_layerwise": Recipe("hawq_layerwise", "hawq"),
    "slim_llm": Recipe("slim_llm", "slim", quantizer="gptq"),
    "slim_llm_rtn": Recipe("slim_llm_rtn", "slim"),
    "sfmp": Recipe("sfmp", "sfmp"),
    "scalebits_gptq": Recipe("scalebits_gptq", "scalebits", quantizer="gptq"),
}


@dataclass
class LanguageTask:
    model: torch.nn.Module
    train_ids: torch.Tensor  # 1-D token ids
    heldout_ids: torch.Tensor
    source: str  # "zoo" or "fallback"
    train_seconds: float
    tokenizer: Any = None  # the zoo tokenizer (retrieval probes); None for the byte-level fallback


_TASKS: dict[str, LanguageTask] = {}
_ALLOCATIONS: dict[tuple, tuple[ModelAllocation, torch.nn.Module, float]] = {}
_TRACES: dict[tuple, tuple[dict[str, float], float]] = {}


def _stdlib_bytes(modules: tuple[str, ...]) -> torch.Tensor:
    import importlib

    text = "\n".join(inspect.getsource(importlib.import_module(name)) for name in modules)
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def train_fallback_llama(config: ScaleBitsExperimentConfig, train_ids: torch.Tensor) -> torch.nn.Module:
    """A tiny byte-level Llama trained in-process (AdamW, fixed seed) when the zoo model is missing."""
    from neurips26.zoo.builders import tiny_llama

    hidden = config.fallback_hidden
    model = tiny_llama(hidden_size=hidden, intermediate_size=2 * hidden, num_layers=2, vocab_size=256).train()
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    length = config.sequence_length
    for step in range(config.fallback_steps):
        for group in optimizer.param_groups:  # linear warm-up then cosine decay
            group["lr"] = (
                3e-3
                * min(1.0, (step + 1) / 20)
                * 0.5
                * (1 + math.cos(math.pi * step / config.fallback_steps))
            )
        starts = torch.randint(0, len(train_ids) - length - 1, (16,), generator=generator)
        batch = torch.stack([train_ids[s : s + length] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def load_task(config: ScaleBitsExperimentConfig) -> LanguageTask:
    """The zoo ``config.model`` with its corpus if available, else (tiny-llama only) the in-process fallback
    (cached per config)."""
    key = config_hash(config.__class__(**{**config.__dict__, "avg_bits": 3.0}))
    if key in _TASKS:
        return _TASKS[key]
    start = time.perf_counter()
    task = _zoo_task(config)
    if task is None and config.model != "tiny-llama":
        raise RuntimeError(
            f"model={config.model!r}: the zoo checkpoint does not load (or tile={config.tile} does not "
            "divide its weights with pad=False); only tiny-llama has an in-process fallback"
        )
    if task is None:
        train_ids, heldout_ids = _stdlib_bytes(TRAIN_MODULES), _stdlib_bytes(HELDOUT_MODULES)
        model = train_fallback_llama(config, train_ids)
        task = LanguageTask(model, train_ids, heldout_ids, "fallback", time.perf_counter() - start)
    _TASKS[key] = task
    return task


def _zoo_task(config: ScaleBitsExperimentConfig) -> LanguageTask | None:
    """The zoo's trained ``config.model`` and its token splits, or None when the zoo or checkpoint is missing
    or when ``config.tile`` does not divide its linear weights and ``config.pad`` is off (the zoo spec's
    intermediate size 688 = 16 x 43 needs padding)."""
    try:
        from neurips26.zoo import load
        from neurips26.zoo.evaluation import heldout_tokens, load_corpus_tokens

        model, tokenizer = load(config.model)
        train = torch.from_numpy(load_corpus_tokens(tokenizer, "train", None).haystack.ids).long()
        heldout = torch.from_numpy(heldout_tokens(tokenizer).haystack.ids).long()
    except Exception:
        return None
    for layer in select_linears(model, ScaleBitsConfig().filter_fn).values():
        rows, cols = layer.weight.shape
        if not config.pad and (rows % config.tile[0] or cols % config.tile[1]):
            return None
    return LanguageTask(model.eval(), train, heldout, "zoo", 0.0, tokenizer)


def calibration_windows(ids: torch.Tensor, n: int, length: int, seed: int) -> torch.Tensor:
    """``n`` random windows of ``length`` tokens (the seed picks the calibration sample)."""
    generator = torch.Generator().manual_seed(1000 + seed)
    starts = torch.randint(0, len(ids) - length - 1, (n,), generator=generator)
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


def evaluation_windows(ids: torch.Tensor, config: Any) -> torch.Tensor:
    """The held-out token windows ``(n_windows, sequence_length)`` every system is evaluated on."""
    length = config.sequence_length
    n_windows = max(1, min(len(ids) // length, config.eval_tokens // length))
    return ids[: n_windows * length].reshape(n_windows, length)


def evaluate(
    model: torch.nn.Module, reference: torch.nn.Module | torch.Tensor, ids: torch.Tensor, config: Any
) -> dict:
    """Held-out perplexity and next-token top-1 agreement with the full-precision model.

    ``reference`` is the full-precision model or its precomputed top-1 predictions
    ``(n_windows, sequence_length - 1)`` on the same windows (see :func:`reference_predictions`).
    """
    windows = evaluation_windows(ids, config)
    total, agree, count = 0.0, 0, 0
    with torch.no_grad():
        for index, batch in zip(range(0, len(windows), 8), windows.split(8), strict=True):
            logits = model(input_ids=batch).logits[:, :-1].float()
            if isinstance(reference, torch.Tensor):
                predicted = reference[index : index + len(batch)]
            else:
                predicted = reference(input_ids=batch).logits[:, :-1].argmax(-1)
            total += float(
                torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum"
                )
            )
            agree += int((logits.argmax(-1) == predicted).sum())
            count += batch[:, 1:].numel()
    return {"perplexity": math.exp(total / count), "agreement": agree / count}


def retrieval(model: torch.nn.Module, task: LanguageTask, config: ScaleBitsExperimentConfig) -> float:
    """Exact-match accuracy of the zoo's multi-query associative recall probe (``mqar``) at
    ``retrieval_length`` tokens; NaN for the byte-level fallback (no zoo tokenizer). The zoo models are at
    chance on it today (chance 1/90), so it is a wiring check, not a discriminating metric."""
    if task.tokenizer is None:
        return float("nan")
    from neurips26.zoo.evaluation import retrieval_accuracy

    return retrieval_accuracy(
        model, task.tokenizer, "mqar", config.retrieval_length, n_samples=config.retrieval_samples
    )


_REFERENCE: dict[tuple, tuple[torch.Tensor, float]] = {}


def reference_predictions(
    task: LanguageTask, config: ScaleBitsExperimentConfig
) -> tuple[torch.Tensor, float]:
    """The full-precision model's top-1 predictions and perplexity, once per task and evaluation windows."""
    key = (id(task), config.sequence_length, config.eval_tokens)
    if key not in _REFERENCE:
        windows = evaluation_windows(task.heldout_ids, config)
        with torch.no_grad():
            predicted = torch.cat(
                [task.model(input_ids=batch).logits[:, :-1].argmax(-1) for batch in windows.split(8)]
            )
        perplexity = evaluate(task.model, predicted, task.heldout_ids, config)["perplexity"]
        _REFERENCE[key] = (predicted, perplexity)
    return _REFERENCE[key]


def _scalebits_config(config: ScaleBitsExperimentConfig, recipe: Recipe, target: float) -> ScaleBitsConfig:
    return ScaleBitsConfig(
        avg_bits=target,
        bits=config.bits,
        tile=config.tile,
        group_size=config.group_size,
        sensitivity=recipe.sensitivity,
        reorder=recipe.reorder,
        fraction=config.fraction,
        micro_batch=config.micro_batch,
        pad=config.pad,
    )


def progressive_run(
    recipe: Recipe, config: ScaleBitsExperimentConfig, task: LanguageTask, targets: list[float], seed: int
) -> tuple[ModelAllocation, torch.nn.Module, float]:
    """Reorder (folded) and allocate once for every target; cached per (system, config, targets, seed)."""
    key = (
        (recipe.kind, recipe.sensitivity, recipe.reorder),
        config_hash(config.__class__(**{**config.__dict__, "avg_bits": 3.0})),
        tuple(targets),
        seed,
    )
    if key in _ALLOCATIONS:
        return _ALLOCATIONS[key]
    start = time.perf_counter()
    calibration = calibration_windows(
        task.train_ids, config.calibration_sequences, config.sequence_length, seed
    )
    model = copy.deepcopy(task.model)
    allocation, _ = reorder_and_allocate(
        model, calibration, targets, _scalebits_config(config, recipe, max(targets))
    )
    _ALLOCATIONS[key] = (allocation, model, time.perf_counter() - start)
    return _ALLOCATIONS[key]


def uniform_bits_within(
    config: ScaleBitsExperimentConfig, linears: dict, target: float, float_zeros: bool = False
) -> int | None:
    """The largest uniform bit-width whose ledger (metadata included) fits ``target`` bits per weight."""
    n_weights = sum(layer.weight.numel() for layer in linears.values())
    fitting = [
        bits
        for bits in config.bits
        if sum(
            uniform_ledger_bits(tuple(layer.weight.shape), config.tile, config.group_size, bits, float_zeros)
            for layer in linears.values()
        )
        <= math.floor(target * n_weights + 1e-6)
    ]
    return max(fitting) if fitting else None


def _uniform_width(config: ScaleBitsExperimentConfig, linears: dict, float_zeros: bool = False) -> int:
    bits = uniform_bits_within(config, linears, config.avg_bits, float_zeros)
    if bits is None:
        raise NotApplicable(f"no uniform bit-width in {config.bits} fits {config.avg_bits} bits/weight")
    return bits


def hawq_traces(
    config: ScaleBitsExperimentConfig, task: LanguageTask, calibration: torch.Tensor, seed: int
) -> tuple[dict[str, float], float]:
    """Hutchinson traces of the full-precision model, once per (config, seed): every budget reuses them."""
    key = (config_hash(config.__class__(**{**config.__dict__, "avg_bits": 3.0})), seed)
    if key not in _TRACES:
        start = time.perf_counter()
        model = copy.deepcopy(task.model)
        _, traces = hawq_allocation(model, calibration, _hawq_config(config, seed), [])
        _TRACES[key] = (traces, time.perf_counter() - start)
    return _TRACES[key]


def _hawq_config(config: ScaleBitsExperimentConfig, seed: int) -> HAWQConfig:
    return HAWQConfig(
        avg_bits=config.avg_bits,
        bits=config.bits,
        tile=config.tile,
        group_size=config.group_size,
        pad=config.pad,
        hutchinson_samples=config.hutchinson_samples,
        micro_batch=config.micro_batch,
        seed=seed,
    )


def quantize_baseline(
    recipe: Recipe, config: ScaleBitsExperimentConfig, task: LanguageTask, seed: int
) -> tuple[torch.nn.Module, object, float]:
    """One uniform / layer-wise / random baseline at ``config.avg_bits``: the model, report and seconds."""
    start = time.perf_counter()
    calibration = calibration_windows(
        task.train_ids, config.calibration_sequences, config.sequence_length, seed
    )
    model = copy.deepcopy(task.model)
    linears = select_linears(model, ScaleBitsConfig().filter_fn)
    layout = {"tile": config.tile, "group_size": config.group_size, "pad": config.pad}
    extra = 0.0
    if recipe.kind == "rtn":
        report = quantize_(model, UniformRTNConfig(bits=_uniform_width(config, linears), **layout))
    elif recipe.kind == "gptq":
        gptq = GPTQConfig(bits=_uniform_width(config, linears), micro_batch=config.micro_batch, **layout)
        report = quantize_(model, gptq, calibration=calibration)
    elif recipe.kind == "hqq":
        report = quantize_(model, HQQConfig(bits=_uniform_width(config, linears, float_zeros=True), **layout))
    elif recipe.kind == "slim":
        slim = SliMLLMConfig(
            avg_bits=config.avg_bits,
            bits=config.bits,
            quantizer=recipe.quantizer,
            micro_batch=config.micro_batch,
            **layout,
        )
        report = quantize_(model, slim, calibration=calibration)
    elif recipe.kind == "sfmp":
        sfmp = SFMPConfig(
            avg_bits=config.avg_bits, bits=config.bits, micro_batch=config.micro_batch, **layout
        )
        report = quantize_(model, sfmp, calibration=calibration)
    elif recipe.kind == "hawq":
        traces, extra = hawq_traces(config, task, calibration, seed)
        allocations, _ = hawq_allocation(
            model, calibration, _hawq_config(config, seed), [config.avg_bits], traces
        )
        report = apply_layer_bits(
            model, allocations[config.avg_bits], config.tile, config.group_size, config.pad
        )
    else:
        report = quantize_random(
            model, config.avg_bits, config.bits, config.tile, config.group_size, seed, config.pad
        )
    return model, report, time.perf_counter() - start + extra


def run(
    recipe: Recipe, config: ScaleBitsExperimentConfig, profile: Profile, seed: int, progress: Progress
) -> dict[str, float]:
    torch.set_num_threads(1)
    task = load_task(config)
    targets = sorted({float(t) for t in profile.grid.get("avg_bits", [])} | {float(config.avg_bits)})
    if recipe.kind == "scalebits":
        allocation, reordered, seconds = progressive_run(recipe, config, task, targets, seed)
        model = copy.deepcopy(reordered)
        layout = (config.bits, config.tile, config.group_size, config.pad)
        tile_bits = allocation.allocation(config.avg_bits)
        if recipe.quantizer == "gptq":
            calibration = calibration_windows(
                task.train_ids, config.calibration_sequences, config.sequence_length, seed
            )
            gptq_start = time.perf_counter()
            report = quantize_gptq_allocation(model, calibration, tile_bits, *layout)
            seconds += time.perf_counter() - gptq_start
        else:
            report = packed_report(apply_allocation(model, tile_bits, *layout), [], allocation.trace)
        rounds = allocation.trace.rounds
    else:
        model, report, seconds = quantize_baseline(recipe, config, task, seed)
        rounds = 0
    predicted, fp = reference_predictions(task, config)
    metrics = evaluate(model, predicted, task.heldout_ids, config)
    return {
        **metrics,
        "retrieval": retrieval(model, task, config),
        "fp_perplexity": fp,
        "bits_per_weight": report.bytes_per_weight_bits,
        "ledger_bits_per_weight": report.bits_per_weight,
        "packed_kib": report.nbytes / 1024,
        "allocation_seconds": seconds,
        "rounds": float(rounds),
        "zoo_model": float(task.source == "zoo"),
    }


GRID = {"avg_bits": [2.4, 2.6, 2.8, 3.0, 3.3, 3.6]}
BASELINES = (
    "uniform_rtn",
    "uniform_gptq",
    "uniform_hqq",
    "hawq_layerwise",
    "slim_llm_rtn",
    "sfmp",
    "static_sensitivity",
    "random_allocation",
)

EXPERIMENT = Experiment(
    slug="scalebits",
    config_cls=ScaleBitsExperimentConfig,
    claims=(
        Claim(
            "ScaleBITS lowers held-out perplexity versus uniform RTN / GPTQ / HQQ, HAWQ layer-wise, "
            "SliM-LLM-style (RTN), SFMP-style, static-sensitivity and random allocation at every budget",
            "perplexity",
            "scalebits",
            BASELINES,
        ),
        Claim(
            "ScaleBITS beats the sensitivity-aware allocations at the same (RTN) rounding: HAWQ layer-wise, "
            "SliM-LLM-style group-wise salience, SFMP-style static blocks",
            "perplexity",
            "scalebits",
            ("hawq_layerwise", "slim_llm_rtn", "sfmp"),
        ),
        Claim(
            "ScaleBITS allocation plus GPTQ rounding beats SliM-LLM-style allocation plus GPTQ rounding",
            "perplexity",
            "scalebits_gptq",
            ("slim_llm",),
        ),
        Claim(
            "dynamic sensitivity beats static sensitivity (ablation)",
            "perplexity",
            "scalebits",
            ("static_sensitivity",),
        ),
        Claim(
            "ScaleBITS allocation plus GPTQ rounding beats uniform GPTQ at the same budget",
            "perplexity",
            "scalebits_gptq",
            ("uniform_gptq",),
        ),
        Claim(
            "folded channel reordering helps (ablation without reordering)",
            "perplexity",
            "scalebits",
            ("scalebits_no_reorder",),
        ),
        Claim(
            "runtime-gather reordering of the non-foldable channels (indices counted) helps beyond the folds",
            "perplexity",
            "scalebits_gather",
            ("scalebits",),
        ),
    ),
    metrics=(
        Metric("perplexity", "min", "", "held-out perplexity of the quantized model"),
        Metric("agreement", "max", "fraction", "next-token top-1 agreement with the full-precision model"),
        Metric(
            "retrieval",
            "max",
            "fraction",
            "zoo MQAR probe exact match (chance 1/90; the zoo models are at chance, a wiring check)",
        ),
        Metric("fp_perplexity", "min", "", "held-out perplexity of the full-precision model (reference)"),
        Metric("bits_per_weight", "min", "bits", "8 x packed bytes / weights of the quantized linears"),
        Metric("ledger_bits_per_weight", "min", "bits", "ledger bits (no byte padding) / weights"),
        Metric("packed_kib", "min", "KiB", "packed bytes of the quantized linear layers"),
        Metric(
            "allocation_seconds",
            "min",
            "s",
            "reordering + the progressive run for every budget (+ GPTQ rounding; HAWQ: traces + knapsack; "
            "SliM-LLM: Hessians + search (+ GPTQ); SFMP: Fisher + reordering + threshold)",
        ),
        Metric("rounds", "min", "", "sensitivity refreshes of the progressive run"),
        Metric("zoo_model", "max", "", "1 when the zoo model was used, 0 for the in-process fallback"),
    ),
    systems={name: (lambda config, recipe=recipe: recipe) for name, recipe in RECIPES.items()},
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=60,
            seeds=1,
            overrides={
                "fallback_steps": 30,
                "fallback_hidden": 64,
                "sequence_length": 64,
                "calibration_sequences": 8,
                "micro_batch": 8,
                "eval_tokens": 1024,
                "fraction": 0.3,
                "hutchinson_samples": 4,
                "retrieval_samples": 1,
            },
            grid={"avg_bits": [2.75]},
        ),
        # measured: 4315 s of cell compute for 13 systems x 6 budgets x 3 seeds in one process (load 3-4);
        # the default --jobs 2 runs two cells at once
        "default": Profile("default", budget_s=2400, seeds=3, grid=GRID),
        "full": Profile(
            "full",
            budget_s=3600,
            seeds=3,
            overrides={"calibration_sequences": 128, "fallback_steps": 1500},
            grid=GRID,
        ),
    },
    run=run,
    ours="scalebits",
    pareto_x="bits_per_weight",
)
