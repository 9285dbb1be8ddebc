"""Re-stamp published results after the fingerprint's *scope* changed, where the code behind them did not.

A published result records the code fingerprint of the method at the time it was made. When the rule that
decides which files count changes (``bench.fingerprint``), every recorded fingerprint stops matching even
though no file that decides the result's numbers changed. Rerunning would be the honest fallback, but the
question "was this result made by the current code?" can be answered exactly from git:

1. find the commit ``C`` that last wrote the result file;
2. check that ``C``'s tree, under the rule of ``C`` itself, gives the fingerprint the result recorded (so
   ``C`` holds the code that made it; otherwise nothing is claimed);
3. compute the current rule on ``C``'s tree and on the working tree: when the two agree, every file the
   current rule counts is unchanged since the result was made, and the result is re-stamped with the
   current fingerprint, the recorded one kept beside it under ``run_info["fingerprint_rescoped"]``.

A result that fails any step keeps its old fingerprint and is reported, so the README keeps calling it
"made by older code" until it is republished.

Run it from the repository root: ``python -m neurips26.bench.rescope results/*/*.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

from neurips26.bench.fingerprint import PACKAGE_ROOT, code_fingerprint
from neurips26.core.files import atomic_write_json

PACKAGE_DIR = "src/neurips26"


def _git(*args: str, repo: Path) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True).stdout


def last_commit_of(path: Path, repo: Path) -> str | None:
    """The commit that last wrote ``path`` (None when it was never committed or has uncommitted edits)."""
    relative = path.resolve().relative_to(repo.resolve()).as_posix()
    if _git("status", "--porcelain", "--", relative, repo=repo).strip():
        return None
    commit = _git("log", "-1", "--format=%H", "--", relative, repo=repo).decode().strip()
    return commit or None


def _extract_package(commit: str, repo: Path, into: Path) -> Path:
    """``src/neurips26`` of ``commit`` unpacked under ``into``; returns the package folder."""
    archive = _git("archive", "--format=tar", commit, PACKAGE_DIR, repo=repo)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / PACKAGE_DIR


def _fingerprint_module_of(package: Path) -> ModuleType:
    """The ``bench/fingerprint.py`` of an unpacked tree, loaded on its own (it imports the stdlib only)."""
    spec = importlib.util.spec_from_file_location(
        f"_fingerprint_{id(package)}", package / "bench/fingerprint.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rescope(result_path: Path, repo: Path, write: bool = True, root: Path = PACKAGE_ROOT) -> str:
    """Re-stamp one result file when the check above passes; returns one line saying what happened.

    ``repo`` is the git repository holding the result; ``root`` the package whose current code counts.
    """
    result = json.loads(result_path.read_text())
    info = result["run_info"]
    recorded, slug = info.get("code_fingerprint"), info["slug"]
    ref = f"neurips26.methods.{slug}.experiment"
    now = code_fingerprint(ref, root)
    if recorded == now:
        return f"{result_path}: already made by the current code ({now})"
    commit = last_commit_of(result_path, repo)
    if commit is None:
        return f"{result_path}: not committed as it is: left alone"
    with tempfile.TemporaryDirectory() as folder:
        package = _extract_package(commit, repo, Path(folder))
        then_rule = _fingerprint_module_of(package)
        if then_rule.code_fingerprint(ref, package) != recorded:
            return f"{result_path}: commit {commit[:12]} does not hold the code that made it: left alone"
        then = code_fingerprint(ref, package)
    if then != now:
        return f"{result_path}: files the current rule counts changed since {commit[:12]}: left alone"
    info["fingerprint_rescoped"] = {"recorded": recorded, "verified_at_commit": commit}
    info["code_fingerprint"] = now
    if write:
        atomic_write_json(result_path, result)
    return f"{result_path}: re-stamped {recorded} -> {now} (code unchanged since {commit[:12]})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    args = parser.parse_args(argv)
    repo = Path(_git("rev-parse", "--show-toplevel", repo=Path.cwd()).decode().strip())
    for path in args.results:
        print(rescope(path, repo, write=not args.dry_run))


if __name__ == "__main__":
    main()
