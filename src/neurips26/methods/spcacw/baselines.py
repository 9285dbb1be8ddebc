"""Personalised-FL baselines on the in-process engine, vectorised over clients.

Every baseline here is RE-IMPLEMENTED from its paper (PFLlib is a set of scripts and FL4Health needs
Python < 3.11, so neither can be imported): Local-only, FedAvg (McMahan et al. 2017), FedProx (Li et al.
2020), FedAvg + fine-tuning, Ditto (Li et al. 2021), APFL (Deng et al. 2020), pFedMe (Dinh et al. 2020),
FedFomo (Zhang et al. 2021) and IFCA (Ghosh et al. 2020). All share the same model, minibatch size, step
size and number of local steps per round, so a round costs every client the same gradient evaluations
(FedFomo and IFCA add forward passes to score models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.core.validation import check_choice, check_int, check_positive
from neurips26.methods.spcacw.engine import FlatMLP, Kernels, weighted_accuracy
from neurips26.methods.spcacw.federated import ClientData

BASELINES = ("local", "fedavg", "fedprox", "fedavg_ft", "ditto", "apfl", "pfedme", "fedfomo", "ifca")


@dataclass(frozen=True)
class BaselineConfig:
    """One baseline with its hyper-parameters (defaults: the papers' suggested values where they give one)."""

    name: str
    mu: float = 0.01  # FedProx proximal weight (Li et al. 2020 tune mu in {0.001, 0.01, 0.1, 1})
    ditto_lambda: float = 0.1  # Ditto's lambda (Li et al. 2021 pick from {0.01, 0.1, 1, 2})
    finetune_steps: int = 20  # FedAvg+FT: local steps on the final global model (ours)
    apfl_alpha: float = 0.5  # APFL's initial mixing weight (Deng et al. 2020 start at 0.5)
    pfedme_lambda: float = 15.0  # pFedMe's lambda (Dinh et al. 2020 use 15 on MNIST)
    pfedme_inner: int = 3  # pFedMe's inner steps K (paper: K = 5 with a personal rate; ours: 3 to save time)
    pfedme_beta: float = 1.0  # pFedMe's server beta (paper: 1 or 2)
    ifca_clusters: int = 4  # IFCA's k: the number of concepts (an oracle count, as in Ghosh et al.)

    def __post_init__(self) -> None:
        check_choice("name", self.name, BASELINES)
        for key in ("mu", "ditto_lambda", "pfedme_lambda", "pfedme_beta"):
            check_positive(key, getattr(self, key), allow_zero=True)
        check_positive("apfl_alpha", self.apfl_alpha, allow_zero=True)
        check_int("finetune_steps", self.finetune_steps, minimum=0)
        check_int("pfedme_inner", self.pfedme_inner)
        check_int("ifca_clusters", self.ifca_clusters)


@dataclass
class BaselineRun:
    """Personal models of every client (N, P) and the accuracy of the evaluated targets per evaluation."""

    theta: torch.Tensor
    targets: list[int]
    curve: list[np.ndarray]


class _Federation:
    """Shared pieces: data, kernels, RNG, step size and the evaluation schedule."""

    def __init__(
        self, data: ClientData, model: FlatMLP, lr: float, batch: int, steps: int, seed: int
    ) -> None:
        check_positive("lr", lr)
        check_int("batch", batch)
        check_int("local_steps", steps)
        self.data, self.model, self.lr, self.batch, self.steps = data, model, lr, batch, steps
        self.kernels = Kernels(model)
        self.generator = torch.Generator().manual_seed(seed)
        self.init = model.init(1, self.generator)
        counts = data.count.double()
        self.sample_weights = (counts / counts.sum()).float()

    def grads(self, theta: torch.Tensor) -> torch.Tensor:
        """(N, P) each client's minibatch gradient at its own ``theta[i]``."""
        x, y = self.data.sample_batch(self.batch, self.generator)
        return self.kernels.per_client(theta, x, y)

    def local_sgd(self, theta: torch.Tensor, steps: int, center: torch.Tensor | None = None, mu: float = 0.0):
        """``steps`` SGD steps of every client from ``theta`` (N, P), with an optional proximal pull."""
        for _ in range(steps):
            g = self.grads(theta)
            if center is not None and mu > 0:
                g = g + mu * (theta - center)
            theta = theta - self.lr * g
        return theta

    def average(self, theta: torch.Tensor) -> torch.Tensor:
        """FedAvg's sample-count weighted mean of the clients' models -> (P,)."""
        return self.sample_weights @ theta

    def expand(self, theta: torch.Tensor) -> torch.Tensor:
        return theta.reshape(1, -1).expand(self.data.n_clients, -1).clone()


def run_baseline(
    config: BaselineConfig,
    data: ClientData,
    model: FlatMLP,
    *,
    lr: float,
    batch: int,
    local_steps: int,
    rounds: int,
    seed: int,
    targets: Sequence[int],
    eval_every: int = 10,
) -> BaselineRun:
    """Run one baseline for ``rounds`` rounds: every client's personal model and the targets' curve."""
    check_int("rounds", rounds)
    fed = _Federation(data, model, lr, batch, local_steps, seed)
    n = data.n_clients
    targets = list(targets)
    curve: list[np.ndarray] = []
    name = config.name
    glob = fed.init[0].clone()
    personal = fed.expand(glob)
    local_copy = fed.expand(glob)  # APFL's local copy of the global model; pFedMe's local w_i
    mix = torch.full((n, 1), config.apfl_alpha)
    clusters = model.init(config.ifca_clusters, fed.generator) if name == "ifca" else fed.init
    assignment = torch.zeros(n, dtype=torch.long)

    def personal_models() -> torch.Tensor:
        if name in ("fedavg", "fedprox"):
            return fed.expand(glob)
        if name == "fedavg_ft":
            return fed.local_sgd(fed.expand(glob), config.finetune_steps)
        if name == "apfl":
            return mix * personal + (1 - mix) * local_copy
        if name == "ifca":
            return clusters[assignment]
        return personal

    for r in range(rounds):
        if name == "local":
            personal = fed.local_sgd(personal, fed.steps)
        elif name in ("fedavg", "fedavg_ft"):
            glob = fed.average(fed.local_sgd(fed.expand(glob), fed.steps))
        elif name == "fedprox":
            start = fed.expand(glob)
            glob = fed.average(fed.local_sgd(start, fed.steps, center=start, mu=config.mu))
        elif name == "ditto":
            start = fed.expand(glob)
            glob = fed.average(fed.local_sgd(start, fed.steps))
            # personal models: local steps on f_i(v) + lambda/2 ||v - w||^2 around the round's global model
            personal = fed.local_sgd(personal, fed.steps, center=start, mu=config.ditto_lambda)
        elif name == "apfl":
            local_copy = fed.expand(glob)
            for _ in range(fed.steps):
                x, y = data.sample_batch(fed.batch, fed.generator)
                g_w = fed.kernels.per_client(local_copy, x, y)
                mixed = mix * personal + (1 - mix) * local_copy
                g_mix = fed.kernels.per_client(mixed, x, y)
                local_copy = local_copy - fed.lr * g_w
                personal = personal - fed.lr * mix * g_mix
                # alpha <- alpha - eta <v - w, grad f(mix)>, clipped to [0, 1] (Deng et al., Alg. 1)
                mix = (mix - fed.lr * ((personal - local_copy) * g_mix).sum(-1, keepdim=True)).clamp(0, 1)
            glob = fed.average(local_copy)
        elif name == "pfedme":
            w = fed.expand(glob)
            lam = config.pfedme_lambda
            for _ in range(fed.steps):
                theta_i = personal
                x, y = data.sample_batch(fed.batch, fed.generator)
                for _ in range(config.pfedme_inner):  # approx. argmin f_i(theta) + lam/2 ||theta - w_i||^2
                    g = fed.kernels.per_client(theta_i, x, y) + lam * (theta_i - w)
                    theta_i = theta_i - fed.lr * g
                personal = theta_i
                w = w - fed.lr * lam * (w - personal)
            glob = (1 - config.pfedme_beta) * glob + config.pfedme_beta * fed.average(w)
        elif name == "fedfomo":
            personal = _fedfomo_mix(fed, personal)
            personal = fed.local_sgd(personal, fed.steps)
        elif name == "ifca":
            x, y = data.sample_batch(fed.batch, fed.generator)
            with torch.no_grad():
                losses = fed.kernels.loss_matrix(clusters, x, y)  # (N, k)
            assignment = losses.argmin(-1)
            updated = fed.local_sgd(clusters[assignment], fed.steps)
            for k in range(config.ifca_clusters):
                members = assignment == k
                if members.any():
                    w = fed.sample_weights[members]
                    clusters[k] = (w / w.sum()) @ updated[members]
        if (r + 1) % eval_every == 0 or r == rounds - 1:
            curve.append(weighted_accuracy(model, personal_models()[targets], data, targets))
    return BaselineRun(personal_models(), targets, curve)


def _fedfomo_mix(fed: _Federation, theta: torch.Tensor) -> torch.Tensor:
    """FedFomo's first-order model update of every client (Zhang et al. 2021, Eq. 6).

    ``w_ij = max(0, (L_i(theta_i) - L_i(theta_j)) / ||theta_j - theta_i||)``, normalised over j (a client
    whose weights are all zero keeps its model); ``theta_i <- theta_i + sum_j w_ij (theta_j - theta_i)``.
    L_i is scored on a fresh minibatch of client i's training data (ours: no separate validation split,
    the target has only ~40 images).
    """
    x, y = fed.data.sample_batch(fed.batch, fed.generator)
    with torch.no_grad():
        losses = fed.kernels.loss_matrix(theta, x, y)  # (N clients, N models)
        own = losses.diagonal()
        distance = torch.cdist(theta, theta).clamp_min(1e-12)
        w = ((own[:, None] - losses) / distance).clamp_min(0)
        w.fill_diagonal_(0)
        total = w.sum(-1, keepdim=True)
        w = torch.where(total > 0, w / total.clamp_min(1e-12), w)
        return theta + w @ theta - w.sum(-1, keepdim=True) * theta
