"""Baselines of the SAM-hybrid experiment: each system is a ``Recipe`` (what it trains, with which optimizer
and hyper-parameters), built from the experiment config by the factories in ``experiment.py``.

Provenance:
- ERM, ERM + L2: plain ``torch.optim.Adam`` (L2 as Adam's weight decay on the ML group only).
- SAM on all parameters: **pytorch-optimizer's** ``SAM`` (library implementation).
- APHYNITY (Yin et al., ICLR 2021): **re-implemented** here: min ||F_a||^2 + lambda * L_traj with
  lambda <- lambda + tau_2 * L_traj after each step; defined for the additive shape only.
- Physics-only and NN-only: the two extremes (no ML part; no physics part, prediction only).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from neurips26.core.validation import check_choice
from neurips26.methods.samhybrid.config import SAMHybridConfig
from neurips26.methods.samhybrid.integration import HybridModel, additive

STRUCTURES = ("hybrid", "physics", "neural")
OPTIMIZERS = ("adam", "adam_l2", "aphynity", "sam_all", "sam_hybrid")


@dataclass(frozen=True)
class Recipe:
    """One system of the experiment: what it trains and how (every hyper-parameter it uses is here).

    ``structure``: ``"hybrid"`` (physics + ML), ``"physics"`` (no ML part) or ``"neural"`` (no physics).
    ``optimizer``: ``"adam"``, ``"adam_l2"`` (weight decay on the ML group), ``"aphynity"`` (Adam plus
    APHYNITY's penalty), ``"sam_all"`` (pytorch-optimizer's SAM on every parameter, radius ``sam.rho``)
    or ``"sam_hybrid"`` (``SAMHybrid.from_config(sam)``).
    """

    name: str
    structure: str
    optimizer: str
    lr: float
    sam: SAMHybridConfig | None = None
    l2_weight: float = 0.0
    aphynity_lambda0: float = 1.0
    aphynity_tau: float = 0.0

    def __post_init__(self) -> None:
        check_choice("structure", self.structure, STRUCTURES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)

    def penalty(self) -> AphynityPenalty | None:
        """A fresh APHYNITY penalty for the ``aphynity`` recipe (its lambda is trained state), else None."""
        if self.optimizer != "aphynity":
            return None
        return AphynityPenalty(self.aphynity_lambda0, self.aphynity_tau)


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


def make_optimizer(recipe: Recipe, model: nn.Module) -> torch.optim.Optimizer:
    """The optimizer a recipe names, built from the recipe's own hyper-parameters."""
    from pytorch_optimizer import SAM

    from neurips26.methods.samhybrid.core import SAMHybrid

    if recipe.optimizer in ("adam", "aphynity"):
        return torch.optim.Adam(model.parameters(), lr=recipe.lr)
    if recipe.optimizer == "adam_l2":
        return torch.optim.Adam(model.param_groups(weight_decay=recipe.l2_weight), lr=recipe.lr)
    if recipe.sam is None:
        raise ValueError(f"recipe {recipe.name!r}: optimizer {recipe.optimizer!r} needs a SAMHybridConfig")
    if recipe.optimizer == "sam_all":
        return SAM(model.parameters(), torch.optim.Adam, rho=recipe.sam.rho, lr=recipe.lr)
    if recipe.optimizer == "sam_hybrid":
        return SAMHybrid.from_config(model.param_groups(), torch.optim.Adam, recipe.sam, lr=recipe.lr)
    raise ValueError(
        f"recipe {recipe.name!r}: unknown optimizer {recipe.optimizer!r}; choose one of {OPTIMIZERS}"
    )
