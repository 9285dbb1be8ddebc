"""A method's code fingerprint: the files its numbers depend on, as one digest (the resume key).

A saved cell is reused only while its config hash *and* its method's fingerprint are unchanged. The
fingerprint of the experiment ``package.methods.<slug>.experiment`` covers:

- every file of the experiment's own folder (``methods/<slug>/``, recursively: sources, committed weights,
  checkpoints, problem sets), except documentation and pictures (``README.md`` and any ``.md``, ``.png``...);
  a Python source counts by its syntax tree without docstrings (``source_digest``), so comments, docstrings
  and formatting never count;
- every module of the package the experiment imports, transitively: the module files and the ``__init__``
  of each package on the way;
- the data files beside each of those shared modules (their folder and its sub-folders that are not Python
  packages of their own: the zoo's ``checkpoints/`` for a zoo model), documentation again excluded;
- the harness modules that decide a cell's numbers whatever the method (``CELL_MODULES``: seeding and the
  numeric environment).

So ``neurips26 report --readme`` (a README edit) recomputes nothing, and editing method A never
invalidates method B's saved cells unless B imports A's code.

The imports are found by a *static* scan of the sources, not by importing the experiment and reading
``sys.modules``: methods import heavy dependencies (and often their own helpers) inside functions, which a
module-level import would never execute, and ``sys.modules`` in the driver also holds whatever the CLI or
an earlier method imported. The scan reads ``import``/``from ... import`` statements anywhere in a file
(module level or inside functions, absolute or relative) and module names written as strings
(``"neurips26.x.y"`` or ``"neurips26.x.y:ATTR"``, as given to ``importlib`` or ``python -m``). It
over-approximates (an import in a branch never taken still counts), which costs a recompute, never a wrong
reuse; a module reached only through a computed name (``import_module(prefix + name)``) would be missed.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
# the harness code every cell's numbers pass through, whichever method runs
CELL_MODULES = ("neurips26.core.seeding", "neurips26.bench.numeric")
# code no experiment computes a number through, never followed by the scan: the test support (conformance
# testers, contract checks, toy models; tests/bench/test_fingerprint.py checks that only a method's
# ``conformance.py`` imports it) and this bookkeeping itself. Following the test support pulled every
# method a tester names (and the runner) into the fingerprints of the 13 methods that declare conformance
# factories, so an edit of one method made 13 published results "older code" (bench.rescope re-stamps them).
NEVER_DECIDES = ("neurips26.testing", "neurips26.bench.fingerprint", "neurips26.bench.rescope")
# documentation and pictures: editing them never changes a number
DOC_SUFFIXES = frozenset({".md", ".rst", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".webp"})
_LARGE_FILE = 256 * 1024  # weights and checkpoints: re-read only when their size or mtime changes
_large_file_digests: dict[tuple[str, int, int], bytes] = {}


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of the module and of each class and function dropped (in place)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def source_digest(source: str) -> bytes | None:
    """SHA-256 of a Python source's syntax tree without docstrings, comments, layout or line numbers.

    So rewording a docstring or a comment, or reformatting, never voids saved cells nor makes a
    published result "older code"; any change to what the code does changes the digest. None when the
    source does not parse (the caller then hashes the bytes).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    dumped = ast.dump(_without_docstrings(tree), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dumped.encode()).digest()


def file_digest(path: Path) -> bytes:
    """Digest of a file: a Python source by its meaning (``source_digest``), any other file by its bytes.

    Large files are cached by size and mtime; sources are always re-read.
    """
    stat = path.stat()
    if stat.st_size < _LARGE_FILE:  # an edit can keep a small file's size and mtime tick
        data = path.read_bytes()
        if path.suffix == ".py":
            meaning = source_digest(data.decode("utf-8", errors="replace"))
            if meaning is not None:
                return meaning
        return hashlib.sha256(data).digest()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _large_file_digests:
        _large_file_digests[key] = hashlib.sha256(path.read_bytes()).digest()
    return _large_file_digests[key]


def _counts(path: Path) -> bool:
    """Whether a file can change a number: not byte-code, not documentation or a picture."""
    return "__pycache__" not in path.parts and path.suffix.lower() not in DOC_SUFFIXES


def module_file(name: str, root: Path = PACKAGE_ROOT) -> Path | None:
    """The source file of module ``name`` inside the package at ``root`` (None if it is not one)."""
    parts = name.split(".")
    if parts[0] != root.name or not all(part.isidentifier() for part in parts):
        return None
    base = root.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _nodes(tree: ast.AST, module_level_only: bool) -> Iterator[ast.AST]:
    """Every node of ``tree``; with ``module_level_only``, none inside a function (run only when called)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if module_level_only and isinstance(node, FUNCTIONS):
            continue
        todo.extend(ast.iter_child_nodes(node))


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _imported_names(path: Path, root: Path, module_level_only: bool = False) -> dict[str, bool]:
    """Module names ``path`` may import (import statements, module names written as strings), each with
    whether it is used whole (True) or only run as the package of a submodule (``from pkg import module``).
    """
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    written_module = re.compile(rf"{re.escape(root.name)}(\.\w+)+")
    found: dict[str, bool] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in _nodes(tree, module_level_only):
        if isinstance(node, ast.Import):
            found.update((alias.name, True) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from .x import y: resolve against the importing package
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], base]).strip(".")
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            found.update((module, True) for module in submodules if module_file(module, root))
            # `from pkg import function` uses pkg's code; `from pkg import submodule` only runs pkg's body
            found[base] = found.get(base, False) or not all(module_file(m, root) for m in submodules)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            candidate = node.value.partition(":")[0]
            if written_module.fullmatch(candidate):
                found[candidate] = True
    return found


def imported_modules(roots: Iterable[str], root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Every module of the package reachable from ``roots`` by imports (parent packages included).

    A module named by an import is scanned whole (its functions' lazy imports run when it is used); a
    parent package that is only run on the way (importing ``a.b.c`` runs ``a`` and ``a.b``) is scanned at
    module level only: the package root's lazy ``from neurips26.registry import ...`` would otherwise
    pull every method into every fingerprint.
    """
    seen: dict[str, Path] = {}
    scanned: dict[str, bool] = {}  # name -> scanned whole
    todo: list[tuple[str, bool]] = [(name, True) for name in roots]
    while todo:
        name, whole = todo.pop()
        if scanned.get(name) is True or (name in scanned and not whole):
            continue
        path = module_file(name, root)
        if path is None or _never_decides(name, root):  # third-party, `from pkg import f`, bookkeeping
            continue
        seen[name], scanned[name] = path, whole
        parts = name.split(".")
        todo += [(".".join(parts[:i]), False) for i in range(1, len(parts))]
        todo += sorted(_imported_names(path, root, not whole).items())
    return seen


def _never_decides(name: str, root: Path) -> bool:
    """Whether module ``name`` is one that never decides a number (``NEVER_DECIDES``, or inside one)."""
    own = [prefix.replace("neurips26", root.name, 1) for prefix in NEVER_DECIDES]
    return any(name == prefix or name.startswith(prefix + ".") for prefix in own)


def _data_files_beside(folder: Path) -> list[Path]:
    """Non-Python files in ``folder`` and its sub-folders that are not packages of their own."""
    files = []
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            if not (path / "__init__.py").exists() and path.name != "__pycache__":
                files += [p for p in sorted(path.rglob("*")) if p.is_file() and _counts(p)]
        elif path.suffix != ".py" and _counts(path):
            files.append(path)
    return files


def experiment_folder(module: str, root: Path = PACKAGE_ROOT) -> Path:
    """The folder an experiment module belongs to (``methods/<slug>/``); its whole tree counts."""
    path = module_file(module, root)
    if path is None:
        raise ValueError(f"experiment module {module!r} is not a module of the package at {root}")
    return path.parent


def fingerprint_files(experiment_ref: str, root: Path = PACKAGE_ROOT) -> list[Path]:
    """The files whose bytes a method's saved cells depend on (see the module docstring), sorted."""
    module = experiment_ref.partition(":")[0]
    folder = experiment_folder(module, root)
    files: set[Path] = set()
    if folder != root:  # an experiment at the package's top level owns only its own file
        files |= {p for p in folder.rglob("*") if p.is_file() and _counts(p)}
    cell_modules = [name.replace("neurips26", root.name, 1) for name in CELL_MODULES]
    for path in imported_modules([module, *cell_modules], root).values():
        files.add(path)
        if not path.is_relative_to(folder) or folder == root:
            files |= set(_data_files_beside(path.parent))
    return sorted(files)


def code_fingerprint(experiment_ref: str, root: Path = PACKAGE_ROOT) -> str:
    """A 16-hex digest of the files ``fingerprint_files`` lists (paths and contents)."""
    digest = hashlib.sha256()
    for path in fingerprint_files(experiment_ref, root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + file_digest(path))
    return digest.hexdigest()[:16]
