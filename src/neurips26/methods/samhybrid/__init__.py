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

__all__ = [
    "COMPOSE_SHAPES",
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
