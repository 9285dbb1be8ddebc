"""POES: prompt-aware online evaluation scheduling for prompt optimizers (arXiv 2604.11328)."""

from neurips26.methods.poes.config import POESConfig
from neurips26.methods.poes.irt import IRTFit, fit_1pl_map
from neurips26.methods.poes.scheduler import POESScheduler, RoundInfo
from neurips26.methods.poes.selection import (
    SubsetObjective,
    WeightController,
    bounded_swaps,
    discrimination_utility,
    lazy_greedy,
    rbf_similarity,
)

# tests/test_conformance.py: no ecosystem API family fits this method's public API.
CONFORMANCE: tuple[tuple[str, str], ...] = ()
CONFORMANCE_REASON: str = (
    "POES is an evaluation scheduler for prompt optimisers; its one ecosystem contract, gepa's "
    "EvaluationPolicy hook, has no shared family and is checked in "
    "tests/methods/poes/test_poes_integration.py."
)

__all__ = [
    "CONFORMANCE",
    "CONFORMANCE_REASON",
    "IRTFit",
    "POESConfig",
    "POESScheduler",
    "RoundInfo",
    "SubsetObjective",
    "WeightController",
    "bounded_swaps",
    "discrimination_utility",
    "fit_1pl_map",
    "lazy_greedy",
    "rbf_similarity",
]
