"""Baselines of the SAM-hybrid experiment, each a recipe: (config, model) -> (optimizer, penalty).

Provenance:
- ERM, ERM + L2: plain ``torch.optim.Adam`` (L2 as Adam's weight decay on the ML group only).
- SAM on all parameters: **pytorch-optimizer's** ``SAM`` (library implementation).
- APHYNITY (Yin et al., ICLR 2021): **re-implemented** here: min ||F_a||^2 + lambda * L_traj with
  lambda <- lambda + tau_2 * L_traj after each step; defined for the additive shape only.
- Physics-only and NN-only: the two extremes (no ML part; no physics part, prediction only).
"""

from __future__ import annotations

import torch
from torch import nn

from neurips26.methods.samhybrid.integration import HybridModel, additive


class AphynityPenalty:
    """APHYNITY's objective in penalty form: L_traj + (1/lambda) ||F_a||^2 with lambda rising while the
    trajectory loss is large (Yin et al. 2021, Alg. 1; ``lambda_0`` and ``tau_2`` as there).

    Dividing APHYNITY's ``||F_a||^2 + lambda L_traj`` by lambda gives the same minimiser and keeps the
    trajectory loss on the same scale as for every other system.
    """

    def __init__(self, lambda0: float, tau: float) -> None:
        self.weight = lambda0
        self.tau = tau

    def __call__(self, model: nn.Module, trajectories: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
        if not isinstance(model, HybridModel) or model.ml is None or model.compose is not additive:
            raise ValueError("APHYNITY's ||F_a|| penalty needs an additive HybridModel (compose='additive')")
        states = trajectories.reshape(-1, trajectories.shape[-1])
        augmentation = model.ml(states)
        norm_sq = augmentation.pow(2).sum(-1).mean()
        if torch.is_grad_enabled():  # update lambda once per pass that trains
            self.weight += self.tau * float(loss.detach())
        return norm_sq / self.weight


class NeuralField(nn.Module):
    """NN-only baseline: dx/dt = g(x), no physics at all (prediction only, no theta)."""

    def __init__(self, ml: nn.Module) -> None:
        super().__init__()
        self.ml = ml

    def forward(self, t: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.ml(state)


def make_optimizer(kind: str, model: nn.Module, lr: float, rho: float, rho_asam: float, l2: float):
    """The optimizer of each system, on the same learning rate."""
    from pytorch_optimizer import SAM

    from neurips26.methods.samhybrid.core import SAMHybrid

    if kind in ("adam", "aphynity"):
        return torch.optim.Adam(model.parameters(), lr=lr)
    if kind == "adam_l2":
        return torch.optim.Adam(model.param_groups(weight_decay=l2), lr=lr)
    if kind == "sam_all":
        return SAM(model.parameters(), torch.optim.Adam, rho=rho, lr=lr)
    if kind == "sam_ml":
        return SAMHybrid(model.param_groups(), torch.optim.Adam, rho=rho, rho_physics=0.0, lr=lr)
    if kind == "asam_ml":
        return SAMHybrid(
            model.param_groups(), torch.optim.Adam, rho=rho_asam, rho_physics=0.0, adaptive=True, lr=lr
        )
    raise ValueError(f"unknown optimizer kind {kind!r}")
