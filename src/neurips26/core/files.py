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


def atomic_write_json(path: str | os.PathLike[str], payload: Any) -> Path:
    """Atomically write ``payload`` as indented JSON; non-finite floats are refused, not written."""
    return atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=False, allow_nan=False) + "\n")
