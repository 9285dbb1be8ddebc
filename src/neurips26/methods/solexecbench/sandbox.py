"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — sandbox.

:class:`Sandbox` starts ``python -I driver.py`` (see :mod:`.driver`) with a scrubbed environment in a temp
dir, then sends it one request per evaluation; the driver forks a fresh child per request that runs under
rlimits (address space, CPU seconds, file size, no core files) and a wall timeout, in its own staging dir.
``isolation="spawn"`` starts a new interpreter per evaluation instead (slower: torch is imported each time).

Network isolation and the process-count limit are applied by the driver in each child (see
:mod:`.driver`). ``cuda_visible`` (a GPU run) is the one CUDA device the driver may see: the scrubbed
environment then sets ``CUDA_VISIBLE_DEVICES`` to it instead of ``""`` and passes ``LD_LIBRARY_PATH`` and
``CUDA_HOME`` through (the CUDA user-space libraries may live there); everything else stays scrubbed.

``allocator`` picks the evaluation processes' malloc: jemalloc (preloaded, where installed: Debian's
``libjemalloc2``), as PyTorch's CPU performance-tuning guide recommends, or glibc's. With glibc 2.36 a freed
block cannot serve the next aligned allocation of the same size (torch's tensors are 64-byte aligned), so a
reference's temporaries kept landing on never-touched pages and their page faults (up to half of a call,
swinging with the load) decided the timing: issue #44, README "Timing CV".
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Any

ISOLATIONS = ("fork", "spawn")
ALLOCATORS = ("auto", "jemalloc", "glibc")
# jemalloc keeps the pages it freed for the life of the process (never decays them back to the system), as
# the driver's glibc settings do (``steady_allocator``): a timed call never faults on pages it freed before
JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
_JEMALLOC_PATHS = tuple(
    f"{folder}/libjemalloc.so.2"
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/lib")
)
START_TIMEOUT_S = 120.0


def find_jemalloc() -> str | None:
    """The installed jemalloc library (a path, or a name the loader finds), or None."""
    for path in _JEMALLOC_PATHS:
        if os.path.exists(path):
            return path
    return ctypes.util.find_library("jemalloc")


def allocator_library(allocator: str) -> str | None:
    """The library to preload for ``allocator`` (None: glibc's malloc). ``auto`` is jemalloc where installed;
    asking for jemalloc where it is not is an error that says how to install it."""
    if allocator not in ALLOCATORS:
        raise ValueError(f"allocator={allocator!r}; choose one of {ALLOCATORS}")
    if allocator == "glibc":
        return None
    library = find_jemalloc()
    if library is None and allocator == "jemalloc":
        raise ValueError(
            "allocator='jemalloc' but no jemalloc library is installed (Debian/Ubuntu: apt-get install "
            "libjemalloc2); use allocator='auto' to fall back to glibc's malloc"
        )
    return library


def scrubbed_environment(
    threads: int, home: str, cuda_visible: str | None = None, preload: str | None = None
) -> dict[str, str]:
    """The only variables the driver sees: a minimal PATH, fixed thread counts, a private HOME/TMPDIR, no
    CUDA device unless ``cuda_visible`` names the one a GPU run may use, and the allocator ``preload``."""
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "" if cuda_visible is None else cuda_visible,
    }
    if preload is not None:
        environment.update(LD_PRELOAD=preload, MALLOC_CONF=JEMALLOC_CONF)
    if cuda_visible is not None:
        for name in ("LD_LIBRARY_PATH", "CUDA_HOME"):
            if os.environ.get(name):
                environment[name] = os.environ[name]
        if environment.get("CUDA_HOME"):  # nvcc for cuda_cpp builds
            environment["PATH"] = os.path.join(environment["CUDA_HOME"], "bin") + ":" + environment["PATH"]
    return environment


class SandboxError(RuntimeError):
    """The driver process could not be started or stopped answering."""


class Sandbox:
    """A driver process that evaluates requests in fresh forked children.

    Use as a context manager: ``with Sandbox(threads=1) as box: box.evaluate(request)``. ``python`` is the
    interpreter the driver runs under (default: this one's); it needs torch.
    """

    def __init__(
        self,
        threads: int = 1,
        isolation: str = "fork",
        cuda_visible: str | None = None,
        python: str | None = None,
        allocator: str = "auto",
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation={isolation!r}; choose one of {ISOLATIONS}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        self.threads = threads
        self.isolation = isolation
        self.cuda_visible = cuda_visible
        self.preload = allocator_library(allocator)
        self.python = python or sys.executable  # the interpreter the driver runs under
        if not os.access(self.python, os.X_OK):
            raise ValueError(f"python={self.python!r} is not an executable interpreter")
        self.root = Path(tempfile.mkdtemp(prefix="solexecbench-"))
        # 0711: a child that dropped root (see the driver) can reach its own staging dir by path and the
        # built extensions, but cannot list the root (staging dirs have random names and are 0700)
        os.chmod(self.root, 0o711)
        self.driver_path = self.root / "driver.py"
        source = resources.files(__package__).joinpath("driver.py").read_text()
        self.driver_path.write_text(source)
        self.process: subprocess.Popen[str] | None = None
        self.evaluations = 0
        self.interpreters = 0

    # -- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def allocator(self) -> str:
        """The evaluation processes' malloc: ``jemalloc`` or ``glibc``."""
        return "glibc" if self.preload is None else "jemalloc"

    def environment(self, home: str) -> dict[str, str]:
        """The driver's (and the compile step's) environment."""
        return scrubbed_environment(self.threads, home, self.cuda_visible, self.preload)

    def _start(self) -> subprocess.Popen[str]:
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        process = subprocess.Popen(
            [self.python, "-I", str(self.driver_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.root,
            env=self.environment(str(home)),
            text=True,
        )
        self.interpreters += 1
        ready = self._read_line(process, START_TIMEOUT_S)
        if not ready or not json.loads(ready).get("ready"):
            process.kill()
            raise SandboxError("the sandbox driver did not start")
        return process

    def close(self) -> None:
        if self.process is not None:
            self._stop(self.process)
            self.process = None
        shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def _stop(process: subprocess.Popen[str]) -> None:
        try:
            if process.stdin:
                process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    @staticmethod
    def _read_line(process: subprocess.Popen[str], timeout: float) -> str | None:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return box[0] if box and box[0] else None

    # -- evaluation -----------------------------------------------------------------------------------
    def stage(self, sources: dict[str, str]) -> Path:
        """A fresh staging dir holding the solution's sources (paths were checked by the schema)."""
        staging = Path(tempfile.mkdtemp(prefix="stage-", dir=self.root))
        for relative, content in sources.items():
            target = (staging / relative).resolve()
            if staging.resolve() not in target.parents:
                raise ValueError(f"sources path {relative!r} leaves the staging dir")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        return staging

    def evaluate(self, request: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
        """Stage ``sources``, run ``request`` in a fresh child, return the driver's answer."""
        staging = self.stage(sources)
        request = {**request, "staging": str(staging)}
        timeout = float(request["settings"]["timeout_s"]) + 60.0
        try:
            if self.process is None or self.process.poll() is not None:
                self.process = self._start()
            process = self.process
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = self._read_line(process, timeout)
            if line is None:
                process.kill()
                self.process = None
                raise SandboxError("the sandbox driver stopped answering")
            answer = json.loads(line)
            log_file = staging / ".driver.log"
            answer["driver_log"] = log_file.read_text(errors="replace")[-4000:] if log_file.exists() else ""
            self.evaluations += 1
            return answer
        finally:
            if self.isolation == "spawn" and self.process is not None:
                self._stop(self.process)
                self.process = None
            shutil.rmtree(staging, ignore_errors=True)


def sandbox_root_is_private(box: Sandbox) -> bool:
    """True when only the owner may list or write the sandbox root (others may only traverse it)."""
    return (os.stat(box.root).st_mode & 0o066) == 0
