"""``neurips26 srlmpc train``: the grid search for the best constant and both PPO policies.

The committed weights were made by ``neurips26 srlmpc train`` with its defaults (see ``weights/card.json``).
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` subcommand."""
    sub = parser.add_subparsers(dest="srlmpc_command", required=True)
    train = sub.add_parser("train", help="grid-tune the constant parameters, then train both PPO policies")
    train.add_argument("--srlmpc-steps", type=int, default=8192, help="PPO steps of the MPC-parameter policy")
    train.add_argument("--ppo-steps", type=int, default=24576, help="PPO steps of the pure-PPO baseline")
    train.add_argument("--grid-episodes", type=int, default=4, help="validation episodes per scenario")
    train.add_argument("--seed", type=int, default=0)


def main(args: argparse.Namespace) -> int:
    """Run one ``srlmpc`` subcommand."""
    try:
        from neurips26.methods.srlmpc.training import train_all

        for name in ("srlmpc_steps", "ppo_steps", "grid_episodes"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
        record = train_all(args.srlmpc_steps, args.ppo_steps, args.seed, args.grid_episodes)
        print(json.dumps(record, indent=2))
        return 0
    except (ValueError, TypeError) as exc:
        print(f"srlmpc: {exc}", file=sys.stderr)
        return 1
