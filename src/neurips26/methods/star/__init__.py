"""STAR: a state-aware adapter for time-series foundation models in multivariate anomaly detection."""

from neurips26.methods.star.config import STARConfig
from neurips26.methods.star.core import STARModel, inject_star
from neurips26.methods.star.integration import STARDetector
from neurips26.methods.star.metrics import range_pr_auc, range_pr_vus

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("estimator", "neurips26.methods.star.conformance:tiny_detector"),
    ("estimator", "neurips26.methods.star.conformance:tiny_numeric_detector"),
    ("module", "neurips26.methods.star.conformance:tiny_star_model"),
)

__all__ = [
    "CONFORMANCE",
    "STARConfig",
    "STARDetector",
    "STARModel",
    "inject_star",
    "range_pr_auc",
    "range_pr_vus",
]
