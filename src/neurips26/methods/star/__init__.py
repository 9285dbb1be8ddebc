"""STAR: a state-aware adapter for time-series foundation models in multivariate anomaly detection."""

from neurips26.methods.star.config import STARConfig
from neurips26.methods.star.core import STARModel, inject_star
from neurips26.methods.star.integration import STARDetector
from neurips26.methods.star.metrics import range_pr_auc, range_pr_vus

__all__ = ["STARConfig", "STARDetector", "STARModel", "inject_star", "range_pr_auc", "range_pr_vus"]
