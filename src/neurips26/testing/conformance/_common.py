"""Helpers shared by the family testers: flattening outputs and naming the failed expectation."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a (nested) output: tuples, lists, dicts, dataclasses and named tuples."""
    if isinstance(value, torch.Tensor):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from tensors_in(getattr(value, field.name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)


def expectation(family: str, what: str, error: BaseException | None = None) -> AssertionError:
    """An ``AssertionError`` naming the family and the expectation (and the original error, if any)."""
    cause = f": {type(error).__name__}: {error}" if error is not None else ""
    return AssertionError(f"[{family}] {what}{cause}")
