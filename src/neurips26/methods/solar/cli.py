"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the ``neurips26 solar`` subcommands.

``neurips26 solar analyze path/to/file.py:Model --hw H200`` (KernelBench form: the file defines ``Model``,
``get_inputs()`` and optionally ``get_init_inputs()``; ``suite:NAME`` picks an authored program),
``neurips26 solar calibrate`` (measure ``cpu-local``) and ``neurips26 solar hardware`` (list specs).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

from neurips26.methods.solar.hardware import (
    DEFAULT_SPACING_S,
    DEFAULT_TRIALS,
    PEAK_FACTOR,
    HardwareSpec,
    calibrate,
    known_hardware,
    load_hardware,
    save_hardware,
    user_hardware_dir,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``analyze``, ``calibrate`` and ``hardware`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="solar_command", required=True)
    analyze = sub.add_parser("analyze", help="speed-of-light bounds of a program")
    analyze.add_argument("target", help="path/to/file.py:Model (KernelBench form) or suite:NAME")
    analyze.add_argument("--hw", default="H100-SXM", help="hardware spec name or YAML path")
    analyze.add_argument("--json", dest="json_path", default=None, help="write the full report as JSON here")
    analyze.add_argument(
        "--yaml", dest="yaml_path", default=None, help="write the SOLAR-style einsum graph here"
    )
    analyze.add_argument("--no-validate", action="store_true", help="skip the validation gate")
    analyze.add_argument("--trace-device", default="meta", choices=("meta", "cpu"))
    analyze.add_argument(
        "--frontend",
        default="default",
        choices=("default", "auto", "export", "dispatch", "jax"),
        help="default: the dispatch tracer (JAX for JAX programs), the fast path; auto: torch.export with "
        "the dispatch tracer as the fallback",
    )
    calibrate = sub.add_parser("calibrate", help="measure this machine's peaks into cpu-local.yaml")
    calibrate.add_argument("--out", default=None, help="YAML path (default: the user hardware directory)")
    calibrate.add_argument(
        "--factor",
        "--headroom",
        dest="factor",
        type=float,
        default=PEAK_FACTOR,
        help=f"factor above the best measured rate (default {PEAK_FACTOR}, a documented constant)",
    )
    calibrate.add_argument(
        "--trials", type=int, default=DEFAULT_TRIALS, help="short trials spread over time; the best is kept"
    )
    calibrate.add_argument("--spacing", type=float, default=DEFAULT_SPACING_S, help="seconds between trials")
    calibrate.add_argument(
        "--quiet-load", type=float, default=None, help="wait for the 1-min load average to fall to this"
    )
    calibrate.add_argument("--max-wait", type=float, default=60.0, help="seconds to wait per trial")
    calibrate.add_argument(
        "--load-limit",
        type=float,
        default=None,
        help="a calibration above this 1-min load average is LOADED (default: the number of CPUs)",
    )
    calibrate.add_argument(
        "--allow-load",
        action="store_true",
        help="write the spec even when the machine was loaded (default: refuse; its peaks would be too low)",
    )
    sub.add_parser("hardware", help="list known hardware specs")


def load_target(target: str) -> tuple[Any, list[Any]]:
    """Build ``(program, inputs)`` from ``file.py:Model`` or ``suite:NAME``."""
    if target.startswith("suite:"):
        from neurips26.methods.solar.suite import get_program

        return get_program(target.removeprefix("suite:")).build("cpu")
    if ":" not in target:
        raise ValueError(f"target={target!r} must look like path/to/file.py:Model or suite:NAME")
    path_text, attr = target.rsplit(":", 1)
    path = Path(path_text)
    if not path.is_file():
        raise ValueError(f"target file {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"_solar_target_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, attr):
        raise ValueError(f"{path} defines no {attr!r}")
    if not hasattr(module, "get_inputs"):
        raise ValueError(f"{path} must define get_inputs() (KernelBench form)")
    obj = getattr(module, attr)
    if isinstance(obj, type):
        init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
        obj = obj(*init)
        if hasattr(obj, "eval"):
            obj.eval()
    return obj, list(module.get_inputs())


def describe_calibration(spec: HardwareSpec) -> str:
    """What a calibration used: its trials (rates, load average, CPU share, when), their spread over time,
    the load verdict and the resulting peaks."""
    record = spec.calibration
    lines = [
        f"{len(record['trials'])} trials over {record.get('spread_s', 0.0):.1f} s "
        f"(threads={record.get('threads')}, factor {record.get('factor')}):"
    ]
    for index, trial in enumerate(record["trials"]):
        lines.append(
            f"  trial {index}: t={trial.get('at_s', 0.0):6.1f} s  load {trial['load_average']:5.2f}  "
            f"CPU share {trial.get('cpu_share', float('nan')):4.2f}  fp32 {trial['fp32_flops'] / 1e9:7.1f} "
            f"GFLOP/s  bandwidth {trial['bandwidth_Bps'] / 1e9:6.1f} GB/s"
        )
    spread = record.get("spread", {})
    lines.append(
        f"spread (max - median) / max: fp32 {spread.get('fp32_flops', 0.0):.3f}, bandwidth "
        f"{spread.get('bandwidth_Bps', 0.0):.3f} (noise {spec.noise:.3f})"
    )
    verdict = "LOADED" if record.get("loaded") else "quiet"
    lines.append(f"load: {verdict}: {record.get('load_reason', '')}")
    lines.append(
        f"peaks: fp32 {spec.peak_flops['float32'] / 1e9:.1f} GFLOP/s, bandwidth "
        f"{spec.dram_bandwidth_Bps / 1e9:.1f} GB/s"
    )
    return "\n".join(lines)


def calibrate_command(args: argparse.Namespace) -> int:
    """``neurips26 solar calibrate``: :func:`~neurips26.methods.solar.hardware.calibrate` into a YAML file
    (the spec with its calibration record: timestamp, every trial's rates, load and CPU share, their spread
    over time, factor, noise). A calibration made on a loaded machine is shown and refused (exit 2): its
    peaks would be too low for a floor; ``--allow-load`` writes it anyway, marked loaded."""
    spec = calibrate(
        trials=args.trials,
        factor=args.factor,
        quiet_load=args.quiet_load,
        max_wait_s=args.max_wait if args.quiet_load is not None else 0.0,
        spacing_s=args.spacing,
        load_limit=args.load_limit,
    )
    print(describe_calibration(spec))
    if spec.calibration["loaded"] and not args.allow_load:
        print(
            "solar: not written: the machine was loaded, so these peaks are too low for a speed-of-light "
            "floor; rerun when it is quiet, or wait for a quiet window with --quiet-load N --max-wait S, "
            "or write it anyway with --allow-load (load_hardware re-calibrates a loaded spec)",
            file=sys.stderr,
        )
        return 2
    path = save_hardware(spec, args.out or user_hardware_dir() / "cpu-local.yaml")
    print(f"wrote {path}: {spec.notes}")
    return 0


def main(args: argparse.Namespace) -> int:
    """Run one ``solar`` subcommand; print one line per failure and return an exit code."""
    try:
        if args.solar_command == "hardware":
            for name in known_hardware():
                print(name)
            return 0
        if args.solar_command == "calibrate":
            return calibrate_command(args)
        from neurips26.methods.solar.core import analyze
        from neurips26.methods.solar.export import to_solar_yaml

        hw = load_hardware(args.hw)
        program, inputs = load_target(args.target)
        report = analyze(
            program,
            inputs,
            hw=hw,
            trace_device=args.trace_device,
            validate=not args.no_validate,
            frontend=getattr(args, "frontend", "default"),
        )
        print(report.summary())
        if args.json_path:
            report.to_json(args.json_path)
        if args.yaml_path:
            Path(args.yaml_path).write_text(to_solar_yaml(report))
        return 0
    except (ValueError, TypeError, NotImplementedError) as exc:
        print(f"solar: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="neurips26 solar")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
