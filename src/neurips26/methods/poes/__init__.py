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

__all__ = [
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
