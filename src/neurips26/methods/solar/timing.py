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
from dataclasses import dataclass
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


def measured_timing(program: Any, config: Any, cold: bool) -> tuple[float, float]:
    """Median time of ``program`` (eager PyTorch, or ``jax.jit`` after one compiling call) and the noise
    band of its repeated identical runs (:func:`~neurips26.methods.solar.timing.noise_band`)."""
    torch.set_num_threads(config.threads)
    fn, inputs = program.build()
    if program.framework == "jax":
        import jax

        jitted = jax.jit(fn)
        jax.block_until_ready(jitted(*inputs))  # compile outside the timed calls

        def call() -> Any:
            return jax.block_until_ready(jitted(*inputs))
    else:

        def call() -> Any:
            return fn(*inputs)

    flusher = CacheFlusher(config.flush_factor) if cold else None
    samples = measure_samples(call, config.reps, config.warmup, cold, flusher)
    return statistics.median(samples), noise_band(samples)


@dataclass(frozen=True)
class Timing:
    """One program's measured times: cold median, its noise band, warm median."""

    cold: float
    band: float
    warm: float


def time_programs(programs: list[Any], config: Any) -> dict[str, Timing]:
    """Each program (``build() -> (fn, inputs)``, ``framework``) timed cold and warm under the config's
    ``reps``, ``warmup``, ``flush_factor`` and ``threads``, by name."""
    timings = {}
    for program in programs:
        cold, band = measured_timing(program, config, cold=True)
        timings[program.name] = Timing(cold, band, measured_timing(program, config, cold=False)[0])
    return timings
