"""How each system of the ScaleBITS experiment quantizes a model: its recipe (which allocation, which
rounding), the method config it runs with, and one function per baseline family that returns the quantized
model, its report and the seconds it took. The experiment (``experiment.py``) decides which systems run
where and what is measured; nothing here scores a model."""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass

import torch

from neurips26.bench.experiment import NotApplicable
from neurips26.methods.scalebits.baselines import (
    GPTQConfig,
    HAWQConfig,
    HQQConfig,
    UniformRTNConfig,
    apply_layer_bits,
    hawq_allocation,
    quantize_random,
    uniform_ledger_bits,
)
from neurips26.methods.scalebits.config import ScaleBitsConfig, ScaleBitsExperimentConfig
from neurips26.methods.scalebits.integration import (
    ModelAllocation,
    QuantizationReport,
    quantize_and_report,
    reorder_and_allocate,
    select_linears,
)
from neurips26.methods.scalebits.real import RealTextTask
from neurips26.methods.scalebits.sfmp import SFMPConfig
from neurips26.methods.scalebits.slim import SliMLLMConfig
from neurips26.methods.scalebits.task import LanguageTask


@dataclass(frozen=True)
class Recipe:
    """One system: how its allocation is chosen."""

    name: str
    kind: str  # "scalebits", "rtn", "gptq", "hqq", "hawq", "slim", "sfmp", "random", "full"
    switches: tuple[tuple[str, str], ...] = ()  # ScaleBitsConfig fields that differ from the config's
    quantizer: str = "rtn"  # how a ScaleBITS / SliM-LLM allocation is rounded: "rtn" or "gptq"


@dataclass(frozen=True)
class System:
    """A built system: its recipe and the method config it runs with (layout, bits, budget, switches)."""

    recipe: Recipe
    method: ScaleBitsConfig

    @classmethod
    def build(cls, recipe: Recipe, config: ScaleBitsExperimentConfig) -> System:
        return cls(recipe, dataclasses.replace(config.method, **dict(recipe.switches)))


RECIPES = {
    "scalebits": Recipe("scalebits", "scalebits"),
    "static_sensitivity": Recipe("static_sensitivity", "scalebits", (("sensitivity", "static"),)),
    "scalebits_no_reorder": Recipe("scalebits_no_reorder", "scalebits", (("reorder", "none"),)),
    "scalebits_gather": Recipe("scalebits_gather", "scalebits", (("reorder", "gather"),)),
    "random_allocation": Recipe("random_allocation", "random"),
    # the unquantized model: the known-good end of every claim's positive contrast (issue #48)
    "full_precision": Recipe("full_precision", "full"),
    "uniform_rtn": Recipe("uniform_rtn", "rtn"),
    "uniform_gptq": Recipe("uniform_gptq", "gptq"),
    "uniform_hqq": Recipe("uniform_hqq", "hqq"),
    "hawq_layerwise": Recipe("hawq_layerwise", "hawq"),
    "slim_llm": Recipe("slim_llm", "slim", quantizer="gptq"),
    "slim_llm_rtn": Recipe("slim_llm_rtn", "slim"),
    "sfmp": Recipe("sfmp", "sfmp"),
    "scalebits_gptq": Recipe("scalebits_gptq", "scalebits", quantizer="gptq"),
}


def search_seed(config: ScaleBitsExperimentConfig, seed: int) -> int:
    """The seed a system's model is built with: the cell's, or the fixed ``calibration_seed`` (then every
    seed's cell scores the same quantized model, on its own held-out context set)."""
    return seed if config.calibration_seed is None else config.calibration_seed


def calibration_for(
    task: LanguageTask | RealTextTask, config: ScaleBitsExperimentConfig, seed: int
) -> torch.Tensor:
    """The calibration windows of a cell (drawn by :func:`search_seed`)."""
    return task.calibration(config.calibration_sequences, config.sequence_length, search_seed(config, seed))


def model_copy(model: torch.nn.Module, config: ScaleBitsExperimentConfig) -> torch.nn.Module:
    """A copy of ``model`` whose quantized linears are its own; every other parameter is shared.

    No system changes a parameter outside the selected linears (the folds permute linears only), so the
    embedding -- 168M of Gemma 3's 268M parameters -- is held once, not once per system.
    """
    quantized = {id(layer.weight) for layer in select_linears(model, config.method.filter_fn).values()}
    memo = {id(p): p for p in model.parameters() if id(p) not in quantized}
    return copy.deepcopy(model, memo)


def gptq_rounding(config: ScaleBitsExperimentConfig, bits: int) -> GPTQConfig:
    """The GPTQ settings every GPTQ-rounded row shares (activation ordering per ``gptq_act_order``)."""
    method = config.method
    return GPTQConfig(
        bits=bits,
        tile=method.tile,
        group_size=method.group_size,
        pad=method.pad,
        static_groups=config.gptq_act_order,
        act_order=config.gptq_act_order,
        micro_batch=method.micro_batch,
    )


def progressive_run(
    system: System, config: ScaleBitsExperimentConfig, task: LanguageTask, targets: list[float], seed: int
) -> tuple[ModelAllocation, torch.nn.Module, float]:
    """Reorder (folded) and allocate once for every target (the seed's setup shares it across budgets)."""
    start = time.perf_counter()
    calibration = calibration_for(task, config, seed)
    model = model_copy(task.model, config)
    allocation, _ = reorder_and_allocate(
        model, calibration, targets, dataclasses.replace(system.method, avg_bits=max(targets))
    )
    return allocation, model, time.perf_counter() - start


def uniform_bits_within(
    method: ScaleBitsConfig, linears: dict, target: float, float_zeros: bool = False
) -> int | None:
    """The largest uniform bit-width whose ledger (metadata included) fits ``target`` bits per weight."""
    n_weights = sum(layer.weight.numel() for layer in linears.values())
    fitting = [
        bits
        for bits in method.bits
        if sum(
            uniform_ledger_bits(tuple(layer.weight.shape), method.tile, method.group_size, bits, float_zeros)
            for layer in linears.values()
        )
        <= math.floor(target * n_weights + 1e-6)
    ]
    return max(fitting) if fitting else None


def uniform_width(method: ScaleBitsConfig, linears: dict, float_zeros: bool = False) -> int:
    bits = uniform_bits_within(method, linears, method.avg_bits, float_zeros)
    if bits is None:
        raise NotApplicable(f"no uniform bit-width in {method.bits} fits {method.avg_bits} bits/weight")
    return bits


def hawq_traces(
    config: ScaleBitsExperimentConfig, task: LanguageTask, calibration: torch.Tensor, seed: int
) -> tuple[dict[str, float], float]:
    """Hutchinson traces of the full-precision model and their seconds (the seed's setup shares them across
    budgets)."""
    start = time.perf_counter()
    model = model_copy(task.model, config)
    _, traces = hawq_allocation(model, calibration, _hawq_config(config, search_seed(config, seed)), [])
    return traces, time.perf_counter() - start


def _hawq_config(config: ScaleBitsExperimentConfig, seed: int) -> HAWQConfig:
    return HAWQConfig(
        avg_bits=config.method.avg_bits,
        bits=config.method.bits,
        tile=config.method.tile,
        group_size=config.method.group_size,
        pad=config.method.pad,
        hutchinson_samples=config.hutchinson_samples,
        micro_batch=config.method.micro_batch,
        seed=seed,
    )


def quantize_baseline(
    system: System,
    config: ScaleBitsExperimentConfig,
    task: LanguageTask,
    seed: int,
    traces: tuple[dict[str, float], float] | None = None,
) -> tuple[torch.nn.Module, object, float]:
    """One uniform / layer-wise / random baseline at ``method.avg_bits``: the model, report and seconds.

    ``traces``: HAWQ's Hutchinson traces of this seed and their seconds (computed here when not given)."""
    recipe, method = system.recipe, system.method
    start = time.perf_counter()
    calibration = calibration_for(task, config, seed)
    model = model_copy(task.model, config)
    linears = select_linears(model, method.filter_fn)
    layout = {"tile": method.tile, "group_size": method.group_size, "pad": method.pad}
    extra = 0.0
    if recipe.kind == "full":
        report = full_precision_report(linears)
    elif recipe.kind == "rtn":
        report = quantize_and_report(model, UniformRTNConfig(bits=uniform_width(method, linears), **layout))
    elif recipe.kind == "gptq":
        gptq = gptq_rounding(config, uniform_width(method, linears))
        report = quantize_and_report(model, gptq, calibration=calibration)
    elif recipe.kind == "hqq":
        report = quantize_and_report(
            model, HQQConfig(bits=uniform_width(method, linears, float_zeros=True), **layout)
        )
    elif recipe.kind == "slim":
        slim = SliMLLMConfig(
            avg_bits=method.avg_bits,
            bits=method.bits,
            quantizer=recipe.quantizer,
            act_order=config.gptq_act_order,
            micro_batch=method.micro_batch,
            **layout,
        )
        report = quantize_and_report(model, slim, calibration=calibration)
    elif recipe.kind == "sfmp":
        sfmp = SFMPConfig(
            avg_bits=method.avg_bits, bits=method.bits, micro_batch=method.micro_batch, **layout
        )
        report = quantize_and_report(model, sfmp, calibration=calibration)
    elif recipe.kind == "hawq":
        traces, extra = traces or hawq_traces(config, task, calibration, seed)
        allocations, _ = hawq_allocation(
            model, calibration, _hawq_config(config, search_seed(config, seed)), [method.avg_bits], traces
        )
        report = apply_layer_bits(
            model, allocations[method.avg_bits], method.tile, method.group_size, method.pad
        )
    else:
        report = quantize_random(
            model,
            method.avg_bits,
            method.bits,
            method.tile,
            method.group_size,
            search_seed(config, seed),
            method.pad,
        )
    return model, report, time.perf_counter() - start + extra


def full_precision_report(linears: dict[str, torch.nn.Module]) -> QuantizationReport:
    """The ledger of linears left as they are: every weight at its stored width, no tiles, no metadata."""
    n_weights = sum(layer.weight.numel() for layer in linears.values())
    nbytes = sum(layer.weight.numel() * layer.weight.element_size() for layer in linears.values())
    return QuantizationReport({}, n_weights, 8 * nbytes, nbytes, [], None)
