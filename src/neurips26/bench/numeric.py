"""The numeric environment every cell runs under: pinned threads, deterministic kernels, recorded.

A cell's non-timing values must depend on its config, seed and code only (issue #49), not on how many
workers ran beside it, the parent's ``OMP_NUM_THREADS`` or the order of the cells. Summation order is what
moves floating-point results between those settings, so each cell runs with

- ``threads`` (default 1) intra-op threads for torch *and* for the BLAS/OpenMP pools numpy and scipy use
  (through ``threadpoolctl``; ``torch.set_num_threads`` alone leaves OpenBLAS on every core);
- torch's deterministic algorithms (``warn_only=True``: an op without a deterministic kernel warns instead
  of failing the cell), and on CUDA the cuBLAS workspace setting those need;
- the seed of the cell (``seed_everything(seed)`` in ``execute_cell``): a function of the cell's seed
  alone, so of (slug, point, system, seed) only, never of the worker or the order. It is deliberately
  *not* mixed with the system or point: every system of a seed sees the same data and initial draws
  (common random numbers make the paired differences the claims test), and every published number was
  made under it (a new derivation would move them all).

``numeric_environment`` is what ``run_info["numeric"]`` records, so two results can be compared knowing
whether they were made under the same settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# keys of ``numeric_environment`` that may change values; a comparison warns when two results differ in one
NUMERIC_KEYS = ("threads", "deterministic", "torch", "numpy", "scipy", "blas", "device")


@contextmanager
def pinned_numerics(threads: int = 1, deterministic: bool = True, device: str = "cpu") -> Iterator[None]:
    """Run the block on ``threads`` torch/BLAS/OpenMP threads with deterministic torch kernels; restore after.

    Raises ``ValueError`` for ``threads`` < 1.
    """
    import torch
    from threadpoolctl import threadpool_limits

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    if device == "cuda":  # cuBLAS is deterministic only with a fixed workspace, set before its first use
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    previous_threads = torch.get_num_threads()
    previous_mode = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    with threadpool_limits(limits=threads):
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(previous_mode[0], warn_only=previous_mode[1])
            torch.set_num_threads(previous_threads)


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def blas_libraries() -> list[str]:
    """The BLAS/OpenMP libraries loaded in this process, as ``api version`` (e.g. ``openblas 0.3.27``)."""
    from threadpoolctl import threadpool_info

    return sorted({f"{pool.get('internal_api')} {pool.get('version')}" for pool in threadpool_info()})


def numeric_environment(
    *, threads: int, deterministic: bool, jobs: int | None, executor: str, device: str
) -> dict[str, Any]:
    """What a run's numbers were made under: threads per cell, workers, executor and library versions."""
    import numpy  # noqa: F401 -- loaded, with scipy's, so that ``blas`` lists the same libraries every run
    import scipy.linalg  # noqa: F401
    import torch

    return {
        "threads": threads,
        "deterministic": deterministic,
        "jobs": jobs,
        "executor": executor,
        "device": device,
        "cpu_count": os.cpu_count(),
        "parent_omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch": torch.__version__,
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "blas": blas_libraries(),
    }
