"""SRL-MPC: shape-aware RL-tuned MPC with support-function HOCBF constraints, in a gymnasium crowd env."""

from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.controllers import (
    HOCBFMPCController,
    ORCAController,
    PolicyController,
    SocialForceController,
)
from neurips26.methods.srlmpc.geometry import (
    GSF,
    ConvexShape,
    ShapeBatch,
    geometric_separation_features,
    signed_distance,
)
from neurips26.methods.srlmpc.hocbf_mpc import HOCBFMPC, MPCParameters, Neighbours
from neurips26.methods.srlmpc.integration import CrowdConfig, ShapeCrowdEnv
from neurips26.methods.srlmpc.training import load_best_constant
from neurips26.methods.srlmpc.tuner import MPCParameterEnv, SRLMPCController

__all__ = [
    "GSF",
    "HOCBFMPC",
    "ConvexShape",
    "CrowdConfig",
    "HOCBFMPCController",
    "MPCParameterEnv",
    "MPCParameters",
    "Neighbours",
    "ORCAController",
    "PolicyController",
    "SRLMPCConfig",
    "SRLMPCController",
    "ShapeBatch",
    "ShapeCrowdEnv",
    "SocialForceController",
    "geometric_separation_features",
    "load_best_constant",
    "signed_distance",
]
