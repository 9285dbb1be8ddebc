"""Fixtures shared by the scalebits test files: one tiny Llama built in code and a calibration batch."""

import pytest
import torch

from neurips26.zoo.builders import tiny_llama


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_llama(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=1, seed=0)


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(0, 256, (8, 16), generator=torch.Generator().manual_seed(0))
