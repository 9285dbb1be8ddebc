"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import torch

from neurips26.methods.semfas.encoders import MLPEncoder
from neurips26.methods.semfas.model import SEMFAS
from neurips26.testing.conformance import ModuleExample

_MODALITIES = ("rgb", "depth", "ir")


def tiny_model() -> ModuleExample:
    """SEM-FAS over three modalities with MLP encoders; the depth modality is missing for one sample."""
    torch.manual_seed(0)
    encoders = {name: MLPEncoder(5, hidden=6) for name in _MODALITIES}
    model = SEMFAS(encoders, dim=4, heads=2, povm_rank=2)
    generator = torch.Generator().manual_seed(1)
    inputs = {name: torch.randn(3, 5, generator=generator) for name in _MODALITIES}
    mask = torch.tensor([[True, True, True], [True, False, True], [True, True, True]])
    return ModuleExample(model, (inputs,), {"mask": mask})
