"""The diffusers pipeline family: ``save_pretrained`` / ``from_pretrained`` round trip and seeded calls.

What diffusers users rely on (``diffusers.DiffusionPipeline``):

- ``pipe.save_pretrained(folder)`` then ``type(pipe).from_pretrained(folder)`` rebuilds the SAME pipeline:
  every ``__init__`` argument comes back (components with equal weights and configs, settings such as
  StyleRoute's ``route_config`` equal: issue 42 found one dropped), and ``pipe.config`` is unchanged;
- calls with equal ``generator`` seeds give identical outputs, before and after the round trip.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass
class PipelineCase:
    """A tiny pipeline factory and the keyword arguments of one call (``generator=`` is added)."""

    build: Callable[[], Any]
    call_kwargs: dict[str, Any] = field(default_factory=dict)


def _public_config(obj: Any) -> dict[str, Any]:
    """``obj.config`` without diffusers' bookkeeping keys (``_class_name``, ``_use_default_values``, ...),
    as JSON values (a tuple saved as JSON reloads as a list: not a loss)."""
    public = {k: v for k, v in dict(obj.config).items() if not k.startswith("_")}
    return json.loads(json.dumps(public, default=repr))


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.nn.Module):
        left, right = a.state_dict(), b.state_dict() if isinstance(b, torch.nn.Module) else None
        return (
            right is not None
            and left.keys() == right.keys()
            and all(torch.equal(left[k], right[k]) for k in left)
        )
    if hasattr(a, "config") and hasattr(b, "config"):  # schedulers and other ConfigMixin components
        return type(a) is type(b) and _public_config(a) == _public_config(b)
    return a == b


def _init_arguments(pipe: Any) -> list[str]:
    names = inspect.signature(type(pipe).__init__).parameters
    return [n for n, p in names.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _check_round_trip(pipe: Any, reloaded: Any) -> None:
    assert type(reloaded) is type(pipe), f"from_pretrained built a {type(reloaded).__name__}"
    before, after = _public_config(pipe), _public_config(reloaded)
    lost = sorted(k for k in before if k not in after or before[k] != after[k])
    assert not lost, f"pipe.config fields changed by save_pretrained -> from_pretrained: {lost}"
    for name in _init_arguments(pipe):
        assert hasattr(pipe, name), (
            f"__init__ argument {name!r} is not kept as an attribute: its round trip cannot be checked"
        )
        assert _same_value(getattr(pipe, name), getattr(reloaded, name)), (
            f"__init__ argument {name!r} did not survive save_pretrained -> from_pretrained "
            "(register it with register_to_config or register_modules)"
        )


def _arrays(output: Any) -> list[np.ndarray]:
    if callable(getattr(output, "values", None)):  # diffusers' BaseOutput is an ordered dict
        values = list(output.values())
    else:
        values = list(output) if isinstance(output, (list, tuple)) else [output]
    arrays = []
    for value in values:
        if isinstance(value, torch.Tensor):
            arrays.append(value.detach().cpu().numpy())
        elif isinstance(value, np.ndarray):
            arrays.append(value)
    assert arrays, f"the pipeline output {type(output).__name__} holds no tensor or array to compare"
    return arrays


def _call(pipe: Any, case: PipelineCase, seed: int) -> list[np.ndarray]:
    with torch.no_grad():
        return _arrays(pipe(**case.call_kwargs, generator=torch.Generator().manual_seed(seed)))


def _check_same_outputs(
    first: list[np.ndarray], second: list[np.ndarray], what: str, atol: float = 0.0
) -> None:
    assert len(first) == len(second), f"{what}: the outputs have {len(first)} vs {len(second)} fields"
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        assert a.shape == b.shape and np.allclose(a, b, rtol=atol, atol=atol, equal_nan=True), (
            f"{what}: output field {index} differs (max |diff| "
            f"{np.nanmax(np.abs(a.astype(float) - b.astype(float))) if a.shape == b.shape else 'shape'})"
        )


def check_pipeline(factory: Callable[[], PipelineCase]) -> None:
    """Run the diffusers pipeline contract on ``factory()``, a :class:`PipelineCase`."""
    case = factory()
    assert isinstance(case, PipelineCase), (
        f"the factory must return a PipelineCase, got {type(case).__name__}"
    )
    pipe = case.build()
    for method in ("save_pretrained", "from_pretrained"):
        assert hasattr(pipe, method), f"{type(pipe).__name__} has no {method} (diffusers pipeline contract)"
    reference = _call(pipe, case, seed=0)
    _check_same_outputs(reference, _call(pipe, case, seed=0), "two calls with the same generator seed")
    with tempfile.TemporaryDirectory() as folder:
        pipe.save_pretrained(folder)
        reloaded = type(pipe).from_pretrained(folder)
    _check_round_trip(pipe, reloaded)
    # equal weights in freshly allocated tensors may take another kernel path: float32 round-off only
    _check_same_outputs(reference, _call(reloaded, case, seed=0), "the reloaded pipeline, same seed", 1e-5)
