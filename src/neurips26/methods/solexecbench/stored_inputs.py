"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — inputs.

Stored (safetensors) workload inputs.

The official workload format lets an input come from a file: ``{"type": "safetensors", "path": ...,
"tensor_key": ...}`` (FlashInfer-Bench's Workload schema: "relative path or URI of the .safetensors file",
"the key inside the safetensors container"). We accept **relative paths inside the problem directory
only**: no absolute path, no URI, no ``..``, and the resolved file (symlinks followed) must lie under the
problem directory — a workload file is as untrusted as a solution. :func:`check_stored_inputs` validates
path, key, dtype and shape when a problem is loaded (a :class:`FormatError` naming the workload and field);
:func:`stage_stored_inputs` reads the tensors in the harness (with ``safetensors``, never a hand-written
parser) and writes them, per workload, as one ``torch.save`` file the sandboxed driver loads with
``weights_only=True`` (tensors only). The driver gives every call a fresh copy (a unique pointer); their
values are the workload's, so the "fresh values per call" defence does not apply to these inputs.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any

from neurips26.methods.solexecbench.schema import Definition, FormatError, SafetensorsInput, Workload


def _stored(workload: Workload) -> dict[str, SafetensorsInput]:
    return {name: spec for name, spec in workload.inputs.items() if isinstance(spec, SafetensorsInput)}


def resolve_stored_path(path: str, problem_dir: Path, field: str) -> Path:
    """The file ``path`` names inside ``problem_dir``; a :class:`FormatError` naming ``field`` otherwise."""
    pure = PurePosixPath(path)
    if not path or "://" in path or pure.is_absolute() or "\\" in path:
        raise FormatError(f"{field}: {path!r} must be a relative path inside the problem directory")
    if ".." in pure.parts:
        raise FormatError(f"{field}: {path!r} must not contain '..'")
    root = problem_dir.resolve()
    target = (root / pure).resolve()
    if root not in target.parents:
        raise FormatError(f"{field}: {path!r} resolves outside the problem directory")
    if not target.is_file():
        raise FormatError(f"{field}: {path!r} not found in {root}")
    return target


def _safetensors():
    try:
        from safetensors import safe_open
    except ImportError:  # pragma: no cover - safetensors ships with the llm/quant extras
        message = "safetensors inputs need the `safetensors` package (pip install safetensors)"
        raise FormatError(message) from None
    return safe_open


def _read(target: Path, key: str, field: str):
    safe_open = _safetensors()
    try:
        with safe_open(str(target), framework="pt", device="cpu") as handle:
            keys = sorted(handle.keys())
            if key not in keys:
                raise FormatError(f"{field}: tensor_key {key!r} is not in {target.name} ({keys})")
            return handle.get_tensor(key)
    except FormatError:
        raise
    except Exception as error:  # a truncated or non-safetensors file
        raise FormatError(f"{field}: {target.name} is not a readable safetensors file ({error})") from None


def load_stored_inputs(
    definition: Definition, workload: Workload, problem_dir: Path | None
) -> dict[str, Any]:
    """``{input name: tensor}`` for ``workload``'s safetensors inputs, checked against ``definition``."""
    import torch

    stored = _stored(workload)
    if not stored:
        return {}
    prefix = f"workload {workload.uuid!r}"
    if problem_dir is None:
        raise FormatError(f"{prefix}: safetensors inputs need a problem directory (load_problem(dir))")
    axes = definition.resolve_axes(workload.axes)
    tensors = {}
    for name, spec in stored.items():
        field = f"{prefix} field 'inputs.{name}'"
        target = resolve_stored_path(spec.path, Path(problem_dir), field + ".path")
        tensor = _read(target, spec.tensor_key, field + ".tensor_key")
        declared = definition.inputs[name]
        if declared.shape is None:
            raise FormatError(f"{field}: the definition declares a Python scalar; use type 'scalar'")
        shape = [axes[a] for a in declared.shape]
        if list(tensor.shape) != shape:
            raise FormatError(f"{field}: stored shape {list(tensor.shape)} != {shape} at axes {axes}")
        if tensor.dtype != getattr(torch, declared.dtype):
            raise FormatError(f"{field}: stored dtype {tensor.dtype} != {declared.dtype}")
        tensors[name] = tensor.contiguous()
    return tensors


def check_stored_inputs(definition: Definition, workloads: list[Workload], problem_dir: Path) -> None:
    """Validate every safetensors input of ``workloads`` (path safety, key, dtype, shape)."""
    for workload in workloads:
        load_stored_inputs(definition, workload, problem_dir)


def stage_stored_inputs(
    definition: Definition, workloads: list[Workload], problem_dir: Path | None, sandbox_root: Path
) -> dict[str, str]:
    """``{uuid: path}`` of a ``torch.save`` file per workload with safetensors inputs, under the sandbox
    root (readable by the sandboxed child, named by content hash so repeated evaluations reuse it)."""
    import torch

    staged = {}
    for workload in workloads:
        tensors = load_stored_inputs(definition, workload, problem_dir)
        if not tensors:
            continue
        digest = hashlib.sha256()
        for name in sorted(tensors):
            digest.update(name.encode() + tensors[name].numpy().tobytes())
        target = Path(sandbox_root) / f"stored-{digest.hexdigest()[:16]}.pt"
        if not target.exists():
            torch.save(tensors, target)
            os.chmod(target, 0o644)
        staged[workload.uuid] = str(target)
    return staged
