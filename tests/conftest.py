"""Test hygiene: one torch thread per worker, a headless matplotlib, fixed seeds."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# solar's cpu-local spec: calibrated inside this test process, never read from a calibration an earlier run
# left in ~/.cache (another load, another version) nor written there (issue #50): each process (xdist worker)
# gets its own empty folder, set before any test module is imported
os.environ["NEURIPS26_SOLAR_HW"] = tempfile.mkdtemp(prefix="neurips26-solar-hw-")

import pytest
import torch
from hypothesis import settings

atexit.register(shutil.rmtree, os.environ["NEURIPS26_SOLAR_HW"], True)

torch.set_num_threads(1)

# Property tests draw the same examples on every machine and every run: derandomized (the examples follow
# from each test's source) and without the local example database (.hypothesis/, which would replay one
# machine's old failures). A test's own @settings (max_examples, deadline) still apply. To explore new
# examples locally: NEURIPS26_HYPOTHESIS=explore python -m pytest ...
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("NEURIPS26_HYPOTHESIS", "fixed"))


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
