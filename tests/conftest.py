"""Test hygiene: one torch thread per worker, a headless matplotlib, fixed seeds."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` tests are opt-in (``-m slow`` or ``NEURIPS26_SLOW=1``), as the marker's help says."""
    if "slow" in (config.getoption("-m") or "") or os.environ.get("NEURIPS26_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: opt in with -m slow or NEURIPS26_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fixed_seed() -> None:
    torch.manual_seed(0)
