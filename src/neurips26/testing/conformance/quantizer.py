"""The quantizer family: torchao's ``quantize_(model, config)`` contract, or a differently named verb.

Two shapes pass (issue 42: no look-alikes of torchao's verb):

- ``QuantizerCase(verb=None)``: the config subclasses ``torchao.core.config.AOBaseConfig`` and has a handler
  registered with ``torchao.quantization.transform_module.register_quantize_module_handler``, so
  ``torchao.quantization.quantize_(model, config, filter_fn)`` works;
- ``QuantizerCase(verb=f)``: a quantizer that needs the whole model (a global bit allocation, a model-wide
  token state) has its own verb, NOT named ``quantize_``, with one return convention (``returns``).

Either way: the model is modified in place, the forward pass runs afterwards with the same output shape and
finite values, ``filter_fn(module, fqn)`` decides which ``nn.Linear`` layers change (the others keep their
class and weights), and a config of the wrong type is rejected with an error that names ``config``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

FilterFn = Callable[[nn.Module, str], bool]


@dataclass
class QuantizerCase:
    """A tiny model factory, a config and example inputs; ``verb`` None means torchao's ``quantize_``.

    ``filter_in_config``: the verb reads ``config.filter_fn`` (replaced with ``dataclasses.replace``)
    instead of a ``filter_fn=`` keyword. ``returns``: the verb's return type (None: returns None, as
    torchao's in-place verb does). ``verb_kwargs``: extra inputs, e.g. ``calibration=`` data.
    """

    build_model: Callable[[], nn.Module]
    config: Any
    inputs: tuple[Any, ...]
    verb: Callable[..., Any] | None = None
    verb_kwargs: dict[str, Any] = field(default_factory=dict)
    returns: type | None = None
    filter_in_config: bool = False


def _output(model: nn.Module, inputs: tuple[Any, ...]) -> torch.Tensor:
    with torch.no_grad():
        out = model(*inputs)
    out = getattr(out, "logits", out)
    return out[0] if isinstance(out, tuple) else out


def _linears(model: nn.Module) -> dict[str, nn.Linear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}


def _same_tensor(a: Any, b: Any) -> bool:
    """Equal class, shape and values (a torchao tensor subclass never equals the float weight it replaced)."""
    if type(a) is not type(b) or a.shape != b.shape:
        return False
    try:
        return bool(torch.equal(a, b))
    except Exception:  # a tensor subclass without an equal kernel counts as changed
        return False


def _same_linear(a: nn.Module | None, b: nn.Linear) -> bool:
    return type(a) is type(b) and _same_tensor(a.weight, b.weight)


def _quantize(case: QuantizerCase, model: nn.Module, config: Any, filter_fn: FilterFn | None) -> Any:
    if case.verb is None:
        from torchao.quantization import quantize_

        return quantize_(model, config, filter_fn=filter_fn)
    if filter_fn is None:
        return case.verb(model, config, **case.verb_kwargs)
    if case.filter_in_config:
        import dataclasses

        return case.verb(model, dataclasses.replace(config, filter_fn=filter_fn), **case.verb_kwargs)
    return case.verb(model, config, filter_fn=filter_fn, **case.verb_kwargs)


def _check_registration(case: QuantizerCase) -> None:
    if case.verb is not None:
        name = getattr(case.verb, "__name__", repr(case.verb))
        assert name != "quantize_", (
            "a verb that is not torchao's quantize_ must not be named quantize_ (issue 42: look-alikes); "
            "register a torchao handler instead, or rename the verb"
        )
        return
    from torchao.core.config import AOBaseConfig
    from torchao.quantization.transform_module import _QUANTIZE_CONFIG_HANDLER

    kind = type(case.config).__name__
    assert isinstance(case.config, AOBaseConfig), f"{kind} must subclass torchao.core.config.AOBaseConfig"
    assert type(case.config) in _QUANTIZE_CONFIG_HANDLER, (
        f"{kind} has no handler: register one with torchao's register_quantize_module_handler({kind})"
    )


def _check_in_place(case: QuantizerCase) -> None:
    model = case.build_model().eval()
    original = copy.deepcopy(model)
    reference = _output(original, case.inputs)
    result = _quantize(case, model, case.config, None)
    if case.returns is None:
        assert result is None, (
            f"the quantizer must return None (in place, as torchao's quantize_); got {result!r}"
        )
    else:
        assert isinstance(result, case.returns), (
            f"the quantizer must return a {case.returns.__name__} (its one return convention); got "
            f"{type(result).__name__}"
        )
    before, after = original.state_dict(), model.state_dict()
    changed = [type(a) is not type(b) for a, b in zip(original.modules(), model.modules(), strict=False)]
    changed += [k not in after or not _same_tensor(v, after[k]) for k, v in before.items()]
    assert any(changed) or len(list(model.modules())) != len(list(original.modules())), (
        "the model passed in is unchanged: the quantizer must modify it in place, not return a copy"
    )
    out = _output(model, case.inputs)
    assert out.shape == reference.shape, f"forward after quantization gave shape {tuple(out.shape)}"
    assert torch.isfinite(out).all(), "forward after quantization gave non-finite values"


def _check_filter(case: QuantizerCase) -> None:
    model = case.build_model().eval()
    original = _linears(copy.deepcopy(model))
    chosen = next(iter(original))

    def only_first(module: nn.Module, fqn: str) -> bool:
        return isinstance(module, nn.Linear) and fqn == chosen

    _quantize(case, model, case.config, only_first)
    modules = dict(model.named_modules())
    assert not _same_linear(modules.get(chosen), original[chosen]), (
        f"filter_fn accepted {chosen!r} but that layer was not quantized"
    )
    for name, linear in original.items():
        now = modules.get(name)
        assert name == chosen or _same_linear(now, linear), (
            f"filter_fn accepted only {chosen!r}, yet {name!r} changed (now {type(now).__name__})"
        )


def _check_bad_config(case: QuantizerCase) -> None:
    if case.verb is None:
        return  # torchao's own quantize_ rejects a foreign config (not the method's code)
    try:
        case.verb(case.build_model(), {"bits": 4}, **case.verb_kwargs)
    except (TypeError, ValueError) as error:
        assert "config" in str(error), (
            f"a dict config is rejected, but the error does not name config: {error}"
        )
    else:
        raise AssertionError("a dict config was accepted; the verb must raise TypeError naming config")


def check_quantizer(factory: Callable[[], QuantizerCase]) -> None:
    """Run the quantizer contract on ``factory()``, a :class:`QuantizerCase`."""
    case = factory()
    assert isinstance(case, QuantizerCase), (
        f"the factory must return a QuantizerCase, got {type(case).__name__}"
    )
    _check_registration(case)
    _check_in_place(case)
    _check_filter(case)
    _check_bad_config(case)
