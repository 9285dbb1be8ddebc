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

#: Each central idea -> the test that switches it off and must then fail (pytest node id from the
#: repository root); the README's idea table says how each is switched off.
IDEAS: dict[str, str] = {
    "exact shapes through support-function GSFs": (
        "tests/methods/srlmpc/test_srlmpc_env.py::test_exact_shapes_pass_a_gap_that_circumscribed_circles_block"
    ),
    "the policy's parameters steer the controller": (
        "tests/methods/srlmpc/test_srlmpc_env.py::test_idea_the_policys_parameters_steer_the_controller"
    ),
    "the learned policy's parameters follow the neighbour geometry": (
        "tests/methods/srlmpc/test_srlmpc_env.py::test_learned_parameters_depend_on_neighbour_geometry"
    ),
    "HOCBF constraints on the GSFs keep the robot safe": (
        "tests/methods/srlmpc/test_srlmpc.py::test_hocbf_keeps_the_robot_off_a_wall_and_the_nominal_mpc_does_not"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("gym_env", "neurips26.methods.srlmpc.conformance:tiny_crowd_env"),
    ("gym_env", "neurips26.methods.srlmpc.conformance:tiny_parameter_env"),
)

__all__ = [
    "CONFORMANCE",
    "GSF",
    "HOCBFMPC",
    "IDEAS",
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
