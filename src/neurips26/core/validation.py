"""Argument checks shared by every public entry point: each error names the argument, value and rule."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number > 0 (>= 0 with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {rule}, got {value!r}")


def check_int(name: str, value: Any, minimum: int = 1) -> None:
    """Raise ``ValueError`` unless ``value`` is an int (not a bool) and ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_in_range(name: str, value: float, low: float, high: float) -> None:
    """Raise ``ValueError`` unless ``low <= value <= high``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not (low <= value <= high):
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}")


def check_choice(name: str, value: Any, allowed: Collection[Any]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {sorted(map(str, allowed))}")


def check_finite(name: str, tensor: Any) -> None:
    """Raise ``ValueError`` if a torch tensor or numpy array holds NaN or infinity."""
    import numpy as np

    finite = tensor.isfinite().all().item() if hasattr(tensor, "isfinite") else np.isfinite(tensor).all()
    if not finite:
        raise ValueError(f"{name} contains NaN or infinite values")
