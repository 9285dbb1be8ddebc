"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import torch

from neurips26.methods.dacs.core import GradientReversal
from neurips26.methods.dacs.integration import DACS
from neurips26.testing.conformance import ModuleExample


def tiny_network() -> ModuleExample:
    """The DACS GCN on a six-node ring, with per-layer edge weights (stage 2's reweighting)."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(6, 4, generator=generator)
    ring = torch.arange(6)
    edge_index = torch.stack([torch.cat([ring, (ring + 1) % 6]), torch.cat([(ring + 1) % 6, ring])])
    weights = [torch.rand(edge_index.shape[1], generator=generator) + 0.5, None]
    return ModuleExample(DACS(4, 3, hidden=8, num_layers=2), (x, edge_index), {"edge_weights": weights})


def tiny_gradient_reversal() -> ModuleExample:
    """The gradient reversal layer (identity forward, -alpha times the gradient backward)."""
    return ModuleExample(GradientReversal(alpha=0.5), (torch.linspace(-1.0, 1.0, 6).reshape(2, 3),))
