"""Worker processes of the local executor, and how many a run gets by default.

A spawned worker pays a fixed start-up (a fresh interpreter imports torch and the method: seconds, more on a
loaded machine) before its first cell. Measured on the toy and smoke profiles (``benchmarks/bench_jobs.py``),
a fresh two-worker pool per method made a small run about 2.7x slower than one process. So:

- ``choose_jobs`` runs a method in-process when its pending work is short (``PARALLEL_MIN_S`` of budget) or
  has one cell, and otherwise uses up to one worker per core (never more workers than cores: each cell
  runs on its own pinned threads, see ``neurips26.bench.numeric``);
- ``CellPool`` is one spawn pool that every method of a ``neurips26 run`` shares, so the start-up is paid
  once per run, not once per method.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any

AUTO = "auto"
# Below this much estimated one-worker time, a pool's start-up costs more than the second worker saves.
PARALLEL_MIN_S = 60.0


def choose_jobs(
    jobs: int | str, pending_cells: int, pending_budget_s: float, cores: int | None = None
) -> int:
    """The worker count for a method: ``jobs`` when given as a number, else the ``auto`` rule above.

    Raises ``ValueError`` when ``jobs`` is neither a positive integer nor ``"auto"``.
    """
    if jobs == AUTO:
        cores = cores or os.cpu_count() or 1
        if pending_cells <= 1 or pending_budget_s < PARALLEL_MIN_S:
            return 1
        return max(1, min(cores, pending_cells))
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer or {AUTO!r}, got {jobs!r}")
    return jobs


class CellPool:
    """A lazily started spawn pool of ``jobs`` workers, reusable across methods; a context manager.

    spawn, not fork: forking a process that has started torch's (or JAX's) thread pools can deadlock.
    """

    def __init__(self, jobs: int) -> None:
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 2:
            raise ValueError(f"a CellPool needs jobs >= 2 (one job runs in-process), got {jobs!r}")
        self.jobs = jobs
        self._executor: ProcessPoolExecutor | None = None

    def _started(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context("spawn")
            self._executor = ProcessPoolExecutor(max_workers=self.jobs, mp_context=context)
        return self._executor

    def run(self, function: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """``(task, function(task))`` for each task, in the order they finish."""
        executor = self._started()
        futures: dict[Future, Any] = {executor.submit(function, task): task for task in tasks}
        for future in as_completed(futures):
            yield futures[future], future.result()

    def terminate(self) -> None:
        """Stop now (Ctrl-C, SIGTERM): queued tasks are dropped, running workers killed; restartable."""
        if self._executor is None:
            return
        workers = list((getattr(self._executor, "_processes", None) or {}).values())
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.terminate()
        self._executor = None

    def close(self) -> None:
        """Wait for the workers to exit."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> CellPool:
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.terminate()


def run_on_ray(
    function: Callable[[Any], Any], tasks: Iterable[Any], on_done: Callable[[Any, Any], None]
) -> None:
    """Run ``function`` on each task as a one-CPU Ray task (``RAY_ADDRESS`` names a cluster)."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("--executor ray needs the dist extra: pip install 'neurips26[dist]'") from exc
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    remote = ray.remote(num_cpus=1)(function)
    pending = {remote.remote(task): task for task in tasks}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            on_done(pending.pop(ref), ray.get(ref))
