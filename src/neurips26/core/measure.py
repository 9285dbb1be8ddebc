"""Wall time and peak memory of a piece of work."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@dataclass
class Measurement:
    seconds: float = 0.0
    peak_rss_mb: float = 0.0


@contextmanager
def measured() -> Iterator[Measurement]:
    """Time the block and record the process's peak RSS after it."""
    result = Measurement()
    start = time.perf_counter()
    try:
        yield result
    finally:
        result.seconds = time.perf_counter() - start
        result.peak_rss_mb = peak_rss_mb()
