"""SAM-hybrid: sharpness-aware training of hybrid (physics + ML) models for parameter estimation."""

from neurips26.methods.samhybrid.config import SAMHybridConfig
from neurips26.methods.samhybrid.core import SAMHybrid, top_hessian_eigenvalue
from neurips26.methods.samhybrid.integration import (
    COMPOSE_SHAPES,
    FitHistory,
    HybridModel,
    IdentifiabilityReport,
    additive,
    fit_hybrid,
    identifiability_report,
    non_additive,
    output_correcting,
    rollout,
    training_sharpness,
    trajectory_loss,
)

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("optimizer", "neurips26.methods.samhybrid.conformance:tiny_optimizer"),
    ("module", "neurips26.methods.samhybrid.conformance:tiny_hybrid_model"),
)

__all__ = [
    "COMPOSE_SHAPES",
    "CONFORMANCE",
    "FitHistory",
    "HybridModel",
    "IdentifiabilityReport",
    "SAMHybrid",
    "SAMHybridConfig",
    "additive",
    "fit_hybrid",
    "identifiability_report",
    "non_additive",
    "output_correcting",
    "rollout",
    "top_hessian_eigenvalue",
    "training_sharpness",
    "trajectory_loss",
]
