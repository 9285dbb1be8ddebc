"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

from neurips26.methods.srlmpc.integration import CrowdConfig, ShapeCrowdEnv
from neurips26.methods.srlmpc.tuner import MPCParameterEnv


def tiny_crowd_env() -> ShapeCrowdEnv:
    """The shape-aware crowd navigation env with five bodies."""
    return ShapeCrowdEnv(CrowdConfig(n_bodies=5))


def tiny_parameter_env() -> MPCParameterEnv:
    """The MPC-parameter tuning env (actions are HOCBF-MPC parameters) with five bodies."""
    return MPCParameterEnv(CrowdConfig(n_bodies=5))
