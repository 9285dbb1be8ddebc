"""``neurips26``: list, info, run, report, doctor, data, plus the tools some methods ship (zoo, solar, ...).

Exit codes: 0 all ran; 1 some method errored (the others still ran and were saved), or a ``data fetch``
failed; 2 usage error; 3 a claim failed under ``--strict`` (refuted) or was not reproduced under
``--strict=all``. ``report --compare``: 0 identical non-timing values, 1 some differ.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurips26 import __version__
from neurips26.core.noise import silence_third_party_noise
from neurips26.papers import abstract
from neurips26.registry import METHODS, SLUGS, TOOLS, MethodSpec, get_spec, method_readme

EXIT_OK, EXIT_METHOD_ERROR, EXIT_USAGE, EXIT_CLAIM_FAILED = 0, 1, 2, 3
RESULTS_ROOT = Path("results")  # committed results, relative to the repository root
DOCS_ROOT = Path("docs")  # committed figures of derived analyses: docs/<slug>/<analysis>_<profile>.png


class UsageError(Exception):
    """A mistake in what the user typed: one line on stderr, exit code 2."""


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=False)]
    for row in (header, ["-" * w for w in widths], *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())


def _default_budget(spec: MethodSpec) -> float | None:
    """The ``default`` profile's measured budget (the one run-time estimate); None if not runnable.

    Read from the registry, not the experiment, so listing imports no method (and no torch).
    """
    return spec.default_budget_s if spec.status == "ready" else None


def cmd_list(args: argparse.Namespace) -> int:
    rows, total = [], 0.0
    for spec in METHODS:
        budget = _default_budget(spec)
        total += budget or 0.0
        estimate = f"{budget / 60:.1f} min" if budget else "—"
        rows.append([spec.slug, textwrap.shorten(spec.title, 60), spec.family, spec.status_text(), estimate])
    _print_table(["slug", "paper", "family", "status", "default run"], rows)
    print(
        f"\nall ready methods, default profile: about {total / 60:.0f} min with one worker (the budgets); "
        f"`make run` (two workers) about {total / 120:.0f} min"
    )
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    from neurips26.core.config import config_to_dict, field_sources, flatten_config

    spec = _spec_or_usage_error(args.slug)
    print(
        f"{spec.slug}: {spec.title}\nfamily: {spec.family}   API: {spec.api}   status: {spec.status_text()}"
    )
    print(f"claim: {spec.claim}")
    if spec.status == "ready":
        experiment = spec.load_experiment()
        config = experiment.config_cls()
        defaults = flatten_config(config_to_dict(config))
        sources = field_sources(experiment.config_cls)
        print("\nconfig defaults (--set KEY=VALUE):")
        _print_table(
            ["key", "default", "source"], [[k, repr(v), sources.get(k, "")] for k, v in defaults.items()]
        )
        print("\nsystems (built from the default config; the fields that set each apart):")
        for name, text in _describe_systems(experiment, config).items():
            label = f"{name} (ours)" if name == experiment.ours else name
            print(f"  {label}: {text}")
        print(f"\ndevices: {', '.join(experiment.devices)}")
        print("\nprofiles:")
        for profile in experiment.profiles.values():
            grid = ", ".join(f"{k}={list(v)}" for k, v in profile.grid.items()) or "no grid"
            print(f"  {profile.name}: {profile.seeds} seed(s), budget {profile.budget_s:.0f} s, {grid}")
    print("\nabstract:\n" + textwrap.fill(abstract(spec.slug), 100))
    return EXIT_OK


def _describe_systems(experiment: Any, config: Any) -> dict[str, str]:
    """Each system's record (:mod:`neurips26.bench.system_record`): the fields that differ between the
    experiment's systems, in full (never shortened: two systems that differ only past a cut-off would read
    the same)."""
    from neurips26.bench.system_record import differing_fields, format_fields, system_record

    records: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    for name in experiment.systems:
        try:
            records[name] = system_record(experiment.build_system(name, config))
        except Exception as exc:  # info must still print the rest
            failures[name] = f"<cannot build: {type(exc).__name__}: {exc}>"
    shown = {name: format_fields(fields) for name, fields in differing_fields(records).items()}
    return {name: shown[name] if name in shown else failures[name] for name in experiment.systems}


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


TABLE_CLAIM_WIDTH = 52  # keeps the end-of-run table within 120 columns; REPORT.md has the whole text
HEARTBEAT_S = 30.0


def cmd_run(args: argparse.Namespace) -> int:
    from neurips26.bench.pool import CellPool
    from neurips26.bench.progress import progress_enabled
    from neurips26.bench.runner import default_run_dir, run_experiment
    from neurips26.core.device import set_default_device
    from neurips26.report import build_report
    from neurips26.report.tables import SUMMARY_HEADER, VERDICT_MARK, summary_rows, verdict_legend

    silence_third_party_noise(progress_bars=False)  # before the experiments (and their workers) import them
    specs = _selected_specs(args.methods)
    overrides = _parse_overrides(args.set)
    if overrides and len(specs) != 1:
        raise UsageError("--set applies to one method's config: name exactly one method")
    try:
        device = set_default_device(args.device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    experiments = []
    for spec in specs:  # validate profile and --set for every method before running anything
        experiment = spec.load_experiment()
        try:
            profile = experiment.profile(args.profile)
            experiment.config_for(profile, {}, overrides)
        except (ValueError, TypeError) as exc:
            message = str(exc)
            raise UsageError(
                message if message.startswith(f"{spec.slug}:") else f"{spec.slug}: {message}"
            ) from None
        experiments.append((spec, experiment))

    out = Path(args.out) if args.out else default_run_dir(args.profile)
    command = "neurips26 " + " ".join(args.argv)
    budgets = [experiment.profile(args.profile).budget_s for _, experiment in experiments]
    print(
        f"run folder {out}: {len(experiments)} method(s), budget about {sum(budgets) / 60:.0f} min",
        flush=True,
    )
    results, errored, failed_claims = [], False, False
    overall = _methods_bar(budgets)
    finished_budget = 0.0
    # one worker pool for every method (started only if a method needs workers): a fresh pool per method
    # re-imports torch in each worker and made small runs slower than one process (issue #42)
    pool_jobs = args.jobs if args.jobs != "auto" else (os.cpu_count() or 1)
    pool = CellPool(pool_jobs) if pool_jobs > 1 and args.executor == "local" else None
    for spec, experiment in experiments:
        overall.set_description(spec.slug)
        budget = experiment.profile(args.profile).budget_s

        def advance(done: int, total: int, start: float = finished_budget, budget: float = budget) -> None:
            overall.n = start + budget * done / max(total, 1)  # an ETA from the first finished cell on
            overall.refresh()

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
                pool=pool,
                device=device,
                command=command,
                heartbeat_s=None if progress_enabled() else HEARTBEAT_S,
                on_cell=advance,
            )
        except KeyboardInterrupt:
            overall.close()
            if pool is not None:
                pool.terminate()
            raise
        except Exception as exc:  # the runner already isolates cells; this is setup failing
            print(f"{spec.slug}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
            errored = True
            continue
        finished_budget += budget
        overall.n = finished_budget
        overall.refresh()
        results.append(result)
        info = result["run_info"]
        verdicts = " ".join(VERDICT_MARK[c["reproduced"]] for c in result["claims"])
        print(
            f"{spec.slug}: {info['status']} in {info['wall_s']:.1f}s "
            f"({info['resumed_cells']} cells resumed); claims {verdicts}",
            flush=True,
        )
        if info.get("errors"):  # the reason on the console too, not only in REPORT.md
            errors = info["errors"]
            print(f"{spec.slug}: {len(errors)} cell(s) errored; the first: {errors[0]}", file=sys.stderr)
        if args.publish:
            print(f"{spec.slug}: published {publish_result(result)}")
        errored |= info["status"] != "ok"
        failed_claims |= any(not strict_passes(c["reproduced"], args.strict) for c in result["claims"])
    overall.close()
    if pool is not None:
        pool.close()
    if results:
        report = build_report(out)
        print()
        _print_table(SUMMARY_HEADER, summary_rows(results, claim_width=TABLE_CLAIM_WIDTH))
        print("\n" + verdict_legend(c["reproduced"] for r in results for c in r["claims"]))
        print(f"\nresults: {out}   report: {report}")
    if errored:
        return EXIT_METHOD_ERROR
    return EXIT_CLAIM_FAILED if (args.strict and failed_claims) else EXIT_OK


STRICT_MODES = ("refuted", "all")


def strict_passes(verdict: str, mode: str | None) -> bool:
    """Whether a claim's verdict lets a ``--strict=mode`` run exit 0 (``None``: not strict)."""
    if mode is None:
        return True
    return verdict == "true" if mode == "all" else verdict != "false"


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


def publish_result(result: dict, root: str | Path | None = None) -> Path:
    """Copy a method's result to ``results/<slug>/<profile>.json`` (the committed provenance)."""
    from neurips26.core.files import atomic_write_json

    info = result["run_info"]
    return atomic_write_json(Path(root or RESULTS_ROOT) / info["slug"] / f"{info['profile']}.json", result)


def cmd_report(args: argparse.Namespace) -> int:
    from neurips26.bench.results import ResultsFileError, find_results, read_result
    from neurips26.report import build_report, refresh_method_readme

    try:
        if args.compare:
            return _compare(*args.compare, profile=args.profile)
        if args.rejudge:
            return _rejudge_published(args.rejudge, args.profile)
        if args.readme is not None:
            return _refresh_readmes(args.readme or [spec.slug for spec in METHODS], args.profile)
        if not args.run_dir:
            raise UsageError("report needs RUN_DIR, --readme [SLUG ...] or --compare A B")
        print(build_report(args.run_dir))
        if args.readmes:
            for path in find_results(args.run_dir):
                result = read_result(path)
                readme = method_readme(result["run_info"]["slug"])
                if readme.is_file() and refresh_method_readme(readme, result):
                    print(f"refreshed {readme}")
    except (ResultsFileError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def _compare(first: str, second: str, profile: str) -> int:
    """Compare the non-timing values of the methods two result sets share; 1 when any differ."""
    from neurips26.bench.compare import compare_results, result_files
    from neurips26.bench.results import read_result

    files_a, files_b = result_files(first, profile), result_files(second, profile)
    shared = sorted(set(files_a) & set(files_b))
    if not shared:
        raise UsageError(f"{first} and {second} hold no result of a common method")
    differ = False
    for slug in shared:
        comparison = compare_results(
            read_result(files_a[slug]), read_result(files_b[slug]), timing=_declared_timing(slug)
        )
        print("\n".join(comparison.lines()))
        differ |= not comparison.identical
    only = sorted(set(files_a) ^ set(files_b))
    if only:
        print(f"in one of the two only (not compared): {', '.join(only)}")
    return EXIT_METHOD_ERROR if differ else EXIT_OK


def _declared_timing(slug: str) -> list[str]:
    """The timing metrics the method's experiment declares now (older result files do not mark them)."""
    spec = next((spec for spec in METHODS if spec.slug == slug), None)
    if spec is None or spec.status != "ready":
        return []
    return [metric.name for metric in spec.load_experiment().metrics if metric.timing]


def _rejudge_published(slugs: Sequence[str], profile: str) -> int:
    """Re-draw each committed result's verdicts from its stored cells (claims changed, cells did not)."""
    from neurips26.bench.results import read_result
    from neurips26.bench.runner import rejudge

    for slug in slugs:
        spec = _spec_or_usage_error(slug)
        path = RESULTS_ROOT / slug / f"{profile}.json"
        if not path.is_file():
            raise UsageError(
                f"{slug}: no {path} to re-judge (run: neurips26 run {slug} --profile {profile} --publish)"
            )
        try:
            result = rejudge(spec.load_experiment(), read_result(path))
        except ValueError as exc:
            raise UsageError(f"{slug}: {exc}") from None
        print(f"{slug}: re-judged {publish_result(result)}")
    return _refresh_readmes(slugs, profile)


def _refresh_readmes(slugs: Sequence[str], profile: str) -> int:
    """Rewrite each method README's results block from ``results/<slug>/<profile>.json``."""
    from neurips26.bench.results import read_result
    from neurips26.report import refresh_method_readme, results_markers

    for slug in slugs:
        _spec_or_usage_error(slug)
        path = RESULTS_ROOT / slug / f"{profile}.json"
        if not path.is_file():
            print(f"{slug}: no {path} (run: neurips26 run {slug} --profile {profile} --publish)")
            continue
        readme = method_readme(slug)
        result = read_result(path)
        if refresh_method_readme(readme, result):
            print(f"{slug}: refreshed {readme} from {path}")
        else:
            start, _ = results_markers(profile)
            print(f"{slug}: {readme} has no {start} markers (add them where the {profile} results go)")
        _refresh_analyses(slug, readme, result)
    return EXIT_OK


def _refresh_analyses(slug: str, readme: Path, result: dict) -> None:
    """Rewrite the README's derived-analysis blocks of this result (loads the experiment only if needed)."""
    from neurips26.report import readme_analyses, refresh_analysis_blocks

    if "<!-- analysis:" not in readme.read_text(encoding="utf-8"):
        return
    analyses = readme_analyses(_spec_or_usage_error(slug).load_experiment())
    for name in refresh_analysis_blocks(readme, result, analyses, DOCS_ROOT / slug):
        print(f"{slug}: refreshed analysis {name!r} ({result['run_info']['profile']}) in {readme}")


def cmd_doctor(args: argparse.Namespace) -> int:
    import torch

    from neurips26.registry import missing_distributions

    print(f"neurips26 {__version__}; python {sys.version.split()[0]}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CUDA: {torch.cuda.is_available()}")
    used = {extra for spec in METHODS for extra in spec.extras}
    for extra in sorted(used):  # an extra no method needs is not worth a line
        missing = missing_distributions(extra)
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
    run.add_argument(
        "--profile",
        default="default",
        metavar="NAME",
        help="smoke, default (the default), full, or a profile one method defines (see `info SLUG`)",
    )
    run.add_argument(
        "--seeds", type=_positive_int, default=None, help="seeds per cell (default: the profile's)"
    )
    run.add_argument("--out", default=None, help="run folder (default runs/<profile>; rerunning resumes it)")
    run.add_argument(
        "--publish", action="store_true", help="also write results/<slug>/<profile>.json (committed results)"
    )
    run.add_argument("--force", action="store_true", help="recompute cells that are already saved")
    run.add_argument(
        "--strict",
        nargs="?",
        const="refuted",
        default=None,
        choices=STRICT_MODES,
        help="exit 3 when a judged claim is refuted (--strict, the same as --strict=refuted) or when any is "
        "not reproduced, i.e. inconclusive, vacuous or refuted (--strict=all)",
    )
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    run.add_argument("--executor", choices=("local", "ray"), default="local")
    run.add_argument(
        "--jobs",
        type=_jobs,
        default="auto",
        help="worker processes of the local executor (default auto: one, in-process, for a method whose "
        "pending cells' budget is under a minute, else one per core; one pool serves every method)",
    )
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="rebuild REPORT.md and figures from a run folder")
    report.add_argument("run_dir", nargs="?")
    report.add_argument(
        "--readme",
        nargs="*",
        metavar="SLUG",
        default=None,
        help="rewrite these methods' README results blocks from results/<slug>/<profile>.json (all if none)",
    )
    report.add_argument(
        "--rejudge",
        nargs="+",
        metavar="SLUG",
        help="re-draw the verdicts of results/<slug>/<profile>.json from its stored cells under the current "
        "claims (when only claims changed), then rewrite the READMEs' results blocks",
    )
    report.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="compare every non-timing value of two results exactly (files, run folders, or the committed "
        "results/ with --profile), warning when their numeric environments differ; exit 1 if any differ",
    )
    report.add_argument(
        "--profile", default="default", help="which committed results --readme / --compare read"
    )
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


def _jobs(text: str) -> int | str:
    return "auto" if text == "auto" else _positive_int(text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


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
    args = parse_args(argv)
    args.argv = argv
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"neurips26: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            "neurips26: interrupted; finished cells are saved. Resume with: neurips26 " + " ".join(argv),
            file=sys.stderr,
        )
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line (argparse errors exit 2)."""
    # a bare `--strict` takes no value: `run --strict samhybrid` must not read the slug as the mode
    return build_parser().parse_args(["--strict=refuted" if arg == "--strict" else arg for arg in argv])


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM ends a run the way Ctrl-C does: saved cells stay, the resume command is printed."""
    raise KeyboardInterrupt
