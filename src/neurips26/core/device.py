"""Which torch device the experiments use (``--device``), resolved once per run."""

from __future__ import annotations

import os

DEVICE_ENV = "NEURIPS26_DEVICE"
DEVICES = ("auto", "cpu", "cuda")


def set_default_device(name: str) -> str:
    """Record the device for this run; ``auto`` picks CUDA when present. Returns the resolved name."""
    if name not in DEVICES:
        raise ValueError(f"device={name!r} is not allowed; choose one of {list(DEVICES)}")
    if name == "auto":
        import torch

        name = "cuda" if torch.cuda.is_available() else "cpu"
    elif name == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device='cuda' was asked for but torch sees no CUDA device")
    os.environ[DEVICE_ENV] = name
    return name


def default_device() -> str:
    """The device experiments should put their tensors on (``cpu`` unless the run said otherwise)."""
    return os.environ.get(DEVICE_ENV, "cpu")
