"""``neurips26``: list, info, run, report, doctor, plus the tools some methods ship (zoo, solar, ...).

Exit codes: 0 all ran; 1 some method errored (the others still ran and were saved); 2 usage error;
3 a claim failed under ``--strict``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurips26 import __version__
from neurips26.registry import METHODS, SLUGS, TOOLS, MethodSpec, get_spec

EXIT_OK, EXIT_METHOD_ERROR, EXIT_USAGE, EXIT_CLAIM_FAILED = 0, 1, 2, 3
PAPERS_DIR_CANDIDATES = ("../shared/papers", "shared/papers")


class UsageError(Exception):
    """A mistake in what the user typed: one line on stderr, exit code 2."""


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=False)]
    for row in (header, ["-" * w for w in widths], *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())


def cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for spec in METHODS:
        estimate = f"{spec.estimate_s / 60:.1f} min" if spec.estimate_s else "—"
        rows.append([spec.slug, textwrap.shorten(spec.title, 60), spec.family, spec.status_text(), estimate])
    _print_table(["slug", "paper", "family", "status", "default run"], rows)
    return EXIT_OK


def _abstract(slug: str) -> str | None:
    for base in PAPERS_DIR_CANDIDATES:
        path = Path(base) / f"{slug}.md"
        if path.is_file():
            return path.read_text(encoding="utf-8").strip()
    return None


def cmd_info(args: argparse.Namespace) -> int:
    from neurips26.core.config import config_to_dict, field_sources

    spec = _spec_or_usage_error(args.slug)
    print(
        f"{spec.slug}: {spec.title}\nfamily: {spec.family}   API: {spec.api}   status: {spec.status_text()}"
    )
    print(f"claim: {spec.claim}")
    if spec.status == "ready":
        experiment = spec.load_experiment()
        defaults = config_to_dict(experiment.config_cls())
        sources = field_sources(experiment.config_cls)
        print("\nconfig defaults:")
        _print_table(["key", "default", "source"], [[k, repr(v), sources[k]] for k, v in defaults.items()])
        systems = [f"{name}{' (ours)' if name == experiment.ours else ''}" for name in experiment.systems]
        print("\nsystems: " + ", ".join(systems))
        print("\nprofiles:")
        for profile in experiment.profiles.values():
            grid = ", ".join(f"{k}={list(v)}" for k, v in profile.grid.items()) or "no grid"
            print(f"  {profile.name}: {profile.seeds} seed(s), budget {profile.budget_s:.0f} s, {grid}")
    abstract = _abstract(spec.slug)
    if abstract:
        print("\nabstract:\n" + textwrap.fill(abstract, 100))
    return EXIT_OK


def _spec_or_usage_error(slug: str) -> MethodSpec:
    try:
        return get_spec(slug)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None


def _selected_specs(names: Sequence[str]) -> list[MethodSpec]:
    if not names or list(names) == ["all"]:
        return [spec for spec in METHODS if spec.status == "ready"]
    specs = [_spec_or_usage_error(name) for name in names]
    for spec in specs:
        if spec.status != "ready":
            raise UsageError(f"method {spec.slug!r} is {spec.status_text()}")
    return specs


def _parse_overrides(pairs: Sequence[str]) -> dict:
    from neurips26.core.config import parse_override

    try:
        return dict(parse_override(pair) for pair in pairs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_run(args: argparse.Namespace) -> int:
    from neurips26.bench.runner import default_run_dir, run_experiment
    from neurips26.core.device import set_default_device
    from neurips26.report import build_report
    from neurips26.report.tables import SUMMARY_HEADER, VERDICT_MARK, summary_rows

    specs = _selected_specs(args.methods)
    overrides = _parse_overrides(args.set)
    if overrides and len(specs) != 1:
        raise UsageError("--set applies to one method's config: name exactly one method")
    try:
        set_default_device(args.device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    experiments = []
    for spec in specs:  # validate profile and --set for every method before running anything
        experiment = spec.load_experiment()
        try:
            profile = experiment.profile(args.profile)
            experiment.config_for(profile, {}, overrides)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{spec.slug}: {exc}") from None
        experiments.append((spec, experiment))

    out = Path(args.out) if args.out else default_run_dir()
    results, errored, failed_claims = [], False, False
    overall = _methods_bar([experiment.profile(args.profile).budget_s for _, experiment in experiments])
    for spec, experiment in experiments:
        overall.set_description(spec.slug)
        try:
            result = run_experiment(
                experiment,
                spec.experiment,
                out / spec.slug,
                profile=args.profile,
                seeds=args.seeds,
                overrides=overrides,
                force=args.force,
                executor=args.executor,
                jobs=args.jobs,
            )
        except Exception as exc:  # the runner already isolates cells; this is setup failing
            print(f"{spec.slug}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
            errored = True
            continue
        overall.update(experiment.profile(args.profile).budget_s)
        results.append(result)
        info = result["run_info"]
        verdicts = " ".join(VERDICT_MARK[c["reproduced"]] for c in result["claims"])
        print(
            f"{spec.slug}: {info['status']} in {info['wall_s']:.1f}s "
            f"({info['resumed_cells']} cells resumed); claims {verdicts}"
        )
        errored |= info["status"] != "ok"
        failed_claims |= any(c["reproduced"] == "false" for c in result["claims"])
    overall.close()
    if results:
        report = build_report(out)
        print()
        _print_table(SUMMARY_HEADER, summary_rows(results))
        print(f"\nresults: {out}   report: {report}")
    if errored:
        return EXIT_METHOD_ERROR
    return EXIT_CLAIM_FAILED if (args.strict and failed_claims) else EXIT_OK


def _methods_bar(budgets: Sequence[float]) -> Any:
    """One bar over all methods, advancing by each method's profile budget (an ETA in seconds)."""
    from tqdm.auto import tqdm

    from neurips26.bench.progress import progress_enabled

    return tqdm(
        total=sum(budgets),
        unit="s",
        disable=not progress_enabled(),
        dynamic_ncols=True,
        bar_format="{desc} {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s budget [{elapsed}<{remaining}]",
    )


def cmd_report(args: argparse.Namespace) -> int:
    from neurips26.bench.results import ResultsFileError, find_results, read_result
    from neurips26.report import build_report, refresh_method_readme

    try:
        print(build_report(args.run_dir))
        if args.readmes:
            for path in find_results(args.run_dir):
                result = read_result(path)
                slug = result["run_info"]["slug"]
                readme = Path(__file__).parent / "methods" / slug / "README.md"
                command = f"neurips26 run {slug} --profile {result['run_info']['profile']}"
                if readme.is_file() and refresh_method_readme(readme, result, command):
                    print(f"refreshed {readme}")
    except (ResultsFileError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    import torch

    from neurips26.registry import EXTRA_IMPORTS, _importable

    print(f"neurips26 {__version__}; python {sys.version.split()[0]}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CUDA: {torch.cuda.is_available()}")
    for extra, modules in EXTRA_IMPORTS.items():
        missing = [m for m in modules if not _importable(m)]
        print(f"  extra {extra:8s} {'ok' if not missing else 'missing ' + ', '.join(missing)}")
    ready = [spec.slug for spec in METHODS if spec.status == "ready"]
    print(f"runnable methods ({len(ready)}): {', '.join(ready) or 'none'}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neurips26", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"neurips26 {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="all 19 methods and their status").set_defaults(func=cmd_list)
    info = sub.add_parser("info", help="config defaults, systems, profiles and abstract of one method")
    info.add_argument("slug")
    info.set_defaults(func=cmd_info)

    run = sub.add_parser("run", help="run methods against their baselines and check their claims")
    run.add_argument(
        "methods", nargs="*", metavar="SLUG", help=f"'all' (default) or some of: {' '.join(SLUGS)}"
    )
    run.add_argument("--profile", choices=("smoke", "default", "full"), default="default")
    run.add_argument("--seeds", type=int, default=None, help="seeds per cell (default: the profile's)")
    run.add_argument("--out", default=None, help="run folder (default runs/<timestamp>)")
    run.add_argument("--force", action="store_true", help="recompute cells that are already saved")
    run.add_argument("--strict", action="store_true", help="exit 3 when a claim is not reproduced")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    run.add_argument("--executor", choices=("local", "ray"), default="local")
    run.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes of the local executor (default: up to 2)",
    )
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="rebuild REPORT.md and figures from a run folder")
    report.add_argument("run_dir")
    report.add_argument(
        "--readmes",
        action="store_true",
        help="also rewrite each method README's results block (between its markers)",
    )
    report.set_defaults(func=cmd_report)
    sub.add_parser("doctor", help="versions, extras and runnable methods").set_defaults(func=cmd_doctor)

    for name, (module, help_text) in TOOLS.items():
        # The tool's own parser is built only when it is called, so `neurips26 list` never imports torch.
        tool = sub.add_parser(name, help=help_text, add_help=False)
        tool.add_argument("tool_args", nargs=argparse.REMAINDER)
        tool.set_defaults(func=_tool_main(name, module))
    return parser


def _tool_main(name: str, module: str) -> Any:
    def run_tool(args: argparse.Namespace) -> int:
        return run_tool_command(name, args.tool_args)

    return run_tool


def run_tool_command(name: str, argv: Sequence[str]) -> int:
    """Build the tool's own parser (importing it only now) and run it on ``argv``."""
    module = TOOLS[name][0]
    tool = importlib.import_module(module)
    parser = argparse.ArgumentParser(prog=f"neurips26 {name}", description=(tool.__doc__ or "").strip())
    tool.add_arguments(parser)
    return int(tool.main(parser.parse_args(list(argv))))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:  # the tool parses its own options, --help included
        return run_tool_command(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "seeds", None) is not None and args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if getattr(args, "jobs", 1) < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"neurips26: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            "neurips26: interrupted; finished cells are saved, rerun the same command to resume",
            file=sys.stderr,
        )
        return 130
