"""The registry contract matrix: every ready method passes the same checks."""

import pytest

from neurips26.registry import METHODS
from neurips26.testing import check_experiment_contract

READY = [spec for spec in METHODS if spec.status == "ready"]


@pytest.mark.parametrize("spec", READY, ids=[spec.slug for spec in READY])
def test_ready_method_meets_the_contract(spec) -> None:
    experiment = spec.load_experiment()
    assert experiment.slug == spec.slug
    check_experiment_contract(experiment, spec.experiment)


def test_at_least_one_method_is_ready() -> None:
    assert READY, "no ready method: the contract matrix would test nothing"
