"""The "module" tester passes a well-behaved block and fails each deliberately broken one."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from neurips26.testing.conformance import ModuleExample, check_module


class Good(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(3, 2)
        self.register_buffer("offset", torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.offset


class ShadowsApply(Good):
    def apply(self, q, k):  # the SpRePE defect issue 42 found: model.apply(init_fn) raises TypeError
        return q, k


class PlainTensorAttribute(Good):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.full((2,), 2.0)  # not a buffer: .double() leaves it float32, state_dict misses it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.scale


_INSTANCES = itertools.count()


class ForgetsStateDict(Good):
    """Its weight differs per instance and lives outside the state dict (an unregistered list)."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = [torch.full((2,), float(next(_INSTANCES)))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.hidden[0]


class ParameterInAList(Good):
    def __init__(self) -> None:
        super().__init__()
        self.gains = [nn.Parameter(torch.ones(2))]  # not an nn.ParameterList: optimizers never see it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.gains[0]


class HardCodedDtype(Good):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).float()


def example(cls: type[nn.Module]) -> ModuleExample:
    return ModuleExample(cls(), (torch.linspace(-1, 1, 6).reshape(2, 3),))


class NonPersistentConstant(Good):
    """A constant kept out of the state dict on purpose (like image normalisation statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.full((3,), 0.25), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x - self.mean)


@pytest.mark.parametrize("cls", [Good, NonPersistentConstant])
def test_a_well_behaved_module_passes(cls) -> None:
    check_module(lambda: example(cls))


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (ShadowsApply, r"apply\(fn\)"),
        (PlainTensorAttribute, r"plain tensor attributes \['scale'\]"),
        (ForgetsStateDict, r"state_dict -> fresh instance"),
        (ParameterInAList, r"plain tensor attributes \['gains'\]"),
        (HardCodedDtype, r"float64"),
    ],
)
def test_a_broken_module_fails_naming_the_expectation(cls, match) -> None:
    with pytest.raises(AssertionError, match=match):
        check_module(lambda: example(cls))


def test_a_factory_not_returning_an_example_fails() -> None:
    with pytest.raises(AssertionError, match="ModuleExample"):
        check_module(Good)
