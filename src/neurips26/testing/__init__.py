"""Reusable checks shipped with the package, for our tests and for users extending the methods."""

from neurips26.testing.contract import check_experiment_contract
from neurips26.testing.modules import assert_module_basics
from neurips26.testing.position_embedding import assert_certificate, certify_position_embedding
from neurips26.testing.skips import requires_package

__all__ = [
    "assert_certificate",
    "assert_module_basics",
    "certify_position_embedding",
    "check_experiment_contract",
    "requires_package",
]
