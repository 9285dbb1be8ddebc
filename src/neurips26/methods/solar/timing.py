"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — cold- and warm-cache CPU timing.

A bound that assumes inputs come from DRAM must be compared with a **cold-cache** time: before every timed
call a buffer of ``flush_factor x`` the last-level cache is read and written, evicting the program's data
(research notes §1.5: a warm 1 MB add ran at 0.41x its DRAM bound here). The median over ``reps`` is kept.
Shared with ``solexecbench``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from neurips26.methods.solar.hardware import read_cache_bytes


class CacheFlusher:
    """Reads and writes a buffer of ``factor x`` the on-chip cache size to evict everything else."""

    def __init__(self, factor: float = 2.0, cache_bytes: int | None = None) -> None:
        if not factor >= 1.0:
            raise ValueError(f"flush factor must be >= 1, got {factor}")
        size = int(factor * (cache_bytes or read_cache_bytes())) // 4
        self.buffer = torch.zeros(size)

    def __call__(self) -> None:
        self.buffer.add_(1.0)


def measure_samples(
    fn: Callable[[], Any],
    reps: int = 5,
    warmup: int = 1,
    cold: bool = True,
    flusher: CacheFlusher | None = None,
) -> list[float]:
    """Wall time of each of ``reps`` calls of ``fn()``; ``cold`` flushes the caches before each call."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if cold and flusher is None:
        flusher = CacheFlusher()
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            if cold and flusher is not None:
                flusher()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return times


def measure_seconds(
    fn: Callable[[], Any],
    reps: int = 5,
    warmup: int = 1,
    cold: bool = True,
    flusher: CacheFlusher | None = None,
) -> float:
    """Median wall time of ``fn()`` over ``reps`` calls; ``cold`` flushes the caches before each call."""
    return statistics.median(measure_samples(fn, reps, warmup, cold, flusher))


def noise_band(samples: list[float]) -> float:
    """Relative spread of repeated identical runs: ``(q75 - q25) / median`` (0 for fewer than 4 runs).

    A measured median below a bound by less than this band is within the measurement's own noise."""
    if len(samples) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4)
    median = statistics.median(samples)
    return (q3 - q1) / median if median > 0 else 0.0
