"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import torch
from torch import nn

from neurips26.methods.samhybrid.core import SAMHybrid
from neurips26.methods.samhybrid.integration import HybridModel
from neurips26.methods.samhybrid.physics import FrictionlessPendulum
from neurips26.testing.conformance import ModuleExample


def _tiny_hybrid() -> HybridModel:
    torch.manual_seed(0)
    ml = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    return HybridModel(FrictionlessPendulum(0.7), ml, compose="additive")


def tiny_optimizer() -> SAMHybrid:
    """SAMHybrid over a pendulum hybrid's physics and ML groups, Adam as the base step."""
    return SAMHybrid(_tiny_hybrid().param_groups(), torch.optim.Adam, rho=0.05, lr=1e-2)


def tiny_hybrid_model() -> ModuleExample:
    """A pendulum + MLP hybrid vector field at four states."""
    states = torch.linspace(-1.0, 1.0, 8).reshape(4, 2)
    return ModuleExample(_tiny_hybrid(), (torch.zeros(()), states))
