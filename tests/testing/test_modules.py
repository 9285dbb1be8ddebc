import pytest
import torch
from torch import nn

from neurips26.testing import assert_module_basics
from neurips26.zoo.builders import tiny_mlp


def test_tiny_mlp_passes_the_basics() -> None:
    assert_module_basics(tiny_mlp(3, 2), [torch.randn(5, 3)], factory=lambda: tiny_mlp(3, 2))


def test_tiny_mlp_is_seeded_by_argument() -> None:
    a, b = tiny_mlp(3, 2, seed=1), tiny_mlp(3, 2, seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(next(a.parameters()), next(tiny_mlp(3, 2, seed=2).parameters()))


class BatchMixer(nn.Module):
    """Mixes information across the batch: must fail the batch-invariance check."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x - x.mean(0, keepdim=True))


def test_batch_dependence_is_caught() -> None:
    with pytest.raises(AssertionError):
        assert_module_basics(BatchMixer(), [torch.randn(4, 3)])
