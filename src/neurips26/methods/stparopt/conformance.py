"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import torch

from neurips26.methods.stparopt.frontend import parse_function
from neurips26.methods.stparopt.model import STParOptModel, make_batch
from neurips26.methods.stparopt.pipeline import example_graph
from neurips26.testing.conformance import ModuleExample

_SOURCE = """
void saxpy_scatter(int n, float *y, const float *x, const int *idx) {
  for (int i = 0; i < n; i++) y[i] = 2.0f * x[i] + y[i];
  for (int i = 0; i < n; i++) y[idx[i]] = x[i] * 0.5f;
}
"""


def tiny_model() -> ModuleExample:
    """STParOpt's classifier on two unprofiled loops, the gate forced open (tau=0) so fusion runs."""
    torch.manual_seed(0)
    function = parse_function(_SOURCE)
    batch = make_batch([example_graph(function, loop, None) for loop in function.loops])
    return ModuleExample(STParOptModel(hidden=8, layers=1, heads=2, tau=0.0), (batch,))
