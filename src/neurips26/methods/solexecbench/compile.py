"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — C++ build.

The ``cpp`` language (CPU): the ``.cpp`` sources define ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``
and the entry point ``kernel.cpp::run`` names a bound function. :func:`build_cpp_extension` compiles them with
``torch.utils.cpp_extension.load`` (g++ and ninja) in a **separate** ``python -I`` subprocess with a scrubbed
environment and its own timeout, before any evaluation; the driver then imports the built ``.so`` by path.
Builds are cached by source hash for the life of the sandbox.

The ``cuda_cpp`` language goes through the same step with ``cuda=True``: ``.cu`` sources are compiled by
``nvcc`` (``compile_options.cuda_cflags``, default ``-O3 --use_fast_math``) for the architecture of the
evaluation GPU only (``TORCH_CUDA_ARCH_LIST``, so a build does not target every architecture), linked with
``compile_options.ld_flags`` (default ``-lcuda``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from neurips26.methods.solexecbench.schema import Solution

_BUILD_SCRIPT = """
import json, sys
from torch.utils.cpp_extension import load
request = json.loads(sys.argv[1])
module = load(name=request["name"], sources=request["sources"], build_directory=request["build"],
              extra_cflags=request["cflags"], extra_cuda_cflags=request["cuda_cflags"],
              extra_ldflags=request["ldflags"], with_cuda=request["cuda"], verbose=False)
print(json.dumps({"path": module.__file__}))
"""


@dataclass(frozen=True)
class BuildResult:
    """``path`` of the built extension, or ``status`` (COMPILE_ERROR / TIMEOUT) and the log."""

    path: str | None
    module: str
    status: str | None = None
    log: str = ""


CPP_SUFFIXES = (".cpp", ".cc", ".cxx")
CUDA_SUFFIXES = (".cu",)


def build_cpp_extension(
    solution: Solution,
    root: Path,
    environment: dict[str, str],
    timeout_s: float = 300.0,
    cuda: bool = False,
) -> BuildResult:
    """Compile ``solution``'s C++ (and, with ``cuda``, CUDA) sources under ``root`` (cached by hash)."""
    digest = hashlib.sha256(
        json.dumps([solution.spec.model_dump(), [s.model_dump() for s in solution.sources]]).encode()
    ).hexdigest()[:16]
    module = f"solexecbench_{digest}"
    folder = root / f"build-{digest}"
    marker = folder / "built.json"
    if marker.exists():
        return BuildResult(json.loads(marker.read_text())["path"], module)
    folder.mkdir(parents=True, exist_ok=True)
    sources = []
    for source in solution.sources:
        target = folder / "src" / source.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.content)
        if source.path.endswith(CPP_SUFFIXES + (CUDA_SUFFIXES if cuda else ())):
            sources.append(str(target))
    if not sources:
        suffixes = CPP_SUFFIXES + (CUDA_SUFFIXES if cuda else ())
        return BuildResult(None, module, "COMPILE_ERROR", f"no source file ends with {list(suffixes)}")
    options = solution.spec.compile_options
    ldflags = list(options.ld_flags) if options else (["-lcuda"] if cuda else [])
    request = {
        "name": module,
        "sources": sources,
        "build": str(folder),
        "cflags": (options.cflags if options and options.cflags else ["-O3"]),
        "cuda_cflags": (options.cuda_cflags if options else ["-O3", "--use_fast_math"]) if cuda else [],
        "ldflags": ldflags if cuda else [f for f in ldflags if f != "-lcuda"],
        "cuda": cuda,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _BUILD_SCRIPT, json.dumps(request)],
            cwd=folder,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return BuildResult(None, module, "TIMEOUT", f"compile step exceeded {timeout_s} s")
    if done.returncode != 0:
        return BuildResult(None, module, "COMPILE_ERROR", (done.stderr or done.stdout)[-3000:])
    path = json.loads(done.stdout.strip().splitlines()[-1])["path"]
    marker.write_text(json.dumps({"path": path}))
    return BuildResult(path, module)
