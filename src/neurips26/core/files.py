"""Writes that never leave a half-written file: write to a temporary sibling, then rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a reader sees the old file or the new one, never a part)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are for sharing, as open() would make
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_json(path: str | os.PathLike[str], payload: Any) -> Path:
    """Atomically write ``payload`` as indented JSON; non-finite floats are refused, not written."""
    return atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=False, allow_nan=False) + "\n")


CACHE_ENV = "NEURIPS26_CACHE"


def user_cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The user cache for fetched data and converted weights: ``override``, else ``$NEURIPS26_CACHE``,
    else ``~/.cache/neurips26``."""
    if override is not None:
        return Path(override).expanduser()
    return Path(os.environ.get(CACHE_ENV, str(Path.home() / ".cache" / "neurips26"))).expanduser()


def sha256_file(path: str | os.PathLike[str], block_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in blocks (weights files do not fit in memory twice)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(block_size):
            digest.update(block)
    return digest.hexdigest()
