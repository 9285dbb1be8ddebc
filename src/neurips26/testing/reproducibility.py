"""Run chosen cells of an experiment in a fresh process under chosen settings, for cross-settings tests.

Issue #49: a cell's non-timing values must depend on its config, seed and code only. ``cells_under`` runs
cells in a subprocess with a given ``OMP_NUM_THREADS`` and worker count, in the order given (so a cell can
run after another in the same process, or alone in a fresh worker); ``non_timing_values`` keeps what must
then be identical. Used by ``tests/bench/test_cross_settings.py`` and ``benchmarks/cross_settings.py``.

``python -m neurips26.testing.reproducibility`` reads a JSON request on stdin and prints the cells as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neurips26.bench.results import point_key

CellSpec = tuple[str, dict, int]  # (system, grid point, seed)


def run_cells(
    experiment_ref: str,
    profile: str,
    cells: Sequence[CellSpec],
    jobs: int = 1,
    overrides: Mapping | None = None,
    deterministic: bool = True,
) -> list[dict]:
    """Run ``cells`` of the experiment in this process (in order) or in ``jobs`` spawned workers."""
    from neurips26.bench.pool import CellPool
    from neurips26.bench.runner import CellTask, execute_cell, load_experiment

    experiment = load_experiment(experiment_ref)
    chosen = experiment.profile(profile)
    tasks = [
        CellTask(experiment_ref, s, dict(p), seed, chosen, dict(overrides or {}), deterministic=deterministic)
        for s, p, seed in cells
    ]
    if jobs <= 1:
        return [execute_cell(task, experiment) for task in tasks]
    with CellPool(jobs) as pool:
        return [cell for _, cell in pool.run(execute_cell, tasks)]


def cells_under(
    experiment_ref: str,
    profile: str,
    cells: Sequence[CellSpec],
    *,
    jobs: int = 1,
    omp_threads: int = 1,
    deterministic: bool = True,
    timeout_s: float = 600.0,
) -> list[dict]:
    """``run_cells`` in a fresh interpreter whose ``OMP_NUM_THREADS`` is ``omp_threads``.

    The subprocess imports this same package (its folder first on ``PYTHONPATH``). Raises
    ``RuntimeError`` with the subprocess's stderr when it fails.
    """
    package_parent = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "OMP_NUM_THREADS": str(omp_threads), "MKL_NUM_THREADS": str(omp_threads)}
    env["PYTHONPATH"] = os.pathsep.join([package_parent, *filter(None, [os.environ.get("PYTHONPATH")])])
    request = {
        "ref": experiment_ref,
        "profile": profile,
        "cells": [list(c) for c in cells],
        "jobs": jobs,
        "deterministic": deterministic,
    }
    done = subprocess.run(
        [sys.executable, "-m", "neurips26.testing.reproducibility"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"cells of {experiment_ref} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def smoke_cells(experiment: Any, profile: str = "smoke") -> list[CellSpec]:
    """One cell of ours and one of its first other system, at the profile's first grid point, seed 0."""
    chosen = experiment.profile(profile)
    names = experiment.system_names(chosen)
    other = next(name for name in names if name != experiment.ours)
    point = chosen.points()[0]
    return [(experiment.ours, point, 0), (other, point, 0)]


def non_timing_values(cells: Sequence[Mapping[str, Any]], timing: Sequence[str]) -> dict[str, Any]:
    """``system point seed`` -> (status, every metric but the timing ones), for exact comparison."""
    return {
        f"{c['system']} {point_key(c['point'])} seed {c['seed']}": (
            c["status"],
            {name: value for name, value in sorted(c["metrics"].items()) if name not in timing},
        )
        for c in cells
    }


def _main() -> int:
    request = json.loads(sys.stdin.read())
    cells = [(system, point, seed) for system, point, seed in request["cells"]]
    out = run_cells(
        request["ref"],
        request["profile"],
        cells,
        jobs=request["jobs"],
        deterministic=request["deterministic"],
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
