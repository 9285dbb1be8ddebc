"""DACS on PyG: the ``DACS`` module and ``DACSTrainer(config).fit(source, target)``.

Paper: "Dual Alignment for Covariate Shift" (DACS, NeurIPS 2026). The loss is

    CE_src(f(h_L^S), y^S; beta) + lambda_1 L_adv(h_0) + lambda_3 L_adv(h_L)

with ``h_0 = phi(x)`` (node-wise MLP, stage 1 aligns it), ``h_{l+1} = ReLU(GCNConv_l(h_l, A, w^(l)))``
where the source's edge weights ``w^(l)`` are the feature-conditional edge ratio of layer ``l`` (stage 2),
and ``L_adv`` is DANN's discriminator loss behind a gradient-reversal layer (stages 1 and 3).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from neurips26.core.validation import check_int
from neurips26.methods.dacs.config import DACSConfig
from neurips26.methods.dacs.core import (
    EdgeRatioEstimate,
    dann_schedule,
    density_ratio_edge_weights,
    domain_adversarial_loss,
    prototype_edge_ratio,
    solve_ratio_qp,
)


def _discriminator(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class DACS(nn.Module):
    """The DACS network: node-wise encoder, GCN propagation with per-layer edge weights, classifier.

    Parameters
    ----------
    in_dim: input feature dimension ``d``.
    num_classes: number of classes ``C``.
    hidden: width of ``h_0 ... h_L`` and of both discriminators.
    num_layers: number of GCN layers ``L``.
    dropout: dropout before each GCN layer.

    Shapes: ``x (N, d)``, ``edge_index (2, E)`` with messages ``edge_index[0] -> edge_index[1]``,
    ``edge_weights``: None or a list of ``L`` tensors ``(E,)`` (None entries mean unit weights);
    ``forward`` returns logits ``(N, C)``.
    """

    def __init__(
        self, in_dim: int, num_classes: int, hidden: int = 64, num_layers: int = 2, dropout: float = 0.0
    ) -> None:
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU())
        self.convs = nn.ModuleList(GCNConv(hidden, hidden) for _ in range(num_layers))
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_discriminator = _discriminator(hidden)
        self.final_discriminator = _discriminator(hidden)
        self.dropout = dropout

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``h_0 = phi(x)``: node-wise, before any propagation (where stage 1 aligns)."""
        return self.encoder(x)

    def propagate_layer(
        self, layer: int, h: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None
    ) -> torch.Tensor:
        """``h_{l+1} = ReLU(GCNConv_l(h_l, A, w^(l)))``."""
        h = nn.functional.dropout(h, self.dropout, self.training)
        return torch.relu(self.convs[layer](h, edge_index, edge_weight))

    def propagate(
        self,
        h0: torch.Tensor,
        edge_index: torch.Tensor,
        edge_weights: list[torch.Tensor | None] | None = None,
    ) -> torch.Tensor:
        """``h_L`` from ``h_0`` through every layer (stage 2's weights per layer, None = unit)."""
        h = h0
        for layer in range(self.num_layers):
            weight = None if edge_weights is None else edge_weights[layer]
            h = self.propagate_layer(layer, h, edge_index, weight)
        return h

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        edge_weights: list[torch.Tensor | None] | None = None,
    ) -> torch.Tensor:
        return self.classifier(self.propagate(self.encode(x), edge_index, edge_weights))


def build_network(config: DACSConfig, in_dim: int, num_classes: int) -> DACS:
    """The network every system of the experiment shares (same initial weights for the same seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return DACS(in_dim, num_classes, config.hidden, config.num_layers, config.dropout)


# ---------------------------------------------------------------------------------------------------------
# input checks shared by DACS and the baselines


def check_graph(name: str, data: Any, *, needs_labels: bool = False) -> None:
    """Raise a clear error when ``data`` is not a usable PyG ``Data`` (naming ``name``)."""
    for attribute in ("x", "edge_index"):
        if getattr(data, attribute, None) is None:
            raise TypeError(
                f"{name} must be a torch_geometric Data with .{attribute}, got {type(data).__name__}"
            )
    x, edge_index = data.x, data.edge_index
    if not torch.is_tensor(x) or x.dim() != 2 or not x.is_floating_point():
        raise ValueError(f"{name}.x must be a float tensor of shape (num_nodes, num_features)")
    if x.shape[0] == 0:
        raise ValueError(f"{name} has no nodes")
    if not torch.is_tensor(edge_index) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{name}.edge_index must be a (2, num_edges) integer tensor")
    if edge_index.is_floating_point():
        raise TypeError(f"{name}.edge_index must hold integers, got {edge_index.dtype}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= x.shape[0]):
        raise ValueError(
            f"{name}.edge_index refers to nodes outside [0, {x.shape[0]}): "
            f"min {int(edge_index.min())}, max {int(edge_index.max())}"
        )
    if needs_labels:
        y = getattr(data, "y", None)
        if y is None:
            raise ValueError(f"{name}.y is required: unsupervised domain adaptation needs source labels")
        if y.shape[0] != x.shape[0] or y.dtype not in (torch.long, torch.int32, torch.int64):
            raise ValueError(f"{name}.y must be an integer tensor of shape ({x.shape[0]},)")


def check_domain_pair(source: Any, target: Any) -> None:
    """Checks of ``fit(source, target)``; target labels are warned about and never read."""
    check_graph("source", source, needs_labels=True)
    check_graph("target", target)
    if source.x.shape[1] != target.x.shape[1]:
        raise ValueError(
            f"target.x has {target.x.shape[1]} features but source.x has {source.x.shape[1]}: "
            "both domains need the same feature space"
        )
    if getattr(target, "y", None) is not None:
        warnings.warn(
            "target.y is present: it is ignored (unsupervised domain adaptation never reads target labels)",
            UserWarning,
            stacklevel=3,
        )


def source_train_mask(source: Any) -> torch.Tensor:
    """``source.train_mask`` if present, else every node."""
    mask = getattr(source, "train_mask", None)
    if mask is None:
        return torch.ones(source.num_nodes, dtype=torch.bool, device=source.x.device)
    if mask.dtype != torch.bool or mask.shape[0] != source.num_nodes or not bool(mask.any()):
        raise ValueError("source.train_mask must be a non-empty boolean mask of length num_nodes")
    return mask


def estimate_label_weights(
    source_logits: torch.Tensor,
    source_y: torch.Tensor,
    target_logits: torch.Tensor,
    num_classes: int,
    lam: float,
) -> torch.Tensor:
    """Pair-Align's label weights ``beta = P_T(y) / P_S(y)`` by the ratio QP on the confusion matrix.

    ``C[k, l] = P_S(y_hat = k, y = l)``, ``mu_T[k] = P_T(y_hat = k)``, ``mu_S[l] = P_S(y = l)`` (BBSE-style).
    """
    pred_s = source_logits.argmax(dim=1).cpu().numpy()
    pred_t = target_logits.argmax(dim=1).cpu().numpy()
    truth = source_y.cpu().numpy()
    confusion = np.zeros((num_classes, num_classes))
    np.add.at(confusion, (pred_s, truth), 1.0)
    confusion /= max(len(truth), 1)
    mu_t = np.bincount(pred_t, minlength=num_classes) / max(len(pred_t), 1)
    mu_s = np.bincount(truth, minlength=num_classes) / max(len(truth), 1)
    beta = solve_ratio_qp(confusion, mu_t, mu_s, lam)
    return torch.as_tensor(beta, dtype=source_logits.dtype, device=source_logits.device)


Callback = Callable[[int, DACS], None]


def _neighbor_loaders(
    source: Any, target: Any, num_neighbors: list[int], batch_size: int, seed: int
) -> tuple[Any, Any]:
    """PyG ``NeighborLoader`` over the source's training nodes and over every target node."""
    import torch_geometric.typing as pyg_typing
    from torch_geometric.loader import NeighborLoader

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        raise ImportError(
            "fit_sampled's NeighborLoader needs pyg-lib or torch-sparse (neither is installed); "
            "use fit() for full-batch training or pass loaders=(source_batches, target_batches)"
        )
    generator = torch.Generator().manual_seed(seed)
    keep = ("x", "edge_index", "y")
    source_graph = source.__class__(**{key: source[key] for key in keep})
    target_graph = target.__class__(x=target.x, edge_index=target.edge_index)
    train = source_train_mask(source)
    return (
        NeighborLoader(
            source_graph,
            num_neighbors=num_neighbors,
            batch_size=batch_size,
            input_nodes=train.nonzero().view(-1),
            shuffle=True,
            generator=generator,
        ),
        NeighborLoader(
            target_graph,
            num_neighbors=num_neighbors,
            batch_size=batch_size,
            shuffle=True,
            generator=generator,
        ),
    )


class DACSTrainer:
    """Unsupervised node-level domain adaptation with DACS's three stages.

    Parameters
    ----------
    config: a :class:`DACSConfig` (or None for the defaults); keyword overrides replace its fields.

    Attributes (after ``fit``)
    -------------------------
    model_: the trained :class:`DACS`.
    edge_weights_: list of ``L`` tensors ``(E_S,)``, the source edge weights of each layer (ones when
        stage 2 is off or still warming up).
    ratio_estimates_: the last :class:`EdgeRatioEstimate` of each layer (prototype estimator only).
    label_weights_: ``beta`` (``(C,)``) when ``label_weights=True``, else None.
    history_: one dict per epoch: loss terms and the reversal coefficient.
    reestimation_seconds_: wall time spent re-estimating stage 2's weights.

    Example
    -------
    >>> trainer = DACSTrainer(DACSConfig(epochs=50)).fit(source, target)  # doctest: +SKIP
    >>> labels = trainer.predict(target)  # doctest: +SKIP
    """

    def __init__(self, config: DACSConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = DACSConfig(**overrides)
        elif overrides:
            config = DACSConfig(**{**asdict(config), **overrides})
        if not isinstance(config, DACSConfig):
            raise TypeError(f"config must be a DACSConfig, got {type(config).__name__}")
        self.config = config
        self.model_: DACS | None = None
        self.edge_weights_: list[torch.Tensor] = []
        self.ratio_estimates_: list[EdgeRatioEstimate] = []
        self.label_weights_: torch.Tensor | None = None
        self.history_: list[dict[str, float]] = []
        self.reestimation_seconds_ = 0.0

    # -- stage 2 ------------------------------------------------------------------------------------------
    @torch.no_grad()
    def _reestimate(self, source: Any, target: Any) -> None:
        """Recompute every layer's source edge weights, layer by layer, on the current representations."""
        import time

        start = time.perf_counter()
        model, config = self.model_, self.config
        assert model is not None
        was_training = model.training
        model.eval()
        h_s, h_t = model.encode(source.x), model.encode(target.x)
        weights: list[torch.Tensor] = []
        estimates: list[EdgeRatioEstimate] = []
        for layer in range(model.num_layers):
            if config.ratio_estimator == "prototype":
                estimate = prototype_edge_ratio(
                    h_s,
                    h_t,
                    source.edge_index,
                    target.edge_index,
                    k=config.n_prototypes,
                    lam=config.ratio_lambda,
                    delta=config.ratio_delta,
                    seed=config.seed + layer,
                    max_weight=config.max_edge_weight,
                    init=self.ratio_estimates_[layer].centers if self.ratio_estimates_ else None,
                )
                estimates.append(estimate)
                weight = estimate.weights
            else:
                weight = density_ratio_edge_weights(
                    h_s,
                    h_t,
                    source.edge_index,
                    target.edge_index,
                    seed=config.seed + layer,
                    shrink=min(config.ratio_delta, 1.0),
                    max_weight=config.max_edge_weight,
                )
            weights.append(weight)
            h_s = model.propagate_layer(layer, h_s, source.edge_index, weight)
            h_t = model.propagate_layer(layer, h_t, target.edge_index, None)
        if config.label_weights:
            logits_s = model.classifier(h_s)
            logits_t = model.classifier(h_t)
            mask = source_train_mask(source)
            self.label_weights_ = estimate_label_weights(
                logits_s[mask], source.y[mask], logits_t, logits_s.shape[1], config.label_lambda
            )
        model.train(was_training)
        self.edge_weights_ = weights
        self.ratio_estimates_ = estimates
        self.reestimation_seconds_ += time.perf_counter() - start

    def _is_reestimation_epoch(self, epoch: int) -> bool:
        config = self.config
        needs = config.structure_reweighting or config.label_weights
        return (
            needs
            and epoch >= config.warmup_epochs
            and (epoch - config.warmup_epochs) % config.reestimate_every == 0
        )

    # -- training -----------------------------------------------------------------------------------------
    def fit(self, source: Any, target: Any, callback: Callback | None = None) -> DACSTrainer:
        """Train on labelled ``source`` and unlabelled ``target`` (PyG ``Data``); returns ``self``.

        ``callback(epoch, model)`` is called after every epoch (e.g. to track a validation score).
        """
        self._check_inputs(source, target)
        config = self.config
        model, optimizer, mask = self._start_training(source)
        for epoch in range(config.epochs):
            if self._is_reestimation_epoch(epoch):
                self._reestimate(source, target)
            alpha = dann_schedule(epoch / config.epochs, config.adversarial_gamma)
            weights = self.edge_weights_ if config.structure_reweighting else None
            h0_s = model.encode(source.x)
            h_s = model.propagate(h0_s, source.edge_index, weights)
            logits = model.classifier(h_s)
            loss_ce = nn.functional.cross_entropy(logits[mask], source.y[mask], weight=self.label_weights_)
            loss = loss_ce
            record = {"epoch": float(epoch), "alpha": alpha, "ce": float(loss_ce.detach())}
            if config.lambda_feature > 0 or config.lambda_final > 0:
                h0_t = model.encode(target.x)
                if config.lambda_feature > 0:  # stage 1: align h_0 before message passing
                    adv0 = domain_adversarial_loss(model.feature_discriminator, h0_s, h0_t, alpha)
                    loss = loss + config.lambda_feature * adv0
                    record["adv_feature"] = float(adv0.detach())
                if config.lambda_final > 0:  # stage 3: align the final embeddings
                    h_t = model.propagate(h0_t, target.edge_index, None)
                    adv_l = domain_adversarial_loss(model.final_discriminator, h_s, h_t, alpha)
                    loss = loss + config.lambda_final * adv_l
                    record["adv_final"] = float(adv_l.detach())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            self.history_.append(record)
            if callback is not None:
                callback(epoch, model)
        model.eval()
        return self

    # -- sampled (mini-batch) training ---------------------------------------------------------------------
    def _check_inputs(self, source: Any, target: Any) -> None:
        check_domain_pair(source, target)
        config = self.config
        if config.structure_reweighting and config.n_prototypes > source.num_nodes + target.num_nodes:
            raise ValueError(
                f"n_prototypes={config.n_prototypes} exceeds the number of nodes in both domains "
                f"({source.num_nodes + target.num_nodes})"
            )

    def _start_training(self, source: Any) -> tuple[DACS, torch.optim.Optimizer, torch.Tensor]:
        """A fresh network, its optimizer and the source training mask; unit edge weights, empty logs."""
        config = self.config
        model = build_network(config, source.x.shape[1], int(source.y.max()) + 1)
        self.model_ = model
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        ones = torch.ones(source.edge_index.shape[1], dtype=source.x.dtype)
        self.edge_weights_ = [ones for _ in range(model.num_layers)]
        self.ratio_estimates_, self.label_weights_, self.history_ = [], None, []
        self.reestimation_seconds_ = 0.0
        model.train()
        return model, optimizer, source_train_mask(source)

    def fit_sampled(
        self,
        source: Any,
        target: Any,
        *,
        num_neighbors: list[int] | None = None,
        batch_size: int = 512,
        loaders: tuple[Any, Any] | None = None,
        callback: Callback | None = None,
    ) -> DACSTrainer:
        """Train on sampled subgraphs instead of the full graphs; returns ``self``.

        By default two ``torch_geometric.loader.NeighborLoader`` (source seeds: its training nodes;
        target seeds: every node) draw ``num_neighbors`` per layer (default 10 per layer) around
        ``batch_size`` seed nodes; PyG's sampler needs ``pyg-lib`` or ``torch-sparse`` (an ``ImportError``
        says so). ``loaders=(source_batches, target_batches)`` replaces them with any iterables of PyG
        batches carrying ``n_id``, ``e_id`` (source) and ``batch_size`` like ``NeighborLoader``'s.

        Stage 2's weights are re-estimated on the full graphs (``O(N + E)``, amortised as in ``fit``) and
        gathered per batch by its edge ids; the loss terms use the seed nodes (the first ``batch_size``
        nodes of a batch); the target loader is cycled when it has fewer batches than the source's.
        """
        self._check_inputs(source, target)
        config = self.config
        check_int("batch_size", batch_size, minimum=1)
        if loaders is None:
            num_neighbors = [10] * config.num_layers if num_neighbors is None else list(num_neighbors)
            if len(num_neighbors) != config.num_layers:
                raise ValueError(
                    f"num_neighbors needs one count per layer ({config.num_layers}), got {num_neighbors}"
                )
            loaders = _neighbor_loaders(source, target, num_neighbors, batch_size, config.seed)
        source_batches, target_batches = loaders
        model, optimizer, train = self._start_training(source)
        for epoch in range(config.epochs):
            if self._is_reestimation_epoch(epoch):
                self._reestimate(source, target)
            alpha = dann_schedule(epoch / config.epochs, config.adversarial_gamma)
            target_iter = iter(target_batches)
            for batch_s in source_batches:
                batch_t = next(target_iter, None)
                if batch_t is None:  # cycle the target batches
                    target_iter = iter(target_batches)
                    batch_t = next(target_iter)
                record = self._sampled_step(model, optimizer, batch_s, batch_t, train, alpha)
                self.history_.append({"epoch": float(epoch), **record})
            if callback is not None:
                callback(epoch, model)
        model.eval()
        return self

    def _sampled_step(
        self,
        model: DACS,
        optimizer: torch.optim.Optimizer,
        batch_s: Any,
        batch_t: Any,
        train: torch.Tensor,
        alpha: float,
    ) -> dict[str, float]:
        """One optimiser step on a source batch and a target batch (seed nodes first in each)."""
        config = self.config
        n_s, n_t = int(batch_s.batch_size), int(batch_t.batch_size)
        weights = None
        if config.structure_reweighting:
            weights = [weight[batch_s.e_id] for weight in self.edge_weights_]
        h0_s = model.encode(batch_s.x)
        h_s = model.propagate(h0_s, batch_s.edge_index, weights)
        logits = model.classifier(h_s[:n_s])
        seeds = train[batch_s.n_id[:n_s]]
        labels = batch_s.y[:n_s][seeds]
        loss_ce = nn.functional.cross_entropy(logits[seeds], labels, weight=self.label_weights_)
        loss = loss_ce
        record = {"alpha": alpha, "ce": float(loss_ce.detach())}
        if config.lambda_feature > 0 or config.lambda_final > 0:
            h0_t = model.encode(batch_t.x)
            if config.lambda_feature > 0:  # stage 1 on the seed nodes' h_0
                adv0 = domain_adversarial_loss(model.feature_discriminator, h0_s[:n_s], h0_t[:n_t], alpha)
                loss = loss + config.lambda_feature * adv0
                record["adv_feature"] = float(adv0.detach())
            if config.lambda_final > 0:  # stage 3 on the seed nodes' h_L
                h_t = model.propagate(h0_t, batch_t.edge_index, None)
                adv_l = domain_adversarial_loss(model.final_discriminator, h_s[:n_s], h_t[:n_t], alpha)
                loss = loss + config.lambda_final * adv_l
                record["adv_final"] = float(adv_l.detach())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return record

    # -- inference ----------------------------------------------------------------------------------------
    def _require_fitted(self) -> DACS:
        if self.model_ is None:
            raise RuntimeError("call fit(source, target) before predict")
        return self.model_

    @torch.no_grad()
    def predict_logits(self, data: Any) -> torch.Tensor:
        """Logits ``(N, C)`` on ``data`` with its own, unweighted edges."""
        model = self._require_fitted()
        check_graph("data", data)
        if data.x.shape[1] != model.encoder[0].in_features:
            raise ValueError(
                f"data.x has {data.x.shape[1]} features, "
                f"the model was fitted on {model.encoder[0].in_features}"
            )
        model.eval()
        return model(data.x, data.edge_index)

    def predict(self, data: Any) -> torch.Tensor:
        """Predicted class per node ``(N,)``."""
        return self.predict_logits(data).argmax(dim=1)

    def state_copy(self) -> dict[str, torch.Tensor]:
        """A detached copy of the model's ``state_dict`` (for checkpoint selection)."""
        return copy.deepcopy(self._require_fitted().state_dict())
