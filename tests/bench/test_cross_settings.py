"""A cell's non-timing values depend on its config, seed and code only: not on workers, threads or order."""

from __future__ import annotations

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from neurips26.bench.numeric import pinned_numerics
from neurips26.registry import METHODS
from neurips26.testing.reproducibility import cells_under, non_timing_values, smoke_cells
from neurips26.testing.toy_experiment import TOY_EXPERIMENT

TOY = "neurips26.testing.toy_experiment:TOY_EXPERIMENT"


def test_pinned_numerics_pins_torch_blas_and_determinism_and_restores_them() -> None:
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with threadpool_limits(limits=2):
            with pinned_numerics(threads=1):
                assert torch.get_num_threads() == 1
                assert torch.are_deterministic_algorithms_enabled()
                assert {pool["num_threads"] for pool in threadpool_info()} == {1}
            assert torch.get_num_threads() == 2
            assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.set_num_threads(previous)
    with pytest.raises(ValueError, match="threads must be a positive integer"), pinned_numerics(threads=0):
        pass


def _three_settings(ref: str, cells: list) -> list[dict]:
    """One process on 1 OpenMP thread; reversed order on 2; two fresh workers on 2."""
    reversed_cells = list(reversed(cells))
    return [
        cells_under(ref, "smoke", cells, jobs=1, omp_threads=1),
        cells_under(ref, "smoke", reversed_cells, jobs=1, omp_threads=2),
        cells_under(ref, "smoke", cells, jobs=2, omp_threads=2),
    ]


def test_toy_cells_are_identical_under_other_jobs_threads_and_order() -> None:
    point = TOY_EXPERIMENT.profile("smoke").points()[0]
    cells = [("median", point, 0), ("mean", point, 0), ("median", point, 1)]
    runs = [non_timing_values(run, timing=[]) for run in _three_settings(TOY, cells)]
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) == 3 and all(status == "ok" for status, _ in runs[0].values())


def _cheap_method_params() -> list:
    """samhybrid: torch training with a cell of about a second, the cheapest real method to check here."""
    return [pytest.param(spec, id=spec.slug) for spec in METHODS if spec.slug == "samhybrid"]


def _all_method_params() -> list:
    return [pytest.param(spec, id=spec.slug, marks=pytest.mark.slow) for spec in METHODS]


def _check_method(spec) -> None:
    if spec.status != "ready":
        pytest.skip(f"{spec.slug}: {spec.status_text()}")
    experiment = spec.load_experiment()
    timing = [m.name for m in experiment.metrics if m.timing]
    ours, other = smoke_cells(experiment)
    alone = cells_under(spec.experiment, "smoke", [ours, other], jobs=2, omp_threads=2)
    after_another = cells_under(spec.experiment, "smoke", [other, ours], jobs=1, omp_threads=1)
    assert non_timing_values(alone, timing) == non_timing_values(after_another, timing)


@pytest.mark.parametrize("spec", _cheap_method_params())
def test_a_real_method_smoke_cell_is_identical_under_other_settings(spec) -> None:
    _check_method(spec)


@pytest.mark.parametrize("spec", _all_method_params())
def test_every_method_smoke_cells_are_identical_under_other_settings(spec) -> None:
    """Opt-in (slow: about a minute per method on 2 cores); ``benchmarks/cross_settings.py`` prints it."""
    _check_method(spec)
