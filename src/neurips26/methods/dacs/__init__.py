"""DACS: dual alignment for covariate shift, stage-aware graph domain adaptation on PyG."""

from neurips26.methods.dacs.config import DACSConfig
from neurips26.methods.dacs.core import GradientReversal, prototype_edge_ratio, solve_ratio_qp
from neurips26.methods.dacs.diagnose import ShiftDiagnosis, diagnose_shift
from neurips26.methods.dacs.integration import DACS, DACSTrainer

__all__ = [
    "DACS",
    "DACSConfig",
    "DACSTrainer",
    "GradientReversal",
    "ShiftDiagnosis",
    "diagnose_shift",
    "prototype_edge_ratio",
    "solve_ratio_qp",
]
