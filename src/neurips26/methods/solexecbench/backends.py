"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — backends.

Harness-side choices that depend on the host: which device the evaluation runs on, which timer measures
it, how large the cache flush is, and whether (and how) a solution's language can run here. Each is a pure
function of what the host offers, so the selection logic is tested on a CPU-only machine; the driver only
executes what these functions decided.

- device: ``cpu``, ``cuda``/``cuda:N`` or ``auto`` (the first CUDA device when there is one).
- timer: ``cpu`` (``perf_counter_ns``, 2x LLC flush), ``cuda_events`` (CUDA events, 2x L2 flush) or
  ``cupti`` (kernel spans from CUPTI's activity records, upstream's default) — ``auto`` picks ``cupti``
  when ``cupti-python`` imports, else ``cuda_events``, on a CUDA device; ``cpu`` otherwise.
- languages: ``pytorch`` everywhere; ``cpp`` on CPU; ``triton`` on CUDA, or under Triton's interpreter on
  CPU (numerics only, timings not meaningful); ``cuda_cpp`` on CUDA with ``nvcc``. Anything else ends as
  ``COMPILE_ERROR`` with a message naming what is missing.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

DEVICES_HELP = "'cpu', 'cuda', 'cuda:N' or 'auto'"
TIMERS = ("auto", "cpu", "cuda_events", "cupti")
GPU_LANGUAGES = ("triton", "cuda_cpp")
CUDA_FLUSH_FALLBACK_BYTES = 256 * 2**20  #: twice the largest L2 we know of (B200: 126 MB)


def parse_device(device: str) -> tuple[str, int | None]:
    """``("cpu", None)``, ``("auto", None)`` or ``("cuda", index)``; a clear error for anything else."""
    text = device.strip().lower() if isinstance(device, str) else device
    if text in ("cpu", "auto"):
        return text, None
    if text == "cuda":
        return "cuda", 0
    if isinstance(text, str) and text.startswith("cuda:") and text[5:].isdigit():
        return "cuda", int(text[5:])
    raise ValueError(f"device={device!r}; choose {DEVICES_HELP}")


def resolve_device(device: str, cuda_available: bool, device_count: int) -> str:
    """The device an evaluation runs on: ``cpu`` or ``cuda:N`` (``auto`` = ``cuda:0`` when CUDA is up)."""
    kind, index = parse_device(device)
    if kind == "auto":
        return "cuda:0" if cuda_available and device_count > 0 else "cpu"
    if kind == "cpu":
        return "cpu"
    if not cuda_available or device_count == 0:
        raise ValueError(f"device={device!r} but CUDA is not available on this host (torch.cuda)")
    if index >= device_count:
        raise ValueError(f"device={device!r} but this host has {device_count} CUDA device(s)")
    return f"cuda:{index}"


def select_timer(device: str, requested: str, cupti_importable: bool) -> str:
    """The timing backend for ``device`` (resolved): ``auto`` prefers CUPTI, then CUDA events, on CUDA."""
    if requested not in TIMERS:
        raise ValueError(f"timer={requested!r}; choose one of {list(TIMERS)}")
    on_cuda = device.startswith("cuda")
    if requested == "auto":
        if not on_cuda:
            return "cpu"
        return "cupti" if cupti_importable else "cuda_events"
    if requested == "cpu" and on_cuda:
        raise ValueError("timer='cpu' cannot time CUDA kernels (launches are asynchronous); use 'auto'")
    if requested in ("cuda_events", "cupti") and not on_cuda:
        raise ValueError(f"timer={requested!r} needs a CUDA device, but device is {device!r}")
    if requested == "cupti" and not cupti_importable:
        raise ValueError("timer='cupti' but `import cupti` fails; install cupti-python or use 'auto'")
    return requested


def cupti_importable() -> bool:
    """True when ``cupti-python`` is installed (``import cupti`` would find it)."""
    return importlib.util.find_spec("cupti") is not None


def cuda_flush_bytes(l2_bytes: int) -> int:
    """Bytes zeroed before each timed call on CUDA: twice the L2 (upstream), 256 MiB if the L2 is unknown."""
    if isinstance(l2_bytes, bool) or not isinstance(l2_bytes, int) or l2_bytes < 0:
        raise ValueError(f"l2_bytes must be a non-negative integer, got {l2_bytes!r}")
    return 2 * l2_bytes if l2_bytes > 0 else CUDA_FLUSH_FALLBACK_BYTES


def visible_device(index: int, parent_visible: str | None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value that shows the sandbox exactly the harness's ``cuda:index``.

    ``index`` counts the devices the harness itself sees, so under a parent mask (``"2,3"``) ``cuda:1`` is
    physical device ``3``; inside the sandbox it is always ``cuda:0``.
    """
    if parent_visible is None or not parent_visible.strip():
        return str(index)
    entries = [entry.strip() for entry in parent_visible.split(",") if entry.strip()]
    if index >= len(entries):
        raise ValueError(f"cuda:{index} is not among CUDA_VISIBLE_DEVICES={parent_visible!r}")
    return entries[index]


@dataclass(frozen=True)
class LanguagePlan:
    """How a language runs here: ``runnable``, or the status and message that reject it."""

    runnable: bool
    status: str | None = None
    message: str = ""
    interpret: bool = False  # triton under TRITON_INTERPRET=1 (CPU tensors, numerics only)


def language_plan(
    language: str,
    device: str,
    *,
    triton_importable: bool,
    nvcc: str | None,
    triton_interpreter: bool,
) -> LanguagePlan:
    """Whether ``language`` can run on ``device`` (resolved), and how; a rejection names what is missing."""
    on_cuda = device.startswith("cuda")
    if language == "pytorch":
        return LanguagePlan(True)
    if language == "cpp":
        if on_cuda:
            return LanguagePlan(False, "COMPILE_ERROR", "language 'cpp' is CPU-only; this run uses " + device)
        return LanguagePlan(True)
    if language == "triton":
        if not triton_importable:
            return LanguagePlan(
                False, "COMPILE_ERROR", "language 'triton' needs `triton`, which is not installed"
            )
        if on_cuda:
            return LanguagePlan(True)
        if triton_interpreter:
            return LanguagePlan(True, interpret=True)
        return LanguagePlan(
            False,
            "COMPILE_ERROR",
            "language 'triton' needs CUDA: this run's device is 'cpu' (no CUDA, or device='cpu');"
            " set triton_interpreter=True to check numerics under TRITON_INTERPRET=1",
        )
    if language == "cuda_cpp":
        if not on_cuda:
            return LanguagePlan(
                False,
                "COMPILE_ERROR",
                "language 'cuda_cpp' needs CUDA: this run's device is 'cpu' (no CUDA, or device='cpu')",
            )
        if nvcc is None:
            return LanguagePlan(
                False, "COMPILE_ERROR", "language 'cuda_cpp' needs nvcc (CUDA_HOME unset or nvcc not found)"
            )
        return LanguagePlan(True)
    return LanguagePlan(
        False,
        "COMPILE_ERROR",
        f"language {language!r} is not supported by this harness (pytorch, cpp, triton, cuda_cpp)",
    )


def find_nvcc() -> str | None:
    """``nvcc`` from torch's ``CUDA_HOME`` (what ``cpp_extension`` would use), or None."""
    try:
        from torch.utils.cpp_extension import CUDA_HOME
    except ImportError:  # pragma: no cover - torch always ships cpp_extension
        return None
    if CUDA_HOME is None:
        return None
    path = os.path.join(CUDA_HOME, "bin", "nvcc")
    return path if os.path.exists(path) else None


def host_device(device: str) -> str:
    """``device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``) resolved against this host's CUDA devices."""
    import torch

    available = device != "cpu" and torch.cuda.is_available()
    return resolve_device(device, available, torch.cuda.device_count() if available else 0)


def sandbox_cuda_visible(device: str) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` a sandbox for ``device`` (resolved) gets: None (no GPU) on CPU."""
    if not device.startswith("cuda"):
        return None
    return visible_device(int(device.split(":")[1]), os.environ.get("CUDA_VISIBLE_DEVICES"))


def gpu_hardware_name(device_name: str, known: list[str] | None = None) -> str:
    """The packaged datasheet spec whose name appears in ``device_name`` ("NVIDIA H200" -> "H200");
    a clear error when none does (pass ``hardware=`` explicitly then)."""
    from neurips26.methods.solar import known_hardware

    names = known if known is not None else known_hardware()
    text = device_name.upper().replace(" ", "-")
    # longest first, so "H100-SXM" wins over a shorter name it contains
    matches = [name for name in sorted(names, key=len, reverse=True) if name.upper().split("-")[0] in text]
    if not matches:
        raise ValueError(
            f"no solar hardware spec matches the GPU {device_name!r}; pass hardware= (known: {sorted(names)})"
        )
    return matches[0]
