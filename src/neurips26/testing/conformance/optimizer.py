"""The ``"optimizer"`` family: what ``torch.optim.Optimizer`` users and schedulers rely on.

The factory builds an optimizer over a few tiny leaf tensors of its own. The tester drives it with a
closure (``zero_grad``, a smooth non-quadratic loss, ``backward``), which every torch optimizer accepts and
SAM-like ones need. Checked: ``step`` moves the parameters and ``zero_grad`` clears the gradients;
``add_param_group`` fills every default into the new group and the next step trains it; ``state_dict``
loaded into a fresh optimizer resumes identically; an ``StepLR`` scheduler changes ``param_groups[i]["lr"]``
and a changed learning rate takes effect (``lr = 0`` freezes the parameters).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from neurips26.testing.conformance._common import expectation

FAMILY = "optimizer"


def check_optimizer(factory: Callable[[], torch.optim.Optimizer]) -> None:
    """Raise ``AssertionError`` where ``factory()``'s optimizer breaks the ``torch.optim`` contract."""
    _check_step_and_zero_grad(_optimizer(factory))
    _check_add_param_group(_optimizer(factory))
    _check_state_dict_resume(factory)
    _check_scheduler(_optimizer(factory))
    _check_lr_takes_effect(_optimizer(factory))


def _optimizer(factory: Callable[[], torch.optim.Optimizer]) -> torch.optim.Optimizer:
    optimizer = factory()
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise expectation(
            FAMILY, f"the factory must return a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    if not _params(optimizer):
        raise expectation(FAMILY, "the factory's optimizer holds no parameters")
    return optimizer


def _params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _loss(params: list[torch.Tensor]) -> torch.Tensor:
    """Smooth, non-quadratic and with a non-zero gradient almost everywhere (so every step moves)."""
    return sum(((p - 0.3) ** 2 + torch.sin(3 * p)).sum() for p in params)


def _step(optimizer: torch.optim.Optimizer) -> None:
    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = _loss(_params(optimizer))
        loss.backward()
        return loss

    optimizer.step(closure)


def _snapshot(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in _params(optimizer)]


def _check_step_and_zero_grad(optimizer: torch.optim.Optimizer) -> None:
    before = _snapshot(optimizer)
    _step(optimizer)
    if all(torch.equal(a, b) for a, b in zip(before, _snapshot(optimizer), strict=True)):
        raise expectation(FAMILY, "step(closure) left every parameter unchanged")
    _loss(_params(optimizer)).backward()
    optimizer.zero_grad()
    if any(p.grad is not None and p.grad.abs().sum() > 0 for p in _params(optimizer)):
        raise expectation(FAMILY, "zero_grad() left non-zero gradients")


def _check_add_param_group(optimizer: torch.optim.Optimizer) -> None:
    extra = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 5))
    try:
        optimizer.add_param_group({"params": [extra]})
    except Exception as error:
        raise expectation(FAMILY, "add_param_group({'params': [...]}) failed", error) from error
    group = optimizer.param_groups[-1]
    if not any(p is extra for p in group["params"]):
        raise expectation(FAMILY, "add_param_group did not append the group to param_groups")
    missing = sorted(set(optimizer.defaults) - set(group))
    if missing:
        raise expectation(FAMILY, f"add_param_group left the defaults {missing} out of the new group")
    before = extra.detach().clone()
    _step(optimizer)
    if torch.equal(before, extra.detach()):
        raise expectation(FAMILY, "a parameter added with add_param_group is not trained by step()")


def _check_state_dict_resume(factory: Callable[[], torch.optim.Optimizer]) -> None:
    original, resumed = _optimizer(factory), _optimizer(factory)
    for _ in range(2):
        _step(original)
    state = copy.deepcopy(original.state_dict())
    with torch.no_grad():
        for mine, theirs in zip(_params(resumed), _params(original), strict=True):
            mine.copy_(theirs)
    try:
        resumed.load_state_dict(state)
    except Exception as error:
        raise expectation(
            FAMILY, "load_state_dict(state_dict()) into a fresh optimizer failed", error
        ) from error
    for _ in range(2):
        _step(original)
        _step(resumed)
    for mine, theirs in zip(_params(resumed), _params(original), strict=True):
        if not torch.allclose(mine, theirs, atol=1e-6, rtol=1e-6):
            raise expectation(FAMILY, "an optimizer restored from state_dict() does not continue identically")


def _check_scheduler(optimizer: torch.optim.Optimizer) -> None:
    if any("lr" not in group for group in optimizer.param_groups):
        raise expectation(FAMILY, "every param group needs an 'lr' for torch's LR schedulers")
    start = [group["lr"] for group in optimizer.param_groups]
    try:
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        _step(optimizer)
        scheduler.step()
    except Exception as error:
        raise expectation(FAMILY, "stepping under torch.optim.lr_scheduler.StepLR failed", error) from error
    now = [group["lr"] for group in optimizer.param_groups]
    if not all(abs(n - 0.5 * s) <= 1e-12 * max(1.0, abs(s)) for n, s in zip(now, start, strict=True)):
        raise expectation(FAMILY, f"StepLR(gamma=0.5) moved the group learning rates from {start} to {now}")


def _check_lr_takes_effect(optimizer: torch.optim.Optimizer) -> None:
    _step(optimizer)  # past any first-step special case
    for group in optimizer.param_groups:
        group["lr"] = 0.0
    before = _snapshot(optimizer)
    _step(optimizer)
    if not all(
        torch.allclose(a, b, atol=1e-7, rtol=0) for a, b in zip(before, _snapshot(optimizer), strict=True)
    ):
        raise expectation(
            FAMILY, "setting param_groups[i]['lr'] = 0 did not stop the updates (a private copy?)"
        )
