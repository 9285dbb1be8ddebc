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

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "the ascent follows the gradient (sharpness-awareness), which lowers theta's error": (
        "tests/methods/samhybrid/test_samhybrid.py::test_idea_sam_on_the_ml_part_lowers_theta_error_and_a_random_ball_does_not"
    ),
    "only the ML part is perturbed (rho_physics = 0 reaches the physics group)": (
        "tests/methods/samhybrid/test_samhybrid.py::test_idea_fit_hybrid_perturbs_only_the_ml_part_by_the_whole_radius"
    ),
    "the ascent norm spans the perturbed groups only (the whole radius goes to the ML part)": (
        "tests/methods/samhybrid/test_samhybrid.py::test_idea_fit_hybrid_perturbs_only_the_ml_part_by_the_whole_radius"
    ),
}

__all__ = [
    "COMPOSE_SHAPES",
    "CONFORMANCE",
    "IDEAS",
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
