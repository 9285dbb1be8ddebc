"""The results files: one JSON per cell (for resuming) and one ``result.json`` per method per run.

Both are versioned and validated when read back, so a corrupt or foreign file is a clear error.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CELL_SCHEMA = "neurips26.cell/1"
RESULT_SCHEMA = "neurips26.result/1"

_RESULT_KEYS = ("schema", "run_info", "metrics", "systems", "claims", "cells", "meta_info")
_CELL_KEYS = ("schema", "system", "point", "seed", "config_hash", "status", "metrics")


class ResultsFileError(ValueError):
    """A results file that is missing, unreadable, truncated or not ours."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ResultsFileError(f"{path}: no such results file") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"{path}: not valid JSON ({exc}); delete it and rerun with --force") from exc


def _require(path: Path, payload: Any, schema: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(payload, dict) or payload.get("schema") != schema:
        found = payload.get("schema") if isinstance(payload, dict) else type(payload).__name__
        raise ResultsFileError(f"{path}: expected a {schema!r} file, found schema {found!r}")
    missing = [k for k in keys if k not in payload]
    if missing:
        raise ResultsFileError(f"{path}: {schema} file lacks keys {missing}")
    return payload


def read_cell(path: str | os.PathLike[str]) -> dict:
    """Read and validate one cell file."""
    path = Path(path)
    return _require(path, _read_json(path), CELL_SCHEMA, _CELL_KEYS)


def read_result(path: str | os.PathLike[str]) -> dict:
    """Read and validate one method's ``result.json`` (a folder holding one is accepted too)."""
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    payload = _require(path, _read_json(path), RESULT_SCHEMA, _RESULT_KEYS)
    if not isinstance(payload["systems"], dict) or not isinstance(payload["claims"], list):
        raise ResultsFileError(f"{path}: 'systems' must be an object and 'claims' a list")
    return payload


def find_results(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Every ``<slug>/result.json`` under a run folder, sorted by slug."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ResultsFileError(f"{run_dir}: not a run folder")
    return sorted(run_dir.glob("*/result.json"))


def meta_info() -> dict[str, Any]:
    """Versions and machine facts that matter for reading the numbers (no host names)."""
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    from importlib.metadata import PackageNotFoundError, version

    for package in ("neurips26", "torch", "numpy"):
        try:
            info[package] = version(package)
        except PackageNotFoundError:
            info[package] = None
    if "torch" in sys.modules:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.is_available()
    return info


def cell_checksum(cell: Mapping[str, Any]) -> str:
    """A digest of a cell's content (every key but ``checksum``), to notice a hand-edited saved cell.

    Canonical JSON (sorted keys, no spaces), so the digest of a cell equals that of the cell read back.
    """
    body = {key: value for key, value in cell.items() if key != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def point_key(point: Mapping[str, Any]) -> str:
    """A stable, readable key for a grid point ("" when there is no grid)."""
    return ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(point.items()))
