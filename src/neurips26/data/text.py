"""Offline text corpus: the CPython standard-library source on this machine.

The zoo's language models (:mod:`neurips26.zoo`) train on code plus English docstrings read from the
running interpreter's ``stdlib`` directory (``sysconfig.get_paths()["stdlib"]``). Nothing is downloaded.
The split into train and held-out files is a pure function of each file's path relative to the stdlib
root (a SHA-256 hash), so it is the same on every machine with the same Python patch version.

Debian's ``python3-doc`` (English prose) is not installed on the development image, so the corpus is
stdlib source only; :func:`debian_python_docs` reports whether it is present for a future extension.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CorpusFile",
    "TextCorpus",
    "debian_python_docs",
    "load_stdlib_corpus",
    "split_of",
    "stdlib_root",
]

# Directories skipped: test suites (huge, repetitive, full of deliberately odd code), vendored
# third-party packages and the IDLE GUI's icons/data. Why: they are not the prose+code mix we want.
_EXCLUDED_PARTS = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"})
_SPLITS = ("train", "heldout")


def stdlib_root() -> Path:
    """The directory holding this interpreter's standard-library ``.py`` files."""
    return Path(sysconfig.get_paths()["stdlib"])


def split_of(relative_path: str, heldout_fraction: float = 0.1) -> str:
    """Deterministic split of one file: ``"heldout"`` for a stable ``heldout_fraction`` of paths.

    The decision hashes the POSIX relative path, so it never depends on file order, size or machine.
    """
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction!r}")
    digest = hashlib.sha256(relative_path.encode("utf-8")).digest()
    bucket = int.from_bytes(digest[:8], "big") / 2**64
    return "heldout" if bucket < heldout_fraction else "train"


@dataclass(frozen=True)
class CorpusFile:
    """One source file: its path relative to the stdlib root and its text."""

    path: str
    text: str


@dataclass(frozen=True)
class TextCorpus:
    """An ordered list of files of one split (sorted by relative path)."""

    split: str
    files: tuple[CorpusFile, ...]

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[CorpusFile]:
        return iter(self.files)

    @property
    def n_chars(self) -> int:
        return sum(len(f.text) for f in self.files)

    def texts(self) -> list[str]:
        return [f.text for f in self.files]


def _iter_source_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if _EXCLUDED_PARTS.intersection(relative.parts[:-1]):
            continue
        yield path


def load_stdlib_corpus(
    split: str = "train",
    *,
    root: str | Path | None = None,
    heldout_fraction: float = 0.1,
    max_file_chars: int = 200_000,
) -> TextCorpus:
    """Read the stdlib source files of one split.

    Parameters
    ----------
    split:
        ``"train"`` or ``"heldout"``.
    root:
        Directory to read (default: :func:`stdlib_root`). Tests pass a tiny directory.
    heldout_fraction:
        Share of files (by path hash) in the held-out split; default 0.1 (ours: ~80 files, enough for a
        stable perplexity).
    max_file_chars:
        Files longer than this are truncated (a few generated tables would otherwise dominate).
    """
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    base = Path(root) if root is not None else stdlib_root()
    if not base.is_dir():
        raise FileNotFoundError(f"corpus root {str(base)!r} is not a directory")
    files = []
    for path in _iter_source_files(base):
        relative = path.relative_to(base).as_posix()
        if split_of(relative, heldout_fraction) != split:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")[:max_file_chars]
        if text.strip():
            files.append(CorpusFile(relative, text))
    if not files:
        raise ValueError(f"no non-empty .py files of split {split!r} under {str(base)!r}")
    return TextCorpus(split, tuple(files))


def debian_python_docs() -> Path | None:
    """Path of Debian's Python HTML docs when ``python3-doc`` is installed, else ``None``."""
    for candidate in sorted(Path("/usr/share/doc").glob("python3*/html")):
        if candidate.is_dir():
            return candidate
    return None
