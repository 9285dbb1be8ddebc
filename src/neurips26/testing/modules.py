"""Conformance checks for ``nn.Module`` building blocks."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Sequence

import torch
from torch import nn


def _outputs(module: nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    out = module(*inputs)
    return out[0] if isinstance(out, tuple) else out


def assert_module_basics(
    module: nn.Module,
    example_inputs: Sequence[torch.Tensor],
    *,
    factory: Callable[[], nn.Module] | None = None,
    batch_dim: int | None = 0,
    atol: float = 1e-5,
) -> None:
    """Check what every building block owes its users.

    - ``state_dict`` round trip through ``torch.save``/``torch.load`` reproduces the outputs;
    - moving to float64 works and agrees with float32 within tolerance;
    - batch invariance: the output for a batch equals the outputs for its items run one at a time;
    - seed determinism: ``factory()`` under the same seed builds identical parameters.
    """
    module.eval()
    inputs = list(example_inputs)
    with torch.no_grad():
        reference = _outputs(module, inputs)

        buffer = io.BytesIO()
        torch.save(module.state_dict(), buffer)
        buffer.seek(0)
        clone = copy.deepcopy(module)
        for parameter in clone.parameters():
            parameter.data.add_(1.0)
        clone.load_state_dict(torch.load(buffer, weights_only=True))
        torch.testing.assert_close(_outputs(clone, inputs), reference, atol=atol, rtol=atol)

        wide = copy.deepcopy(module).to(torch.float64)
        wide_out = _outputs(wide, [x.to(torch.float64) if x.is_floating_point() else x for x in inputs])
        torch.testing.assert_close(wide_out.to(reference.dtype), reference, atol=1e-4, rtol=1e-4)

        if batch_dim is not None and inputs[0].shape[batch_dim] > 1:
            singles = [
                _outputs(module, [x.narrow(batch_dim, i, 1) for x in inputs])
                for i in range(inputs[0].shape[batch_dim])
            ]
            torch.testing.assert_close(torch.cat(singles, dim=batch_dim), reference, atol=atol, rtol=atol)

    if factory is not None:
        torch.manual_seed(1234)
        first = factory().state_dict()
        torch.manual_seed(1234)
        second = factory().state_dict()
        for key in first:
            torch.testing.assert_close(first[key], second[key], atol=0, rtol=0)
