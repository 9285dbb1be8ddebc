"""``neurips26 styleroute ...``: train the single-image priors the experiment runs on.

``neurips26 styleroute train-prior brick`` trains, saves (``save_pretrained``) and sanity-checks the prior
of one style; ``neurips26 styleroute train-prior all`` does every style; ``neurips26 styleroute priors``
lists the committed priors with their gate results.
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``train-prior`` and ``priors`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="styleroute_command", required=True)
    train = sub.add_parser("train-prior", help="train one style's single-image diffusion prior")
    train.add_argument(
        "style", help="a style name (see `neurips26 styleroute priors`) or 'all' (the bundled styles)"
    )
    train.add_argument("--steps", type=int, default=250, help="optimisation steps (default 250)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", default=None, help="folder for the priors (default: the committed ones)")
    train.add_argument(
        "--painting-root",
        default=None,
        help="folder holding the paintings' JPEGs (default: Debian opencv-doc's examples/data)",
    )
    sub.add_parser("priors", help="list the committed priors and their sanity-gate results")


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from neurips26.methods.styleroute.data import PAINTINGS, STYLES
    from neurips26.methods.styleroute.training import PRIORS_DIR, train_and_save

    if args.styleroute_command == "priors":
        for style in STYLES + PAINTINGS:
            card = PRIORS_DIR / style / "card.json"
            if card.is_file():
                info = json.loads(card.read_text())
                gate = "passed" if info["gate"]["passed"] else "FAILED (prior too weak)"
                print(f"{style:22s} {info['steps']:5d} steps  loss {info['final_loss']:.4f}  gate {gate}")
            else:
                print(f"{style:22s} missing: neurips26 styleroute train-prior {style}")
        return 0
    styles = STYLES if args.style == "all" else (args.style,)
    if args.style != "all" and args.style not in STYLES + PAINTINGS:
        print(f"error: style must be one of {', '.join(STYLES + PAINTINGS)} or 'all', got {args.style!r}")
        return 2
    directory = Path(args.out) if args.out else None
    for style in styles:
        card = train_and_save(
            style, steps=args.steps, seed=args.seed, directory=directory, root=args.painting_root
        )
        gate = "passed" if card["gate"]["passed"] else "FAILED: prior too weak"
        print(
            f"{style}: {card['steps']} steps, loss {card['final_loss']:.4f}, "
            f"{card['seconds']:.0f} s, gate {gate}"
        )
    return 0
