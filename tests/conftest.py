"""Test hygiene: one torch thread per worker, a headless matplotlib, fixed seeds."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _fixed_seed() -> None:
    torch.manual_seed(0)
