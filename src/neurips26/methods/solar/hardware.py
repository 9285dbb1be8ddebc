"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the hardware model.

A :class:`HardwareSpec` holds the peaks a speed-of-light bound divides by: DRAM bandwidth (B/s), dense
FLOP/s per MAC-input dtype (one MAC = 2 FLOPs) and the on-chip capacity ``S`` (bytes) used by the
cache-aware bound. Public GPU specs ship as YAML package data (``hardware/*.yaml``, datasheet numbers);
``cpu-local`` is measured on this machine by :func:`calibrate_cpu_local` and labelled ``measured: true``.

Shared with ``solexecbench`` (issue #6): import :func:`load_hardware` from here, never copy it.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

_PACKAGE_DIR = "hardware"
_KEYS = ("name", "kind", "measured", "source", "dram_bandwidth_Bps", "onchip_bytes", "peak_flops", "notes")


@dataclass(frozen=True)
class HardwareSpec:
    """Peaks of one machine.

    Parameters
    ----------
    name: the spec's name, e.g. ``"H200"``.
    kind: ``"gpu"`` or ``"cpu"``.
    measured: True when the peaks were measured here (``cpu-local``), False for datasheet numbers.
    source: where the numbers come from.
    dram_bandwidth_Bps: off-chip bandwidth in bytes per second.
    onchip_bytes: on-chip capacity ``S`` in bytes (GPU L2; CPU L1+L2+L3 of all cores).
    peak_flops: dense FLOP/s keyed by torch dtype name of the MAC inputs (``"float32"``, ``"bfloat16"``...).
    notes: free text (e.g. the headroom factor applied to measured peaks).
    """

    name: str
    kind: str
    measured: bool
    source: str
    dram_bandwidth_Bps: float
    onchip_bytes: int
    peak_flops: dict[str, float] = field(default_factory=dict)
    notes: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("gpu", "cpu"):
            raise ValueError(f"HardwareSpec.kind must be 'gpu' or 'cpu', got {self.kind!r}")
        if not self.dram_bandwidth_Bps > 0:
            raise ValueError(f"HardwareSpec.dram_bandwidth_Bps must be > 0, got {self.dram_bandwidth_Bps}")
        if not self.onchip_bytes > 0:
            raise ValueError(f"HardwareSpec.onchip_bytes must be > 0, got {self.onchip_bytes}")
        if not self.peak_flops:
            raise ValueError("HardwareSpec.peak_flops must name at least one dtype")
        for dtype, rate in self.peak_flops.items():
            if not rate > 0:
                raise ValueError(f"HardwareSpec.peak_flops[{dtype!r}] must be > 0, got {rate}")

    def flops_rate(self, dtype: str) -> float:
        """FLOP/s for MACs whose inputs have ``dtype``.

        A dtype the spec does not list falls back to bf16<->fp16, then to the largest listed rate: a
        faster-than-real rate only loosens the bound, so it stays a lower bound.
        """
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        sibling = {"bfloat16": "float16", "float16": "bfloat16"}.get(dtype)
        if sibling in self.peak_flops:
            return self.peak_flops[sibling]
        return max(self.peak_flops.values())

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where the fastest listed compute rate meets the bandwidth."""
        return max(self.peak_flops.values()) / self.dram_bandwidth_Bps

    def scaled(self, compute: float, bandwidth: float, name: str | None = None) -> HardwareSpec:
        """A copy with every FLOP rate times ``compute`` and the bandwidth times ``bandwidth``."""
        return dataclasses.replace(
            self,
            name=name or f"{self.name}-scaled",
            peak_flops={k: v * compute for k, v in self.peak_flops.items()},
            dram_bandwidth_Bps=self.dram_bandwidth_Bps * bandwidth,
            notes=f"{self.name} with compute x{compute:.4g}, bandwidth x{bandwidth:.4g}",
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareSpec:
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise ValueError(f"hardware spec has unknown keys {unknown}; allowed: {list(_KEYS)}")
        missing = [k for k in _KEYS[:-1] if k not in data]
        if missing:
            raise ValueError(f"hardware spec is missing keys {missing}")
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            measured=bool(data["measured"]),
            source=str(data["source"]),
            dram_bandwidth_Bps=float(data["dram_bandwidth_Bps"]),
            onchip_bytes=int(data["onchip_bytes"]),
            peak_flops={str(k): float(v) for k, v in data["peak_flops"].items()},
            notes=str(data.get("notes", "")),
        )


def save_hardware(spec: HardwareSpec, path: str | os.PathLike[str]) -> Path:
    """Write ``spec`` as YAML (atomically: a temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    tmp.replace(path)
    return path


def load_hardware_file(path: str | os.PathLike[str]) -> HardwareSpec:
    """Read one YAML spec."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"hardware file {path} must hold a mapping, got {type(data).__name__}")
    return HardwareSpec.from_dict(data)


def user_hardware_dir() -> Path:
    """Where ``calibrate`` writes ``cpu-local.yaml`` (``$NEURIPS26_SOLAR_HW``, else ``~/.cache/...``)."""
    return Path(os.environ.get("NEURIPS26_SOLAR_HW", Path.home() / ".cache" / "neurips26" / "solar"))


def _packaged_specs() -> dict[str, HardwareSpec]:
    specs = {}
    for entry in resources.files(__package__).joinpath(_PACKAGE_DIR).iterdir():
        if entry.name.endswith(".yaml"):
            spec = HardwareSpec.from_dict(yaml.safe_load(entry.read_text()))
            specs[spec.name] = spec
    return specs


def known_hardware() -> list[str]:
    """Names :func:`load_hardware` accepts: packaged datasheet specs, ``cpu-local`` and user YAMLs."""
    names = set(_packaged_specs()) | {"cpu-local"}
    names |= {Path(p).stem for p in glob.glob(str(user_hardware_dir() / "*.yaml"))}
    return sorted(names)


def load_hardware(hw: str | HardwareSpec | os.PathLike[str]) -> HardwareSpec:
    """Resolve a spec name, a YAML path or a :class:`HardwareSpec`.

    ``"cpu-local"`` reads the calibrated file if one exists, else measures now (a few seconds) and saves.
    An unknown name raises ``ValueError`` listing the known ones.
    """
    if isinstance(hw, HardwareSpec):
        return hw
    if not isinstance(hw, (str, os.PathLike)):
        raise TypeError(f"hw must be a spec name, a YAML path or a HardwareSpec, got {type(hw).__name__}")
    text = str(hw)
    if text.endswith((".yaml", ".yml")) and Path(text).exists():
        return load_hardware_file(text)
    packaged = _packaged_specs()
    if text in packaged:
        return packaged[text]
    user_file = user_hardware_dir() / f"{text}.yaml"
    if user_file.exists():
        return load_hardware_file(user_file)
    if text == "cpu-local":
        spec = calibrate_cpu_local()
        save_hardware(spec, user_file)
        return spec
    raise ValueError(f"hw={text!r} is not a known hardware spec; known: {known_hardware()} (or a .yaml path)")


# ---------------------------------------------------------------------------------------------------------
# cpu-local calibration
# ---------------------------------------------------------------------------------------------------------


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


def calibrate_cpu_local(
    headroom: float = 1.5, gemm_n: int = 1024, copy_bytes: int = 256 * 2**20, boost: float = 1.5
) -> HardwareSpec:
    """Measure this machine's peaks with torch's thread setting and return a ``cpu-local`` spec.

    Compute peak per dtype: ``max(theoretical (see theoretical_cpu_flops), headroom x measured GEMM)``;
    bandwidth: ``headroom x`` the best of copy/read/write (no datasheet exists for a VM's DRAM). On a
    shared machine measured kernels run below the true peak, and a bound divided by too low a peak is
    not a lower bound (our first run here had conv kernels beat ``1.25 x`` the measured GEMM rate).
    """
    import torch

    if not headroom >= 1.0:
        raise ValueError(f"headroom must be >= 1 (it inflates measured peaks), got {headroom}")
    threads = torch.get_num_threads()
    fp32 = max(measure_gemm_flops(torch.float32, n) for n in (256, 512, gemm_n))
    fp64 = measure_gemm_flops(torch.float64, gemm_n // 2)
    bandwidth = measure_dram_bandwidth(copy_bytes)
    theory = theoretical_cpu_flops(threads, boost)
    measured = {"float32": fp32, "float64": max(fp64, fp32 / 2), "bfloat16": 2 * fp32, "float16": 2 * fp32}
    peaks = {k: max(theory.get(k, 0.0), headroom * v) for k, v in measured.items()}
    return HardwareSpec(
        name="cpu-local",
        kind="cpu",
        measured=True,
        source=(
            "measured by neurips26.methods.solar.calibrate_cpu_local: torch.mm fp32 "
            f"(best of 256/512/{gemm_n}), "
            f"copy/sum/fill of {copy_bytes // 2**20} MiB, {threads} torch thread(s); caches from sysfs"
        ),
        dram_bandwidth_Bps=bandwidth * headroom,
        onchip_bytes=read_cache_bytes(),
        peak_flops=peaks,
        notes=(
            f"measured fp32 GEMM {fp32 / 1e9:.1f} GFLOP/s, bandwidth {bandwidth / 1e9:.1f} GB/s; peaks = "
            f"max(ISA estimate at {boost}x cpu MHz, {headroom}x measured); threads={threads}"
        ),
    )
