"""DACS: dual alignment for covariate shift, stage-aware graph domain adaptation on PyG."""

from neurips26.methods.dacs.config import DACSConfig
from neurips26.methods.dacs.core import GradientReversal, prototype_edge_ratio, solve_ratio_qp
from neurips26.methods.dacs.diagnose import ShiftDiagnosis, diagnose_shift
from neurips26.methods.dacs.integration import DACS, DACSTrainer

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "stage 1 aligns h0 before propagation": (
        "tests/methods/dacs/test_dacs.py::test_idea_stage_one_aligns_representations_before_propagation"
    ),
    "stage 2's gamma moves the source's neighbour law onto the target's": (
        "tests/methods/dacs/test_dacs.py::test_idea_reweighted_source_matches_the_target_edge_distribution"
    ),
    "stage 2's weights enter training": (
        "tests/methods/dacs/test_dacs.py::test_idea_trainer_trains_on_stage_two_weights"
    ),
    "the FCSS estimate needs FS-aligned features": (
        "tests/methods/dacs/test_dacs.py::test_idea_stage_order_fcss_estimate_needs_aligned_features"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("module", "neurips26.methods.dacs.conformance:tiny_network"),
    ("module", "neurips26.methods.dacs.conformance:tiny_gradient_reversal"),
)

__all__ = [
    "CONFORMANCE",
    "DACS",
    "IDEAS",
    "DACSConfig",
    "DACSTrainer",
    "GradientReversal",
    "ShiftDiagnosis",
    "diagnose_shift",
    "prototype_edge_ratio",
    "solve_ratio_qp",
]
