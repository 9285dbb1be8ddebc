"""The ``"module"`` family: what any ``torch.nn.Module`` owes code that holds it.

Checked: ``repr``; ``.apply(fn)`` visits every submodule and returns the module (a method named ``apply``
that shadows it breaks ``model.apply(init_fn)`` on any model holding the block); no plain tensor
attributes (``.to`` and ``state_dict`` would miss them: they must be parameters or buffers);
``state_dict`` into a fresh, perturbed instance reproduces the outputs; ``deepcopy`` reproduces them;
``.to("cpu")`` returns the module; ``.double()`` / ``.to(torch.float64)`` run and the floating outputs
are float64.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from neurips26.testing.conformance._common import expectation, tensors_in

FAMILY = "module"
# nn.Module's own bookkeeping dicts: holding parameters there is what registering means
_REGISTRIES = frozenset({"_parameters", "_buffers", "_modules"})


@dataclass
class ModuleExample:
    """A tiny module and an input it accepts: ``getattr(module, method)(*args, **kwargs)``.

    ``method`` is ``"__call__"`` (forward) unless the module's public entry point has another name (a q/k
    transform such as ``encode_qk``). Floating tensors in ``args``/``kwargs`` are cast for the dtype checks.
    """

    module: nn.Module
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    method: str = "__call__"
    atol: float = 1e-5


def check_module(factory: Callable[[], ModuleExample]) -> None:
    """Raise ``AssertionError`` where ``factory()``'s module breaks the ``nn.Module`` contract."""
    example = _example(factory)
    module = example.module.eval()
    _check_repr(module)
    _check_apply(module)
    _check_registered_tensors(module)
    reference = _outputs(example, module)
    _check_state_dict_round_trip(factory, example, reference)
    _check_deepcopy(example, module, reference)
    _check_device_move(example, module, reference)
    for label, widen in (
        ("to(torch.float64)", lambda m: m.to(torch.float64)),
        ("double()", nn.Module.double),
    ):
        _check_float64(example, copy.deepcopy(module), label, widen)


def _example(factory: Callable[[], ModuleExample]) -> ModuleExample:
    example = factory()
    if not isinstance(example, ModuleExample) or not isinstance(example.module, nn.Module):
        raise expectation(
            FAMILY, f"the factory must return a ModuleExample holding an nn.Module, got {example!r}"
        )
    return example


def _cast(value: Any, dtype: torch.dtype) -> Any:
    """``value`` with its floating tensors (also inside dicts, lists and tuples) cast to ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, dict):
        return {key: _cast(item, dtype) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cast(item, dtype) for item in value)
    if any(cls.__module__.startswith("torch_geometric.") for cls in type(value).__mro__):  # PyG Data/Batch
        return copy.copy(value).apply(lambda t: t.to(dtype) if t.is_floating_point() else t)
    return value


def _call(example: ModuleExample, module: nn.Module, dtype: torch.dtype | None = None) -> Any:
    args = _cast(example.args, dtype) if dtype else example.args
    kwargs = _cast(example.kwargs, dtype) if dtype else example.kwargs
    with torch.no_grad():
        return getattr(module, example.method)(*args, **kwargs)


def _outputs(
    example: ModuleExample, module: nn.Module, dtype: torch.dtype | None = None
) -> list[torch.Tensor]:
    outputs = list(tensors_in(_call(example, module, dtype)))
    if not outputs:
        raise expectation(FAMILY, f"{example.method} returned no tensor")
    return outputs


def _assert_same(got: list[torch.Tensor], want: list[torch.Tensor], what: str, atol: float) -> None:
    try:
        assert len(got) == len(want), f"{len(got)} output tensors instead of {len(want)}"
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, atol=atol, rtol=atol)
    except AssertionError as error:
        raise expectation(FAMILY, f"{what} changed the outputs", error) from error


def _check_repr(module: nn.Module) -> None:
    try:
        text = repr(module)
    except Exception as error:
        raise expectation(FAMILY, "repr(module) failed", error) from error
    if not text:
        raise expectation(FAMILY, "repr(module) is empty")


def _check_apply(module: nn.Module) -> None:
    visited: list[nn.Module] = []
    try:
        returned = module.apply(visited.append)
    except Exception as error:
        raise expectation(
            FAMILY, "module.apply(fn) must call fn on every submodule (is `apply` shadowed?)", error
        ) from error
    if returned is not module:
        raise expectation(FAMILY, "module.apply(fn) must return the module itself")
    if {id(m) for m in visited} != {id(m) for m in module.modules()}:
        raise expectation(
            FAMILY, f"module.apply(fn) visited {len(visited)} modules of {len(list(module.modules()))}"
        )


def _hides_parameter(value: Any) -> bool:
    """A plain list/tuple/dict holding an ``nn.Parameter`` (``parameters()`` and optimizers never see it)."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else ()
    return any(isinstance(item, nn.Parameter) or _hides_parameter(item) for item in items)


def _check_registered_tensors(module: nn.Module) -> None:
    for name, submodule in module.named_modules():
        plain = sorted(
            k
            for k, v in vars(submodule).items()
            if isinstance(v, torch.Tensor) or (k not in _REGISTRIES and _hides_parameter(v))
        )
        if plain:
            where = name or type(module).__name__
            raise expectation(
                FAMILY,
                f"{where} holds plain tensor attributes {plain}: register them with nn.Parameter or "
                "register_buffer (nn.ParameterList/Dict for collections), or .to()/state_dict()/parameters() "
                "miss them",
            )


def _check_state_dict_round_trip(
    factory: Callable[[], ModuleExample], example: ModuleExample, reference: list[torch.Tensor]
) -> None:
    buffer = io.BytesIO()
    torch.save(example.module.state_dict(), buffer)
    buffer.seek(0)
    fresh = _example(factory).module.eval()
    # a fresh instance that happens to equal the original proves nothing; perturb what the state dict
    # carries (its tensors share storage with the module), not non-persistent buffers by design left out
    with torch.no_grad():
        for tensor in fresh.state_dict().values():
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                tensor.add_(0.5)
    try:
        fresh.load_state_dict(torch.load(buffer, weights_only=True))
    except Exception as error:
        raise expectation(
            FAMILY, "load_state_dict(state_dict()) into a fresh instance failed", error
        ) from error
    _assert_same(
        _outputs(example, fresh), reference, "state_dict -> fresh instance -> load_state_dict", example.atol
    )


def _check_deepcopy(example: ModuleExample, module: nn.Module, reference: list[torch.Tensor]) -> None:
    try:
        twin = copy.deepcopy(module)
    except Exception as error:
        raise expectation(FAMILY, "copy.deepcopy(module) failed", error) from error
    _assert_same(_outputs(example, twin), reference, "copy.deepcopy", example.atol)


def _check_device_move(example: ModuleExample, module: nn.Module, reference: list[torch.Tensor]) -> None:
    moved = copy.deepcopy(module)
    if moved.to("cpu") is not moved:
        raise expectation(FAMILY, 'module.to("cpu") must return the module itself')
    _assert_same(_outputs(example, moved), reference, 'module.to("cpu")', example.atol)


def _check_float64(example: ModuleExample, module: nn.Module, label: str, widen: Callable) -> None:
    try:
        widen(module)
        outputs = _outputs(example, module, torch.float64)
    except Exception as error:
        raise expectation(FAMILY, f"module.{label} then a float64 forward failed", error) from error
    narrow = [o.dtype for o in outputs if o.is_floating_point() and o.dtype != torch.float64]
    if narrow:
        raise expectation(FAMILY, f"after module.{label} floating outputs must be float64, got {narrow}")
