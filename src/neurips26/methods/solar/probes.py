"""SOLAR's hardware probes: what this machine's caches hold and how fast it multiplies and moves data.

Small timed measurements and sysfs/procfs reads, used by ``hardware.calibrate``; kept apart so the
hardware model (specs, files, calibration policy) reads on its own.
"""

from __future__ import annotations

import glob
import time
from pathlib import Path
from typing import Any


def read_cache_bytes(sysfs: str = "/sys/devices/system/cpu") -> int:
    """Sum of the data/unified caches of every core from sysfs (shared caches counted once).

    Counting every level of every core gives the largest on-chip capacity, so the cache-aware bound built on
    it stays a lower bound. Falls back to 32 MiB when sysfs has no cache entries.
    """
    seen: set[tuple[str, str]] = set()
    total = 0
    for index in sorted(glob.glob(f"{sysfs}/cpu[0-9]*/cache/index[0-9]*")):
        try:
            kind = Path(index, "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = Path(index, "level").read_text().strip()
            shared = Path(index, "shared_cpu_list").read_text().strip()
            size = Path(index, "size").read_text().strip()
        except OSError:
            continue
        key = (level, shared)
        if key in seen:
            continue
        seen.add(key)
        total += _parse_size(size)
    return total or 32 * 2**20


def _parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def _best_seconds(fn: Any, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure_gemm_flops(dtype: Any = None, n: int = 1024, reps: int = 5) -> float:
    """Best FLOP/s of an ``n x n x n`` torch.mm over ``reps`` runs (2 FLOPs per MAC)."""
    import torch

    dtype = dtype or torch.float32
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    return 2.0 * n**3 / _best_seconds(lambda: torch.mm(a, b), reps)


def measure_dram_bandwidth(nbytes: int = 256 * 2**20, reps: int = 5) -> float:
    """Best bytes/s over a copy (read+write), a read-only sum and a write-only fill of ``nbytes`` arrays."""
    import torch

    n = nbytes // 4
    a = torch.ones(n)
    b = torch.empty(n)
    copy = 2 * nbytes / _best_seconds(lambda: b.copy_(a), reps)
    read = nbytes / _best_seconds(lambda: a.sum(), reps)
    write = nbytes / _best_seconds(lambda: b.fill_(1.0), reps)
    return max(copy, read, write)


def theoretical_cpu_flops(
    threads: int, boost: float = 1.5, cpuinfo: str = "/proc/cpuinfo"
) -> dict[str, float]:
    """An upper estimate of the FLOP/s ``threads`` cores can reach, from ``/proc/cpuinfo``.

    ``threads x 2 FMA units x lanes x 2 FLOPs x (cpu MHz x boost)`` with lanes from the widest ISA flag
    (AVX-512: 16 fp32, AVX2: 8, else 4). VMs hide the maximum frequency, so the current MHz times ``boost``
    stands in for it; two FMA units is the most current x86 cores have. bf16 doubles fp32 (AMX: x16).
    """
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return {}
    mhz = [float(line.split(":")[1]) for line in text.splitlines() if line.startswith("cpu MHz")]
    flags_line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    flags = set(flags_line.split(":")[1].split()) if ":" in flags_line else set()
    if not mhz:
        return {}
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    fp32 = threads * 2 * lanes * 2 * max(mhz) * 1e6 * boost
    bf16 = fp32 * (16 if "amx_bf16" in flags else 2)
    return {"float32": fp32, "float64": fp32 / 2, "bfloat16": bf16, "float16": bf16}
