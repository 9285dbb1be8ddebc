"""STAR: a state-aware adapter for time-series foundation models in multivariate anomaly detection."""

from neurips26.methods.star.config import STARConfig
from neurips26.methods.star.core import STARModel, inject_star
from neurips26.methods.star.integration import STARDetector
from neurips26.methods.star.metrics import range_pr_auc, range_pr_vus

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "the Conditional Bottleneck Adapter's update depends on the state": (
        "tests/methods/star/test_star.py::test_idea_detector_conditions_the_adapter_on_the_state"
    ),
    "the Identity-guided State Encoder reads a learnable state memory": (
        "tests/methods/star/test_star.py::test_idea_detector_reads_the_state_memory"
    ),
    "Numeral-State Matching catches state anomalies with no numeric effect": (
        "tests/methods/star/test_star.py::test_idea_matching_flags_a_state_flip_with_no_numeric_effect"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("estimator", "neurips26.methods.star.conformance:tiny_detector"),
    ("estimator", "neurips26.methods.star.conformance:tiny_numeric_detector"),
    ("module", "neurips26.methods.star.conformance:tiny_star_model"),
)

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "STARConfig",
    "STARDetector",
    "STARModel",
    "inject_star",
    "range_pr_auc",
    "range_pr_vus",
]
