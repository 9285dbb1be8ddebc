"""Do two results hold the same numbers? Every non-timing value of every cell, compared exactly.

The reproducibility check of issue #49: a fresh ``make run`` against the committed ``results/``
(``neurips26 report --compare runs/default results``), or a run under other settings against the first.
Metrics declared ``Metric(..., timing=True)`` (wall times and values derived from them) are left out; two
results made under different numeric environments (threads, deterministic kernels, library versions, BLAS)
are still compared, with a warning naming the differences.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurips26.bench.numeric import NUMERIC_KEYS
from neurips26.bench.results import ResultsFileError, point_key, read_result

CellKey = tuple[str, str, int]  # (system, grid point, seed)


@dataclass
class Comparison:
    """The outcome of comparing result ``a`` with result ``b`` of one method."""

    slug: str
    compared: int = 0  # non-timing values compared
    differing: list[str] = field(default_factory=list)  # one line per differing value or cell status
    only_in_one: list[str] = field(default_factory=list)  # cells present in one result only
    timing: list[str] = field(default_factory=list)  # metrics left out as timing-derived
    environment: list[str] = field(default_factory=list)  # numeric-environment differences (warnings)

    @property
    def identical(self) -> bool:
        return not self.differing and not self.only_in_one

    def lines(self, limit: int = 10) -> list[str]:
        """A readable account: a verdict line, then warnings and the first ``limit`` differences."""
        verdict = "identical" if self.identical else f"{len(self.differing)} value(s) differ"
        skipped = f"; timing metrics left out: {', '.join(self.timing)}" if self.timing else ""
        out = [f"{self.slug}: {verdict} ({self.compared} non-timing values compared{skipped})"]
        out += [f"  warning: numeric environments differ: {line}" for line in self.environment]
        out += [f"  only in one result: {line}" for line in self.only_in_one[:limit]]
        out += [f"  {line}" for line in self.differing[:limit]]
        hidden = len(self.differing) - limit
        if hidden > 0:
            out.append(f"  ... and {hidden} more")
        return out


def timing_metrics(result: Mapping[str, Any], declared: Iterable[str] = ()) -> list[str]:
    """Metrics the result marks ``timing`` (files written before the flag existed mark none), plus
    ``declared`` (the current experiment's declaration), that the result has."""
    names = [m["name"] for m in result["metrics"]]
    marked = {m["name"] for m in result["metrics"] if m.get("timing")} | set(declared)
    return [name for name in names if name in marked]


def _cells(result: Mapping[str, Any]) -> dict[CellKey, dict]:
    return {(c["system"], point_key(c["point"]), c["seed"]): c for c in result["cells"]}


def _environment(result: Mapping[str, Any]) -> dict[str, Any]:
    """The numeric environment a result records; older files without one give what meta_info holds."""
    info, meta = result["run_info"], result.get("meta_info", {})
    recorded = dict(info.get("numeric") or {})
    recorded.setdefault("torch", meta.get("torch"))
    recorded.setdefault("numpy", meta.get("numpy"))
    recorded.setdefault("jobs", info.get("jobs"))
    recorded.setdefault("executor", info.get("executor"))
    return recorded


def environment_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """``key: A vs B`` for each numeric setting the two results record differently (or one lacks)."""
    env_a, env_b = _environment(a), _environment(b)
    out = []
    for key in (*NUMERIC_KEYS, "jobs", "executor"):
        value_a, value_b = env_a.get(key, "not recorded"), env_b.get(key, "not recorded")
        if value_a != value_b:
            out.append(f"{key}: {value_a!r} vs {value_b!r}")
    return out


def compare_results(a: Mapping[str, Any], b: Mapping[str, Any], timing: Iterable[str] = ()) -> Comparison:
    """Compare every non-timing value of ``a``'s cells with ``b``'s, exactly (``None`` equals ``None``).

    Raises ``ValueError`` when the two results are of different methods.
    """
    slug_a, slug_b = a["run_info"]["slug"], b["run_info"]["slug"]
    if slug_a != slug_b:
        raise ValueError(f"cannot compare results of different methods: {slug_a!r} vs {slug_b!r}")
    skipped = sorted(set(timing_metrics(a, timing)) | set(timing_metrics(b, timing)))
    comparison = Comparison(slug_a, timing=skipped, environment=environment_differences(a, b))
    cells_a, cells_b = _cells(a), _cells(b)
    for key in sorted(set(cells_a) ^ set(cells_b)):
        comparison.only_in_one.append(f"{key[0]} {key[1] or '(no grid)'} seed {key[2]}")
    for key in sorted(set(cells_a) & set(cells_b)):
        cell_a, cell_b = cells_a[key], cells_b[key]
        where = f"{key[0]} {key[1] or '(no grid)'} seed {key[2]}"
        if cell_a["status"] != cell_b["status"]:
            comparison.differing.append(f"{where}: status {cell_a['status']} vs {cell_b['status']}")
            continue
        for metric in sorted((set(cell_a["metrics"]) | set(cell_b["metrics"])) - set(skipped)):
            value_a, value_b = cell_a["metrics"].get(metric), cell_b["metrics"].get(metric)
            comparison.compared += 1
            if value_a != value_b:
                comparison.differing.append(f"{where} {metric}: {value_a!r} vs {value_b!r}")
    return comparison


def result_files(path: str | os.PathLike[str], profile: str = "default") -> dict[str, Path]:
    """Slug -> result file under ``path``: a result file, a method's run folder, a run folder
    (``<slug>/result.json``) or the committed results (``<slug>/<profile>.json``).

    Raises ``ResultsFileError`` when ``path`` holds none.
    """
    path = Path(path)
    if path.is_file() or (path / "result.json").is_file():
        file = path if path.is_file() else path / "result.json"
        return {read_result(file)["run_info"]["slug"]: file}
    found = {file.parent.name: file for file in sorted(path.glob("*/result.json"))}
    found = found or {file.parent.name: file for file in sorted(path.glob(f"*/{profile}.json"))}
    if not found:
        raise ResultsFileError(f"{path}: no result.json, <slug>/result.json or <slug>/{profile}.json in it")
    return found
