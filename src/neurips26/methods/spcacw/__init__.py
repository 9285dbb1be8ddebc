"""SP-CACW: convergence-aware client weighting for selfish personalization (Kiselman and Levy, 2026)."""

from neurips26.methods.spcacw.config import SPCACWConfig
from neurips26.methods.spcacw.core import (
    BiasEstimator,
    RoundRecord,
    WeightSolution,
    bound_value,
    choose_weights,
    within_client_variance,
)

#: Ecosystem families the public API conforms to (``neurips26.testing.conformance``).
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("flower_strategy", "neurips26.methods.spcacw.conformance:tiny_strategy"),
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "the bound's bias term keeps harmful peers out": (
        "tests/methods/spcacw/test_spcacw_engine.py::test_idea_engine_bias_term_keeps_the_other_concepts_peers_out"
    ),
    "the debiased bias estimate lets near peers in": (
        "tests/methods/spcacw/test_spcacw_engine.py::test_idea_engine_debiased_estimate_lets_same_concept_peers_in"
    ),
}

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "BiasEstimator",
    "RoundRecord",
    "SPCACWConfig",
    "WeightSolution",
    "bound_value",
    "choose_weights",
    "within_client_variance",
]
