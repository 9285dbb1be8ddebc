"""``neurips26 screensearch explore``: explore an app into a persistent, deduplicated state graph.

``neurips26 screensearch explore --app galculator --workers 2 --budget 1000 --db graph.sqlite``
(``--app synthetic`` runs anywhere; the GTK apps ``galculator``, ``mousepad``, ``gnumeric``, ``abiword``,
``pcmanfm`` and the web fixtures ``web_wizard``, ``web_todo``, ``web_settings`` need the Debian packages in
the README).
``--workers N > 1`` runs N explorers as Ray actors with one graph-store actor as the single SQLite
writer; ``--workers 1`` runs the same code in-process.
"""

from __future__ import annotations

import argparse
import sys

POLICY_NAMES = (
    "screensearch",
    "frontier_puct",
    "ambiguity_only",
    "screensearch_noprior",
    "novelty_uct",
    "bfs",
    "dfs",
    "random",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``explore`` and ``export`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="screensearch_command", required=True)
    explore = sub.add_parser("explore", help="explore an app into a state graph (SQLite)")
    explore.add_argument(
        "--app",
        default="synthetic",
        help="synthetic; galculator, mousepad, gnumeric, abiword or pcmanfm (GTK); "
        "web_wizard, web_todo or web_settings (chromium)",
    )
    explore.add_argument("--policy", default="screensearch", help=f"one of {', '.join(POLICY_NAMES)}")
    explore.add_argument("--budget", type=int, default=300, help="actions per worker (replays included)")
    explore.add_argument("--workers", type=int, default=1, help="explorers; > 1 uses Ray actors")
    explore.add_argument("--db", default="graph.sqlite", help="the SQLite state graph (created or resumed)")
    explore.add_argument("--seed", type=int, default=0, help="policy seed (and the synthetic world's)")
    explore.add_argument(
        "--dedup-threshold",
        type=float,
        default=None,
        help="Jaccard for one state (default: 0.85 synthetic, 1.0 real)",
    )
    export = sub.add_parser("export", help="export a state graph to GraphML and/or a JSONL corpus")
    export.add_argument("--db", required=True, help="the SQLite state graph")
    export.add_argument("--graphml", default=None, help="write GraphML here")
    export.add_argument("--jsonl", default=None, help="write the JSONL corpus here")


def main(args: argparse.Namespace) -> int:
    """Run one ``screensearch`` subcommand; print one line per failure and return an exit code."""
    from neurips26.bench.experiment import NotApplicable
    from neurips26.methods.screensearch.backends import BackendUnavailable
    from neurips26.methods.screensearch.experiment import APPS
    from neurips26.methods.screensearch.graph import StateGraph

    try:
        if args.screensearch_command == "export":
            graph = StateGraph(args.db)
            if args.graphml:
                print(f"wrote {graph.export_graphml(args.graphml)}")
            if args.jsonl:
                print(f"wrote {graph.export_jsonl(args.jsonl)}")
            graph.close()
            return 0
        if args.policy not in POLICY_NAMES:
            raise ValueError(f"--policy={args.policy!r} unknown; choose one of {', '.join(POLICY_NAMES)}")
        if args.app not in APPS:
            raise ValueError(f"--app={args.app!r} unknown; choose one of {', '.join(APPS)}")
        if args.budget <= 0:
            raise ValueError(f"--budget must be > 0, got {args.budget}")
        if args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        from neurips26.methods.screensearch.distributed import explore

        summary = explore(
            app=args.app,
            policy=args.policy,
            budget=args.budget,
            workers=args.workers,
            db=args.db,
            seed=args.seed,
            dedup_threshold=args.dedup_threshold,
        )
        print(
            f"{args.app}: {summary['actions']} actions by {args.workers} worker(s), "
            f"{summary['states']} states, {summary['transitions']} transitions, "
            f"{summary['replay_failures']}/{summary['replays']} replay failures, "
            f"{summary['crashes']} crashes -> {args.db}"
        )
        return 0
    except (ValueError, TypeError, BackendUnavailable, NotApplicable) as error:
        print(f"screensearch: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="neurips26 screensearch")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
