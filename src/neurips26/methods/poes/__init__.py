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

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); each runs through ``POESScheduler.select``/``best``; the README's "Central ideas"
#: table says how each is switched off.
IDEAS: dict[str, str] = {
    "discrimination among the leaders": (
        "tests/methods/poes/test_poes_simulator.py::test_idea_discrimination_targets_items_at_the_leaders_ability"
    ),
    "coverage of the pool": (
        "tests/methods/poes/test_poes_simulator.py::test_idea_coverage_spreads_the_subset_over_topics"
    ),
    "bounded warm-start swaps": (
        "tests/methods/poes/test_poes_simulator.py::test_idea_bounded_swaps_limit_drift_between_rounds"
    ),
    "the adaptive controller": (
        "tests/methods/poes/test_poes_simulator.py::test_idea_controller_moves_weight_to_discrimination_as_the_margin_grows"
    ),
    "prompts ranked by IRT ability": (
        "tests/methods/poes/test_poes.py::test_idea_best_ranks_by_ability_not_raw_accuracy"
    ),
}

__all__ = [
    "CONFORMANCE",
    "CONFORMANCE_REASON",
    "IDEAS",
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
