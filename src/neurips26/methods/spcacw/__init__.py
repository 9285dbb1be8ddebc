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

__all__ = [
    "CONFORMANCE",
    "BiasEstimator",
    "RoundRecord",
    "SPCACWConfig",
    "WeightSolution",
    "bound_value",
    "choose_weights",
    "within_client_variance",
]
