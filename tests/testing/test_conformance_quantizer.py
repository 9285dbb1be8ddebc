"""The quantizer tester passes torchao's own configs and a registered handler, and fails broken quantizers."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from torch import nn

pytest.importorskip("torchao")

from torchao.core.config import AOBaseConfig
from torchao.quantization import Int8WeightOnlyConfig
from torchao.quantization.transform_module import register_quantize_module_handler

from neurips26.testing.conformance import TESTERS
from neurips26.testing.conformance.quantizer import QuantizerCase

check_quantizer = TESTERS["quantizer"]


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


INPUTS = (torch.randn(2, 16, generator=torch.Generator().manual_seed(1)),)


@dataclass
class _RoundConfig(AOBaseConfig):
    step: float = 0.25


@register_quantize_module_handler(_RoundConfig)
def _round_linear(module: nn.Module, config: _RoundConfig) -> nn.Module:
    with torch.no_grad():
        module.weight.copy_(torch.round(module.weight / config.step) * config.step)
    return module


@dataclass
class _UnregisteredConfig(AOBaseConfig):
    step: float = 0.25


def _rounding_verb(model: nn.Module, config: object, filter_fn=None) -> None:
    if not isinstance(config, _RoundConfig):
        raise TypeError(f"config must be a _RoundConfig, got {type(config).__name__}")
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and (filter_fn is None or filter_fn(module, name)):
            _round_linear(module, config)


def quantize_(model, config, filter_fn=None):  # a look-alike of torchao's verb
    _rounding_verb(model, config, filter_fn)


def _returns_a_copy(model, config, filter_fn=None):
    model = copy.deepcopy(model)
    _rounding_verb(model, config, filter_fn)


def _ignores_filter(model, config, filter_fn=None):
    _rounding_verb(model, config)


def _accepts_any_config(model, config, filter_fn=None):
    _rounding_verb(model, _RoundConfig(), filter_fn)


def _returns_the_model(model, config, filter_fn=None):
    _rounding_verb(model, config, filter_fn)
    return model


def _case(**kwargs) -> QuantizerCase:
    return QuantizerCase(_mlp, kwargs.pop("config", _RoundConfig()), INPUTS, **kwargs)


@pytest.mark.parametrize(
    "config", [Int8WeightOnlyConfig(), _RoundConfig()], ids=["torchao-int8", "registered"]
)
def test_torchao_registered_configs_conform(config):
    check_quantizer(lambda: _case(config=config))


def test_a_differently_named_verb_conforms():
    check_quantizer(lambda: _case(verb=_rounding_verb))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"config": _UnregisteredConfig()}, "has no handler"),
        ({"config": object()}, "must subclass"),
        ({"verb": quantize_}, "must not be named quantize_"),
        ({"verb": _returns_a_copy}, "in place"),
        ({"verb": _ignores_filter}, "filter_fn accepted only"),
        ({"verb": _accepts_any_config}, "was accepted"),
        ({"verb": _returns_the_model}, "must return None"),
    ],
)
def test_broken_quantizers_fail(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        check_quantizer(lambda: _case(**kwargs))
