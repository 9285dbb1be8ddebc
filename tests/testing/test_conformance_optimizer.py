"""The "optimizer" tester passes torch's own optimizers and fails each deliberately broken one."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from neurips26.testing.conformance import check_optimizer


def tiny_params() -> list[torch.nn.Parameter]:
    return [torch.nn.Parameter(torch.linspace(-1.0, 1.0, 4)), torch.nn.Parameter(torch.ones(2, 2))]


class PrivateGroups(torch.optim.SGD):
    """Keeps its own copy of the groups: schedulers and users edit param_groups, nothing changes."""

    def __init__(self, params: Any, lr: float = 0.1) -> None:
        super().__init__(params, lr=lr)
        self._lrs = [group["lr"] for group in self.param_groups]

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        self._lrs = [*getattr(self, "_lrs", []), param_group["lr"]]

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        with torch.enable_grad():
            loss = closure() if closure is not None else None
        for group, lr in zip(self.param_groups, self._lrs, strict=True):
            for p in group["params"]:
                p.add_(p.grad, alpha=-lr)
        return loss


class DropsDefaults(torch.optim.SGD):
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if hasattr(self, "defaults") and self.param_groups:
            self.param_groups.append({"params": list(param_group["params"]), "lr": 0.1})
            return
        super().add_param_group(param_group)


class MomentumOutsideState(torch.optim.Optimizer):
    """Heavy-ball momentum kept in an attribute: state_dict() does not carry it, so resuming diverges."""

    def __init__(self, params: Any, lr: float = 0.1) -> None:
        super().__init__(params, {"lr": lr})
        self.velocity: dict[int, torch.Tensor] = {}

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        with torch.enable_grad():
            loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                v = self.velocity.setdefault(id(p), torch.zeros_like(p)).mul_(0.9).add_(p.grad)
                p.add_(v, alpha=-group["lr"])
        return loss


@pytest.mark.parametrize(
    "factory",
    [
        lambda: torch.optim.SGD(tiny_params(), lr=0.1, momentum=0.9),
        lambda: torch.optim.AdamW(tiny_params(), lr=0.01),
    ],
)
def test_torch_optimizers_pass(factory) -> None:
    check_optimizer(factory)


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (DropsDefaults, r"left the defaults \['dampening'"),
        (MomentumOutsideState, r"does not continue identically"),
        (PrivateGroups, r"'lr'\] = 0 did not stop"),
    ],
)
def test_a_broken_optimizer_fails_naming_the_expectation(cls, match) -> None:
    with pytest.raises(AssertionError, match=match):
        check_optimizer(lambda: cls(tiny_params()))


def test_a_factory_returning_no_optimizer_fails() -> None:
    with pytest.raises(AssertionError, match=r"torch\.optim\.Optimizer"):
        check_optimizer(tiny_params)
