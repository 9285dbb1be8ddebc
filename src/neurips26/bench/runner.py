"""The runner: expand an experiment into cells, execute them (resuming), and write ``result.json``.

A cell is (system, grid point, seed). Each finished cell is saved atomically to ``cells/``; a rerun
skips cells whose saved config hash and code fingerprint both match, so a killed run resumes without
recomputing, and a run after a code change never republishes numbers the old code made.
"""

from __future__ import annotations

import copy
import hashlib
import math
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from neurips26.bench.claims import evaluate_claim, system_floor_flags
from neurips26.bench.experiment import Experiment, NotApplicable, Profile
from neurips26.bench.fingerprint import code_fingerprint
from neurips26.bench.numeric import numeric_environment, pinned_numerics
from neurips26.bench.pool import CellPool, choose_jobs, run_on_ray
from neurips26.bench.progress import Heartbeat, TqdmProgress
from neurips26.bench.results import (
    CELL_SCHEMA,
    RESULT_SCHEMA,
    ResultsFileError,
    cell_checksum,
    meta_info,
    point_key,
    read_cell,
)
from neurips26.bench.setup import WORKER_STORE, cell_setup, order_cells_by_setup
from neurips26.bench.stats import summarize
from neurips26.core.config import config_hash, config_to_dict
from neurips26.core.files import atomic_write_json
from neurips26.core.measure import measured
from neurips26.core.seeding import seed_everything

EXECUTORS = ("local", "ray")
CELL_STATES = ("ok", "nan", "error", "n/a")


@dataclass(frozen=True)
class CellTask:
    """Everything needed to run one cell in any process: the experiment is named, not pickled."""

    experiment_ref: str  # "module:ATTRIBUTE"
    system: str
    point: dict
    seed: int
    profile: Profile  # carried whole, so a worker runs exactly the profile the driver planned
    overrides: dict = field(default_factory=dict)
    threads: int = 1
    device: str = "cpu"
    deterministic: bool = True  # torch's deterministic algorithms (see neurips26.bench.numeric)
    # the cell's config, built once by the driver (``plan_cells``) and carried as the object itself: no JSON
    # round trip between the driver and the worker. None (a task made by hand) rebuilds it in the worker.
    config: Any = None

    def built_config(self, experiment: Experiment) -> Any:
        """The config this cell runs: a copy of the carried one, else rebuilt from the profile, ``--set`` and
        point. A copy, because most method configs are mutable dataclasses and a point's cells share one
        object in the driver: a cell that edits its config must not change the next cell's."""
        if self.config is not None:
            return copy.deepcopy(self.config)
        return experiment.config_for(self.profile, self.point, self.overrides)

    @property
    def cell_id(self) -> str:
        digest = hashlib.sha256(f"{self.system}|{point_key(self.point)}|{self.seed}".encode()).hexdigest()
        safe_system = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.system)
        return f"{safe_system}-{digest[:10]}-s{self.seed}"


def load_experiment(ref: str) -> Experiment:
    """Import ``module:ATTRIBUTE`` and check it is an ``Experiment``."""
    import importlib

    module_name, _, attribute = ref.partition(":")
    experiment = getattr(importlib.import_module(module_name), attribute or "EXPERIMENT")
    if not isinstance(experiment, Experiment):
        raise TypeError(f"{ref} is a {type(experiment).__name__}, not an Experiment")
    return experiment


def execute_cell(task: CellTask, experiment: Experiment | None = None, progress: Any = None) -> dict:
    """Run one cell: seed, build the config and system, call ``run``, measure; never raises.

    The cell runs under ``pinned_numerics`` (its threads, deterministic kernels), so its values do not
    depend on the process, the worker count or the cells run before it in the same process.
    """
    experiment = experiment or load_experiment(task.experiment_ref)
    profile = task.profile
    config = task.built_config(experiment)
    device = _cell_device(experiment, task.device)
    cell: dict[str, Any] = {
        "schema": CELL_SCHEMA,
        "system": task.system,
        "point": task.point,
        "seed": task.seed,
        "config_hash": config_hash(config),
        "status": "ok",
        "metrics": {},
        "error": None,
        "device": device,
        "numeric": cell_numerics(task),
    }
    try:
        with (
            pinned_numerics(task.threads, task.deterministic, device),
            measured() as cost,
            _device_for_run(device),
        ):
            context = cell_setup(WORKER_STORE, experiment, config, profile, task.seed, cell)
            seed_everything(task.seed)
            system = experiment.build_system(task.system, config)
            metrics = experiment.run_cell(system, config, profile, task.seed, progress, context)
        metrics = dict(metrics)
        details = metrics.pop(DETAILS_KEY, None)
        if details is not None:
            cell[DETAILS_KEY] = _checked_details(details)
        cell["metrics"], cell["nonfinite"] = _checked_metrics(experiment, metrics)
        claimed = {claim.metric for claim in experiment.claims}
        bad = sorted(claimed & set(cell["nonfinite"]))
        if bad:  # a NaN on a claimed metric is a visible failure, never a silently missing pair
            cell["status"] = "nan"
            cell["error"] = f"non-finite claimed metric(s) {bad}"
    except NotApplicable as reason:
        cell["status"] = "n/a"
        cell["error"] = str(reason)
    except Exception as exc:  # one failing cell must not stop the others
        cell["status"] = "error"
        cell["error"] = f"{type(exc).__name__}: {exc}"
        cell["traceback"] = traceback.format_exc(limit=8)
    cell["wall_s"] = cost.seconds - cell.get("setup_s", 0.0) if "cost" in locals() else None  # setup apart
    cell["peak_rss_mb"] = cost.peak_rss_mb if "cost" in locals() else None
    return cell


def cell_numerics(task: CellTask) -> dict:
    """The numeric settings a cell records and must match to be reused."""
    return {"threads": task.threads, "deterministic": task.deterministic}


def _cell_device(experiment: Experiment, requested: str) -> str:
    """The device a cell runs on: the one asked for when the experiment supports it, else its first."""
    return requested if requested in experiment.devices else experiment.devices[0]


@contextmanager
def _device_for_run(device: str) -> Iterator[None]:
    """Make ``default_device()`` answer ``device`` inside the cell (worker processes included)."""
    import os

    from neurips26.core.device import DEVICE_ENV

    previous = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = device
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = previous


# ``run`` may return non-numeric facts of a cell (per-program rows, chosen hyper-parameters, a failure list)
# under this key: stored beside the metrics in the cell JSON, never averaged or judged.
DETAILS_KEY = "details"


def _checked_details(details: Any) -> dict:
    """The cell's details as stored: a JSON-serialisable mapping (a clear error otherwise)."""
    import json

    if not isinstance(details, Mapping):
        raise TypeError(f"run's {DETAILS_KEY!r} must be a mapping, got {type(details).__name__}")
    try:
        return json.loads(json.dumps(dict(details)))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"run's {DETAILS_KEY!r} must be JSON-serialisable: {exc}") from None


def _checked_metrics(
    experiment: Experiment, metrics: Mapping[str, Any]
) -> tuple[dict[str, float | None], list]:
    """Metric values as floats; a non-finite value is stored as None and its name reported."""
    declared = {m.name for m in experiment.metrics}
    unknown = sorted(set(metrics) - declared)
    if unknown:
        raise ValueError(f"run returned undeclared metrics {unknown}; declared: {sorted(declared)}")
    values: dict[str, float | None] = {}
    nonfinite = []
    for name, value in metrics.items():
        number = float(value)
        if math.isfinite(number):
            values[name] = number
        else:
            values[name] = None
            nonfinite.append(name)
    return values, nonfinite


def plan_cells(
    experiment: Experiment,
    experiment_ref: str,
    profile: Profile,
    seeds: int,
    overrides: Mapping,
    threads: int,
    device: str = "cpu",
) -> list[CellTask]:
    """Every cell of the profile, in a fixed order (grid point, system, seed), each carrying its built config.

    A point's config is built once (``config_for`` validates the ``--set`` and the point) and shared by the
    point's cells; it travels to a worker by pickling, so a value JSON cannot hold survives.
    """
    tasks = []
    for point in profile.points():
        config = experiment.config_for(profile, point, overrides)
        tasks += [
            CellTask(
                experiment_ref, system, point, seed, profile, dict(overrides), threads, device, config=config
            )
            for system in experiment.system_names(profile)
            for seed in range(seeds)
        ]
    return tasks


def _saved_cell(path: Path, expected_hash: str, code: str, numeric: dict) -> tuple[dict | None, str | None]:
    """The saved cell if it finished with the same config, code and numeric settings, else None.

    The second value says why a cell that exists is not reused when that is news to the user: a cell whose
    content no longer matches its checksum was edited by hand (or half-copied) and is recomputed.
    Errors are retried silently, as are cells of another config or code (the run resumes what it can).
    """
    if not path.exists():
        return None, None
    try:
        cell = read_cell(path)
    except ResultsFileError:
        return None, None
    if "checksum" not in cell:  # an older cell format: never reused, nothing to report
        return None, None
    if cell["checksum"] != cell_checksum(cell):
        return None, "edited by hand (content does not match its checksum)"
    if cell["config_hash"] != expected_hash or cell["status"] not in ("ok", "n/a", "nan"):
        return None, None
    if cell.get("code_fingerprint") != code or cell.get("numeric") != numeric:
        return None, None
    return cell, None


def _execute_local(
    tasks: list[CellTask],
    experiment: Experiment,
    on_done: Callable[[CellTask, dict], None],
    desc: str,
    jobs: int,
    pool: CellPool | None = None,
) -> None:
    """Run cells in this process (``jobs=1``) or in worker processes (``pool``, else a pool of ``jobs``)."""
    progress = TqdmProgress()
    if jobs <= 1 or len(tasks) <= 1:
        iterator: Iterable[CellTask] = progress.loop(tasks, total=len(tasks), desc=desc)
        for task in iterator:
            on_done(task, execute_cell(task, experiment, progress))
        return
    owned = pool is None
    pool = pool or CellPool(jobs)
    try:
        for task, cell in progress.loop(pool.run(execute_cell, tasks), total=len(tasks), desc=desc):
            on_done(task, cell)
    except BaseException:
        pool.terminate()  # Ctrl-C / SIGTERM: finished cells are saved; queued ones are dropped
        raise
    if owned:
        pool.close()


def run_experiment(
    experiment: Experiment,
    experiment_ref: str,
    out_dir: str | Path,
    *,
    profile: str = "default",
    seeds: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    force: bool = False,
    executor: str = "local",
    threads: int = 1,
    jobs: int | str = 1,
    device: str = "cpu",
    pool: CellPool | None = None,
    command: str | None = None,
    heartbeat_s: float | None = None,
    on_cell: Callable[[int, int], None] | None = None,
) -> dict:
    """Run every cell of ``profile`` (resuming), then aggregate and save ``out_dir/result.json``.

    ``jobs`` worker processes run cells side by side for the local executor (``"auto"``: one in-process
    for a short run, see ``neurips26.bench.pool.choose_jobs``; ``pool``: a pool shared with other methods);
    every cell runs on ``threads`` torch/BLAS threads with deterministic torch kernels whatever the
    executor, so the numbers do not depend on either (``run_info["numeric"]`` records them). ``device``
    is where cells run when the experiment supports it; ``command`` is recorded for provenance;
    ``heartbeat_s`` prints a progress line that often (for logs without a terminal); ``on_cell(done,
    total)`` is called after each finished cell (the CLI's overall bar uses it).
    Raises ``ValueError`` for a bad profile, seed count, executor or override before any cell runs.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r} is not allowed; choose one of {list(EXECUTORS)}")
    chosen = experiment.profile(profile)
    n_seeds = chosen.seeds if seeds is None else seeds
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {n_seeds!r}")
    choose_jobs(jobs, 0, 0.0)  # validates jobs before any work
    overrides = dict(overrides or {})
    base_config = experiment.config_for(chosen, {}, overrides)  # validates --set before any work
    tasks = plan_cells(experiment, experiment_ref, chosen, n_seeds, overrides, threads, device)  # and points

    out = Path(out_dir)
    cells_dir = out / "cells"
    code = code_fingerprint(experiment_ref)
    cells: dict[str, dict] = {}
    pending: list[CellTask] = []
    edited: list[str] = []
    hashes = {id(task.config): config_hash(task.config) for task in tasks}  # one hash per point, not per cell
    for task in tasks:
        expected = hashes[id(task.config)]
        path = cells_dir / f"{task.cell_id}.json"
        saved, why = (None, None) if force else _saved_cell(path, expected, code, cell_numerics(task))
        if why is not None:
            edited.append(task.cell_id)
            print(f"{experiment.slug}: saved cell {path} was {why}: recomputing it", file=sys.stderr)
        if saved is None:
            pending.append(task)
        else:
            cells[task.cell_id] = saved
    workers = choose_jobs(jobs, len(pending), chosen.budget_s * len(pending) / max(len(tasks), 1))
    if pool is not None and workers > 1:  # a shared pool runs on its own workers
        workers = pool.jobs

    pending = order_cells_by_setup(experiment, pending)  # cells sharing a setup key run back to back

    def save(task: CellTask, cell: dict) -> None:
        cell["code_fingerprint"] = code
        cell["checksum"] = cell_checksum(cell)
        atomic_write_json(cells_dir / f"{task.cell_id}.json", cell)
        cells[task.cell_id] = cell

    started = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.perf_counter()
    with Heartbeat(experiment.slug, len(pending), chosen.budget_s, heartbeat_s) as beat:

        def save_and_count(task: CellTask, cell: dict) -> None:
            save(task, cell)
            beat.done += 1
            if on_cell is not None:
                on_cell(beat.done, len(pending))

        if executor == "ray":
            run_on_ray(execute_cell, pending, save_and_count)
        else:
            _execute_local(pending, experiment, save_and_count, experiment.slug, workers, pool)
    ordered = [cells[task.cell_id] for task in tasks]
    result = aggregate(experiment, chosen, ordered, base_config, n_seeds)
    result["run_info"].update(
        started=started,
        wall_s=time.perf_counter() - clock,
        executor=executor,
        resumed_cells=len(tasks) - len(pending),
        code_fingerprint=code,
        jobs=workers if executor == "local" else None,
        threads=threads,
        numeric=numeric_environment(
            threads=threads,
            deterministic=all(task.deterministic for task in tasks),
            jobs=workers if executor == "local" else None,
            executor=executor,
            device=device,
        ),
        edited_cells=edited,
        overrides=overrides,
        device=device,
        command=command,
    )
    result["meta_info"] = meta_info()
    atomic_write_json(out / "result.json", result)
    return result


def aggregate(
    experiment: Experiment, profile: Profile, cells: list[dict], base_config: Any, seeds: int
) -> dict:
    """Turn cells into the ``result.json`` payload: per-system summaries and claim verdicts."""
    systems: dict[str, dict] = {}
    for name in experiment.system_names(profile):
        points = []
        for point in profile.points():
            mine = [c for c in cells if c["system"] == name and c["point"] == point]
            values = {
                m.name: [c["metrics"].get(m.name) if c["status"] == "ok" else None for c in mine]
                for m in experiment.metrics
            }
            points.append(
                {
                    "point": point,
                    "seeds": [c["seed"] for c in mine],
                    "status": {state: sum(c["status"] == state for c in mine) for state in CELL_STATES},
                    "values": values,
                    "summary": {metric: summarize(vals) for metric, vals in values.items()},
                    "below_floor": system_floor_flags(experiment, name, cells, point),
                }
            )
        systems[name] = {"points": points}
    errors = [
        f"{c['system']} {point_key(c['point'])} seed {c['seed']}: {c['error']}"
        for c in cells
        if c["status"] in ("error", "nan")
    ]
    return {
        "schema": RESULT_SCHEMA,
        "run_info": {
            "slug": experiment.slug,
            "profile": profile.name,
            "seeds": seeds,
            "grid": {k: list(v) for k, v in profile.grid.items()},
            "config": config_to_dict(base_config),
            "config_hash": config_hash(base_config),
            "status": "ok" if not errors else "error",
            "errors": errors,
            "cell_status": {state: sum(c["status"] == state for c in cells) for state in CELL_STATES},
            "ours": experiment.ours,
            "pareto_x": experiment.pareto_x,
            "cells_wall_s": sum(c.get("wall_s") or 0.0 for c in cells),
            "setup_wall_s": sum(c.get("setup_s") or 0.0 for c in cells),
            "peak_rss_mb": max((c.get("peak_rss_mb") or 0.0 for c in cells), default=0.0),
        },
        "metrics": [asdict(m) for m in experiment.metrics],
        "systems": systems,
        "claims": [
            evaluate_claim(experiment, profile, claim, cells)
            for claim in experiment.claims
            if claim.judged_in(profile.name)
        ],
        "cells": [{k: v for k, v in c.items() if k != "schema"} for c in cells],
        "meta_info": {},
    }


KEPT_RUN_INFO = (
    "started",
    "wall_s",
    "executor",
    "resumed_cells",
    "code_fingerprint",
    "jobs",
    "threads",
    "numeric",
    "overrides",
    "device",
    "command",
)


def rejudge(experiment: Experiment, result: dict) -> dict:
    """Re-draw a saved result's claim verdicts from its stored cells under the experiment's current claims.

    For when only the claims changed (a control added, a margin's source restated): the cells must still
    carry the config hash the current code gives their point, and every system a claim names must have
    cells; otherwise ``ValueError`` says the run must be repeated. The run's timing and command are kept,
    and ``run_info["rejudged"]`` records when and why.
    """
    info = result["run_info"]
    if info.get("slug") != experiment.slug:
        raise ValueError(f"result is for {info.get('slug')!r}, not {experiment.slug!r}")
    profile = experiment.profile(info["profile"])
    overrides = dict(info.get("overrides") or {})
    cells = result["cells"]
    stale = sorted(
        {
            f"{c['system']} at {point_key(c['point'])}"
            for c in cells
            if c["config_hash"] != config_hash(experiment.config_for(profile, c["point"], overrides))
        }
    )
    if stale:
        raise ValueError(
            f"cells were run under another config ({', '.join(stale[:3])}, ...): rerun the profile"
        )
    present = {c["system"] for c in cells}
    named = {name for claim in experiment.claims for name in claim.systems()}
    named |= {floor for floor in experiment.floors.values() if isinstance(floor, str)}
    absent = sorted(named & set(experiment.system_names(profile)) - present)
    if absent:
        raise ValueError(f"no stored cells for {absent}: rerun the profile to measure them")
    base_config = experiment.config_for(profile, {}, overrides)
    fresh = aggregate(experiment, profile, cells, base_config, info["seeds"])
    fresh["run_info"].update({key: info[key] for key in KEPT_RUN_INFO if key in info})
    fresh["run_info"]["rejudged"] = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "reason": "claims re-drawn from the stored cells (the cells and their config hashes are unchanged)",
    }
    fresh["meta_info"] = result.get("meta_info", {})
    return fresh


def default_run_dir(profile: str = "default") -> Path:
    """``runs/<profile>``: one stable folder per profile, so rerunning an interrupted run resumes it."""
    return Path("runs") / profile


__all__ = [
    "EXECUTORS",
    "CellTask",
    "aggregate",
    "default_run_dir",
    "execute_cell",
    "load_experiment",
    "run_experiment",
]
