"""Cross-check ScaleBITS' own GPTQ (``gptq.py``) against llm-compressor's GPTQ at uniform bits.

Same model (the zoo's tiny-llama), same calibration windows (``experiment.calibration_windows``, the
experiment's seed rule ``1000 + seed``), same held-out windows and metrics (``experiment.evaluate``:
perplexity and next-token top-1 agreement with the full-precision model). Every system quantizes every
``nn.Linear`` except ``lm_head``, asymmetric integer codes, groups of 64 input channels, at 4, 3 and 2 bits:

* ``rtn``: ``UniformRTNConfig`` (the floor);
* ``ours``: ``GPTQConfig`` (damp 0.01, lazy blocks of 128 columns, sequential stages q/k/v, o, gate/up,
  down whose Hessians see the earlier stages quantized; each group's scale and zero fitted on the
  error-updated weights at the group's first column);
* ``ours_static``: ``GPTQConfig(static_groups=True)``: the same, with every group fitted once on the
  original weights before the loop, as llm-compressor does;
* ``ours_actorder``: ``GPTQConfig(static_groups=True, act_order=True)``: static groups with the columns
  quantized by descending ``H_jj`` (the reference code's ``--act-order --static-groups``);
* ``llmc``: llm-compressor's ``GPTQModifier`` through ``oneshot`` with the settings matched to ours where
  the library exposes them: no activation ordering, block 128, dampening 0.01, min/max observer, float16
  scales, ``sequential_targets=["Linear"]`` (one calibration stage per linear layer: the same
  staging as ours);
* ``llmc_actorder``: ``llmc`` with the library's default static activation ordering (columns quantized
  in decreasing ``H_jj``; compare with ``ours_actorder``);
* ``llmc_default``: the same scheme with the library's own defaults for the rest (static activation
  ordering, one calibration stage per decoder layer).

llm-compressor needs transformers >= 5.14, the project pins transformers < 5.3 (kvpress), so this runs in
a side virtual environment that keeps the project's CPU torch::

    python3.11 -m venv /tmp/llmc-venv
    /tmp/llmc-venv/bin/pip install torch==2.13.0          # the CPU wheel; never an unpinned torch
    /tmp/llmc-venv/bin/pip install llmcompressor==0.14.0.1  # compressed-tensors 0.19, transformers 5.17
    /tmp/llmc-venv/bin/pip install -e . --no-deps
    /tmp/llmc-venv/bin/pip install numpy scipy matplotlib tqdm psutil pyyaml safetensors tokenizers
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 /tmp/llmc-venv/bin/python \
        benchmarks/scalebits/scalebits_gptq_crosscheck.py \\
        --seeds 0 1 2 --json /tmp/gptq_crosscheck.json             # ~9 min on 2 busy cores
    OMP_NUM_THREADS=1 /tmp/llmc-venv/bin/python benchmarks/scalebits/scalebits_gptq_crosscheck.py \
        --diagnose 3 0

(run from the repository root). ``--diagnose BITS SEED`` prints, per layer, the fraction of weights on
which ``ours_static`` and ``llmc`` agree, over the sequential model and on a shared full-precision Hessian.

The zoo's down_proj has 688 input channels (10 groups of 64 and one of 48). llm-compressor's ``group``
strategy refuses a column count that 64 does not divide, so its scheme is the equivalent ``block``
strategy with ``block_structure=[1, 64]`` (one row by 64 columns), which allows a partial last block.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from neurips26.methods.scalebits.baselines import GPTQConfig, UniformRTNConfig
from neurips26.methods.scalebits.config import ScaleBitsExperimentConfig, default_filter
from neurips26.methods.scalebits.experiment import (
    LanguageTask,
    calibration_windows,
    evaluate,
    load_task,
    reference_predictions,
)
from neurips26.methods.scalebits.integration import quantize_and_report, select_linears
from neurips26.report.tables import markdown_table

SYSTEMS = ("rtn", "ours", "ours_static", "ours_actorder", "llmc", "llmc_actorder", "llmc_default")
# llm-compressor variants: (one calibration stage per linear layer, activation ordering)
LLMC_VARIANTS = {"llmc": (True, None), "llmc_actorder": (True, "static"), "llmc_default": (False, "static")}
SIDE_VENV_HINT = (
    "llm-compressor is not importable. It cannot live in the project venv (it needs transformers >= 5.14; "
    "the project pins < 5.3), so create a side venv:\n"
    "  python3.11 -m venv /tmp/llmc-venv\n"
    "  /tmp/llmc-venv/bin/pip install torch==2.13.0\n"
    "  /tmp/llmc-venv/bin/pip install llmcompressor==0.14.0.1\n"
    "  /tmp/llmc-venv/bin/pip install -e . --no-deps\n"
    "  /tmp/llmc-venv/bin/pip install numpy scipy matplotlib tqdm psutil pyyaml safetensors tokenizers\n"
    "and run this script with /tmp/llmc-venv/bin/python."
)


@dataclass
class Row:
    """One (system, bits, seed) measurement."""

    system: str
    bits: int
    seed: int
    perplexity: float
    agreement: float
    seconds: float
    max_distinct_per_group: int
    quantized_layers: int
    same_as_llmc: float = float("nan")  # fraction of effective weights equal to llm-compressor's (matched)


def require_llmcompressor() -> None:
    """Import llm-compressor or exit with the commands that build the side venv."""
    try:
        import compressed_tensors  # noqa: F401
        import llmcompressor  # noqa: F401
    except ImportError as error:
        raise SystemExit(SIDE_VENV_HINT) from error


def load_zoo_task(config: ScaleBitsExperimentConfig) -> LanguageTask:
    """The experiment's task (the zoo model; a checkpoint that does not load is an error)."""
    task = load_task(config)
    return task


def group_distinct_counts(weight: torch.Tensor, group_size: int) -> int:
    """The largest number of distinct values in any row's group of ``group_size`` input channels."""
    most = 0
    for start in range(0, weight.shape[1], group_size):
        block = weight[:, start : start + group_size].sort(dim=1).values
        distinct = 1 + (block.diff(dim=1) != 0).sum(dim=1)
        most = max(most, int(distinct.max()))
    return most


def effective_weights(model: nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
    """The weight each quantized layer really multiplies by: ``dequantize()`` for ScaleBITS' packed layers,
    the stored (fake-quantized) ``weight`` for llm-compressor's layers."""
    weights = {}
    for name in names:
        layer = model.get_submodule(name)
        weights[name] = layer.dequantize() if hasattr(layer, "dequantize") else layer.weight.detach().float()
    return weights


def quantize_ours(
    model: nn.Module, system: str, bits: int, calibration: torch.Tensor, config: ScaleBitsExperimentConfig
) -> None:
    """ScaleBITS' RTN or GPTQ in the packed format, with the experiment's layout (pad: down_proj is 688)."""
    layout = {"tile": config.method.tile, "group_size": config.method.group_size, "pad": config.method.pad}
    if system == "rtn":
        quantize_and_report(model, UniformRTNConfig(bits=bits, **layout))
        return
    gptq = GPTQConfig(
        bits=bits,
        micro_batch=config.method.micro_batch,
        static_groups=system in ("ours_static", "ours_actorder"),
        act_order=system == "ours_actorder",
        **layout,
    )
    quantize_and_report(model, gptq, calibration=calibration)


def llmc_modifier(bits: int, group_size: int, actorder: str | None) -> Any:
    """llm-compressor's ``GPTQModifier``: asymmetric int, one row by ``group_size`` columns per scale.

    ``actorder``: None (matches ``ours`` / ``ours_static``) or the library's default ``"static"``
    (matches ``ours_actorder``).
    """
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor.modifiers.quantization import GPTQModifier

    weights = QuantizationArgs(
        num_bits=bits,
        type="int",
        symmetric=False,
        strategy="block",
        block_structure=[1, group_size],  # == group strategy, but allows the partial last group (688)
        observer="memoryless_minmax",
        scale_dtype=torch.float16,  # ours stores float16 scales
        actorder=None,
    )
    scheme = QuantizationScheme(targets=["Linear"], weights=weights)
    return GPTQModifier(
        config_groups={"group_0": scheme},
        ignore=["lm_head"],
        block_size=128,
        dampening_frac=0.01,
        actorder=actorder,
    )


def quantize_llmc(
    model: nn.Module, bits: int, calibration: torch.Tensor, config: ScaleBitsExperimentConfig, system: str
) -> None:
    """llm-compressor's ``oneshot`` on exactly our calibration windows (all of them, in order)."""
    from llmcompressor import oneshot
    from torch.utils.data import DataLoader

    per_linear, actorder = LLMC_VARIANTS[system]
    loader = DataLoader([{"input_ids": row} for row in calibration], batch_size=config.method.micro_batch)
    oneshot(
        model=model,
        dataset=loader,
        recipe=llmc_modifier(bits, config.method.group_size, actorder),
        pipeline="sequential",
        sequential_targets=["Linear"] if per_linear else None,  # None: the decoder layers
        num_calibration_samples=len(calibration),
        shuffle_calibration_samples=False,
    )


def same_fraction(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> float:
    """Fraction of all quantized weights on which two systems agree (to float32 rounding of the scale)."""
    same = total = 0
    for name, weight in ours.items():
        tolerance = 1e-5 * float(weight.abs().max())
        same += int(((weight - theirs[name]).abs() <= tolerance).sum())
        total += weight.numel()
    return same / total


def measure(
    system: str, bits: int, seed: int, task: LanguageTask, config: ScaleBitsExperimentConfig
) -> tuple[Row, dict[str, torch.Tensor]]:
    """Quantize a fresh copy of the model with ``system``, evaluate it on the held-out windows; the row and
    the effective weights."""
    calibration = calibration_windows(
        task.train_ids, config.calibration_sequences, config.sequence_length, seed
    )
    model = copy.deepcopy(task.model)
    names = list(select_linears(model, default_filter))
    start = time.perf_counter()
    if system not in LLMC_VARIANTS:
        quantize_ours(model, system, bits, calibration, config)
    else:
        quantize_llmc(model, bits, calibration, config, system)
    seconds = time.perf_counter() - start
    weights = effective_weights(model, names)
    distinct = max(group_distinct_counts(w, config.method.group_size) for w in weights.values())
    if distinct > 2**bits:
        raise AssertionError(f"{system} at {bits} bits: a group holds {distinct} > 2^{bits} distinct values")
    predicted, _ = reference_predictions(task, config)
    metrics = evaluate(model, predicted, task.heldout_ids, config)
    row = Row(system, bits, seed, metrics["perplexity"], metrics["agreement"], seconds, distinct, len(names))
    return row, weights


def per_layer_equality(task: LanguageTask, config: ScaleBitsExperimentConfig, bits: int, seed: int) -> None:
    """Print, per layer, the fraction of ``ours_static``'s effective weights equal to ``llmc``'s."""
    _, ours = measure("ours_static", bits, seed, task, config)
    _, theirs = measure("llmc", bits, seed, task, config)
    for name in ours:
        print(f"  {name}: {same_fraction({name: ours[name]}, {name: theirs[name]}):.4f}")


def same_hessian_equality(
    task: LanguageTask, config: ScaleBitsExperimentConfig, bits: int, seed: int, names: list[str]
) -> None:
    """Print, for ``names``, the fraction of equal weights when ours (``static_groups=True``) and the
    library's ``quantize_weight`` get the same full-precision Hessian (no sequential stages)."""
    from compressed_tensors.quantization.utils import calculate_qparams
    from llmcompressor.modifiers.gptq.gptq_quantize import quantize_weight

    from neurips26.methods.scalebits.gptq import accumulate_hessians, dequantize_partial_groups, gptq_quantize

    calibration = calibration_windows(
        task.train_ids, config.calibration_sequences, config.sequence_length, seed
    )
    layers = {name: task.model.get_submodule(name) for name in names}
    hessians, _ = accumulate_hessians(task.model, layers, calibration, config.method.micro_batch)
    args = llmc_modifier(bits, config.method.group_size, None).config_groups["group_0"].weights
    group = config.method.group_size
    for name, layer in layers.items():
        weight = layer.weight.detach().float()
        rows, cols = weight.shape
        n_groups = -(-cols // group)
        padded = nn.functional.pad(weight, (0, n_groups * group - cols)).reshape(rows, n_groups, group)
        scale, zero = calculate_qparams(padded.amin(-1), padded.amax(-1), args)
        hessian = hessians[name]
        theirs = quantize_weight(
            weight[None].clone(), hessian[None].clone(), scale[None], zero[None], None, args
        )
        bit_map = torch.full((rows, n_groups), bits)
        ours = gptq_quantize(weight, hessian, bit_map, group, 128, 0.01, static_groups=True)
        fraction = same_fraction({name: dequantize_partial_groups(*ours, group)}, {name: theirs[0][0]})
        print(f"  {name} (same Hessian): {fraction:.4f}")


def results_tables(rows: list[Row], fp_perplexity: float, systems: tuple[str, ...] = SYSTEMS) -> str:
    """bits | seed | perplexity, agreement and seconds of every system, one line per (bits, seed)."""
    by_key = {(r.bits, r.seed, r.system): r for r in rows}
    keys = sorted({(r.bits, r.seed) for r in rows}, key=lambda k: (-k[0], k[1]))
    header = ["bits", "seed"]
    header += [f"{s} ppl" for s in systems] + [f"{s} agree" for s in systems] + [f"{s} s" for s in systems]
    measured = []
    for bits, seed in keys:
        cells = [by_key[(bits, seed, s)] for s in systems]
        measured.append(
            [bits, seed]
            + [f"{c.perplexity:.3f}" for c in cells]
            + [f"{c.agreement:.3f}" for c in cells]
            + [f"{c.seconds:.1f}" for c in cells]
        )
    others = [s for s in systems if s != "llmc"]
    equal = [
        [bits, seed, *(f"{by_key[(bits, seed, s)].same_as_llmc:.4f}" for s in others)] for bits, seed in keys
    ]
    return "\n".join(
        [
            f"FP perplexity: {fp_perplexity:.3f}",
            "",
            markdown_table(header, measured),
            "",
            "Fraction of quantized weights equal to llm-compressor's (matched settings):",
            "",
            markdown_table(["bits", "seed", *others], equal),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, nargs="+", default=[4, 3, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--calibration-sequences", type=int, default=None, help="default: the experiment's")
    parser.add_argument("--json", default=None, help="also write every row here")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument(
        "--diagnose",
        type=int,
        nargs=2,
        metavar=("BITS", "SEED"),
        help="only print per-layer weight equality of ours_static and llmc, sequential and same-Hessian",
    )
    args = parser.parse_args()
    require_llmcompressor()
    torch.set_num_threads(1)
    overrides = {}
    if args.calibration_sequences is not None:
        overrides["calibration_sequences"] = args.calibration_sequences
    config = ScaleBitsExperimentConfig(**overrides)
    task = load_zoo_task(config)
    if args.diagnose:
        bits, seed = args.diagnose
        print(f"ours_static vs llmc, {bits} bits, seed {seed}, sequential stages:")
        per_layer_equality(task, config, bits, seed)
        probes = [
            "model.layers.0.mlp.down_proj",
            "model.layers.0.mlp.gate_proj",
            "model.layers.2.self_attn.q_proj",
        ]
        same_hessian_equality(task, config, bits, seed, probes)
        return
    _, fp_perplexity = reference_predictions(task, config)
    rows = []
    for seed in args.seeds:
        for bits in args.bits:
            measured = {system: measure(system, bits, seed, task, config) for system in args.systems}
            for row, weights in measured.values():
                if "llmc" in measured:
                    row.same_as_llmc = same_fraction(weights, measured["llmc"][1])
                rows.append(row)
                print(row, flush=True)
    print(results_tables(rows, fp_perplexity, tuple(args.systems)))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"fp_perplexity": fp_perplexity, "rows": [asdict(r) for r in rows]}, handle, indent=1)


if __name__ == "__main__":
    main()
