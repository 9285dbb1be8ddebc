"""``neurips26 stparopt analyze|translate|train``.

``analyze file.c --function f`` prints one line per loop (verdict, probability, entropy, profiled,
strategies); ``translate file.c --function f --out f.cu`` writes the CUDA (nothing is written when a
loop cannot be mapped); ``train --out weights.pt`` retrains the packaged model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``analyze``, ``translate`` and ``train`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="stparopt_command", required=True)
    for name, text in (("analyze", "per-loop parallelism verdicts"), ("translate", "C function -> CUDA")):
        command = sub.add_parser(name, help=text)
        command.add_argument("file", help="a C source file")
        command.add_argument("--function", default=None, help="the function (default: the first one)")
        command.add_argument("--profile", default="auto", choices=("auto", "always", "never"))
        command.add_argument("--tau", type=float, default=None, help="entropy threshold for profiling")
        command.add_argument("--weights", default=None, help="model weights (default: the packaged ones)")
        command.add_argument("--json", dest="json_path", default=None, help="also write the reports as JSON")
        if name == "translate":
            command.add_argument("--out", default=None, help="write the .cu here (default: stdout)")
            command.add_argument(
                "--check", action="store_true", help="compile with nvcc and run on CPU (shim)"
            )
    train = sub.add_parser("train", help="train the packaged STParOpt model on generated loops")
    train.add_argument("--out", required=True, help="where to write the weights")
    train.add_argument("--programs", type=int, default=1400)
    train.add_argument("--epochs", type=int, default=30)
    train.add_argument("--seed", type=int, default=0)


def _train(args: argparse.Namespace) -> int:
    import torch

    from neurips26.methods.stparopt.dataset import build_loopset
    from neurips26.methods.stparopt.model import STParOptModel, fit_stparopt
    from neurips26.methods.stparopt.pipeline import save_model

    torch.set_num_threads(1)
    data = build_loopset(args.programs, 10_000 + args.seed)
    torch.manual_seed(args.seed)
    model = STParOptModel()
    fit_stparopt(
        model, data.graphs(), data.labels, epochs=args.epochs, lr=3e-3, batch_size=64, seed=args.seed
    )
    save_model(model, args.out)
    print(
        f"wrote {args.out} ({args.programs} programs, {args.epochs} epochs, "
        f"label mismatches {data.label_mismatches})"
    )
    return 0


def _check(source: str, function: str | None, result) -> int:
    from neurips26.methods.stparopt.frontend import parse_function
    from neurips26.methods.stparopt.programs import default_args
    from neurips26.methods.stparopt.verify import VerifyItem, nvcc_available, nvcc_compile, verify_on_cpu

    parsed = parse_function(source, function)
    check = verify_on_cpu([VerifyItem(source, result, default_args(parsed.params), 1000, (1, 2))])[0]
    status = (
        "matches the serial C"
        if check["matches"]
        else f"MISMATCH ({check['bad']} elements; {check['error']})"
    )
    print(f"CPU shim (shuffled threads, default inputs): {status}")
    if nvcc_available():
        print(f"nvcc -c: {'compiles' if nvcc_compile([result.source])[0] else 'FAILS'}")
    else:
        print("nvcc -c: unavailable (nvcc missing)")
    return 0 if check["matches"] else 1


def main(args: argparse.Namespace) -> int:
    """Run one ``stparopt`` subcommand; print one line per failure and return an exit code."""
    try:
        if args.stparopt_command == "train":
            return _train(args)
        from dataclasses import replace

        from neurips26.methods.stparopt.config import STParOptConfig
        from neurips26.methods.stparopt.pipeline import analyze, load_model, translate

        path = Path(args.file)
        if not path.is_file():
            raise ValueError(f"file {path} does not exist")
        source = path.read_text()
        config = STParOptConfig() if args.tau is None else replace(STParOptConfig(), tau=args.tau)
        model = load_model(args.weights)
        reports = analyze(source, args.function, config=config, model=model, profile=args.profile)
        for r in reports:
            verdict = "parallel" if r.parallel else "serial"
            print(
                f"{r.function} loop {r.loop} (line {r.line}): {verdict} p={r.p_parallel:.3f} "
                f"H_s={r.entropy:.3f} "
                f"profiled={'yes' if r.profiled else 'no'} strategies={','.join(r.strategies)}"
                + (f" unsupported: {r.unsupported}" if r.unsupported else "")
            )
            for reason in r.reasons:
                print(f"    - {reason}")
        if args.json_path:
            Path(args.json_path).write_text(json.dumps([r.to_dict() for r in reports], indent=2))
        if args.stparopt_command == "analyze":
            return 0
        result = translate(source, args.function, config=config, reports=reports)
        if not result.ok:
            for problem in result.unsupported:
                print(f"stparopt: unsupported: {problem}", file=sys.stderr)
            return 1
        if args.out:
            Path(args.out).write_text(result.source)
            print(f"wrote {args.out}: kernels {', '.join(result.kernels)}; launcher {result.launcher}(...)")
        else:
            print(result.source)
        if args.check:
            return _check(source, args.function, result)
        return 0
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as exc:
        print(f"stparopt: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="neurips26 stparopt")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
