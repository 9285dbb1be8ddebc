"""Baselines of the DACS experiment, all **re-implemented** here on PyG (PyGDA needs torch_sparse).

Every baseline trains the same network (:func:`~neurips26.methods.dacs.integration.build_network`: MLP
encoder, GCN layers, linear classifier) with its own loop, so the degenerate equivalences with DACS are
checked between two independent loops.

* ``source_only`` -- ERM on the source graph (re-implemented).
* ``dann_gcn`` -- the adversarial core of UDAGCN (Wu et al., WWW 2020): DANN on the final node
  embeddings (re-implemented; UDAGCN's PPMI branch and attention are left out).
* ``strurw`` -- StruRW-Adv (Liu et al., ICML 2023): source edges reweighted by
  ``B_T[y_i, y_j] / B_S[y_i, y_j]``, class-pair connection probabilities with hard target pseudo-labels,
  plus DANN on the final embeddings (re-implemented).
* ``pa_css`` / ``pa_both`` -- Pair-Align (Liu et al., ICML 2024): the edge-class-pair ratio from the
  confusion-corrected QP, ``gamma = (P_T(y_j|y_i) + delta) / (P_S(y_j|y_i) + delta)`` on source edges;
  ``pa_both`` adds the label weights ``beta`` in the source loss (re-implemented; ERM, no adversary).
* ``a2gnn`` -- A2GNN (Liu et al., AAAI 2024), asymmetric propagation: the learned layers are applied
  once in both domains, the first as a pure transformation, and the last layer's parameter-free
  normalised-adjacency smoothing runs ``target_hops`` times on the target and ``source_hops`` (0) times on
  the source; plus DANN on the final embeddings (re-implemented; the paper's main alignment loss is MMD,
  the authors' code also has an adversarial variant, which is the one we use so that only the propagation
  differs from DANN-GCN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from neurips26.core.validation import check_int
from neurips26.methods.dacs.config import DACSConfig
from neurips26.methods.dacs.core import (
    conditional_ratio,
    dann_schedule,
    domain_adversarial_loss,
    solve_ratio_qp,
)
from neurips26.methods.dacs.integration import (
    DACS,
    Callback,
    build_network,
    check_domain_pair,
    check_graph,
    estimate_label_weights,
    source_train_mask,
)

BASELINES = ("source_only", "dann_gcn", "strurw", "pa_css", "pa_both", "a2gnn")


def _pair_histogram(labels: np.ndarray, edge_index: np.ndarray, num_classes: int) -> np.ndarray:
    receiving, sending = labels[edge_index[1]], labels[edge_index[0]]
    counts = np.bincount(receiving * num_classes + sending, minlength=num_classes**2).astype(np.float64)
    return counts.reshape(num_classes, num_classes)


def strurw_edge_weights(
    source_y: np.ndarray,
    source_edge_index: np.ndarray,
    target_pseudo: np.ndarray,
    target_edge_index: np.ndarray,
    num_classes: int,
    mix: float = 1.0,
    max_weight: float = 10.0,
) -> np.ndarray:
    """StruRW: ``w = B_T / B_S`` with ``B[a, b] = #edges(a, b) / (n_a n_b)``, one weight per source edge."""
    eps = 1e-12
    n_s = np.bincount(source_y, minlength=num_classes).astype(np.float64)
    n_t = np.bincount(target_pseudo, minlength=num_classes).astype(np.float64)
    b_s = _pair_histogram(source_y, source_edge_index, num_classes) / np.maximum(np.outer(n_s, n_s), eps)
    b_t = _pair_histogram(target_pseudo, target_edge_index, num_classes) / np.maximum(np.outer(n_t, n_t), eps)
    ratio = np.where(b_s > 0, b_t / np.maximum(b_s, eps), 1.0)
    ratio = np.minimum(mix * ratio + (1.0 - mix), max_weight)
    return ratio[source_y[source_edge_index[1]], source_y[source_edge_index[0]]]


def pair_align_edge_weights(
    source_y: np.ndarray,
    source_pred: np.ndarray,
    source_edge_index: np.ndarray,
    target_pred: np.ndarray,
    target_edge_index: np.ndarray,
    num_classes: int,
    lam: float,
    delta: float,
    max_weight: float = 10.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Pair-Align's edge weights: the joint class-pair ratio from the confusion QP, then gamma.

    ``C[(k1, k2), (l1, l2)] = P_S(y_hat pair = (k1, k2), y pair = (l1, l2))`` over source edges,
    ``mu_T`` the target's predicted pair distribution, ``mu_S`` the source's true pair distribution.
    Returns (weights per source edge, gamma ``(C, C)``).
    """
    c2 = num_classes**2
    true_pair = source_y[source_edge_index[1]] * num_classes + source_y[source_edge_index[0]]
    pred_pair = source_pred[source_edge_index[1]] * num_classes + source_pred[source_edge_index[0]]
    confusion = np.zeros((c2, c2))
    np.add.at(confusion, (pred_pair, true_pair), 1.0)
    confusion /= max(true_pair.shape[0], 1)
    mu_s = np.bincount(true_pair, minlength=c2) / max(true_pair.shape[0], 1)
    target_pair = target_pred[target_edge_index[1]] * num_classes + target_pred[target_edge_index[0]]
    mu_t = np.bincount(target_pair, minlength=c2) / max(target_pair.shape[0], 1)
    # scaled by C^2 like DACS's prototype QP, so lam means the same pull towards 1 in both
    w = solve_ratio_qp(confusion * c2, mu_t * c2, mu_s, lam).reshape(num_classes, num_classes)
    gamma = np.minimum(conditional_ratio(w, mu_s.reshape(num_classes, num_classes), delta), max_weight)
    return gamma[source_y[source_edge_index[1]], source_y[source_edge_index[0]]], gamma


def asymmetric_propagate(
    model: DACS, h0: torch.Tensor, edge_index: torch.Tensor, hops: Sequence[int]
) -> torch.Tensor:
    """``h_L`` with ``hops[l]`` smoothing steps in layer ``l``: ``h_{l+1} = ReLU(Â^hops[l] (h_l W_l) + b_l)``.

    A2GNN's propagation: each layer's learned transform ``W_l, b_l`` is applied **once**; only the
    parameter-free smoothing ``Â = D^-1/2 (A + I) D^-1/2`` (GCN's, unit edge weights) is repeated, so
    extra steps never feed a layer's output back into learned weights. ``hops = (1, ..., 1)`` is
    :meth:`DACS.propagate` exactly; a layer with 0 steps is a pure transformation.
    """
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    if len(hops) != model.num_layers:
        raise ValueError(f"hops must give one step count per layer ({model.num_layers}), got {list(hops)}")
    h = h0
    for conv, steps in zip(model.convs, hops, strict=True):
        h = nn.functional.dropout(h, model.dropout, model.training)
        norm_index, norm_weight = gcn_norm(
            edge_index, None, h.size(0), conv.improved, conv.add_self_loops, conv.flow, h.dtype
        )
        out = conv.lin(h)
        for _ in range(steps):
            out = conv.propagate(norm_index, x=out, edge_weight=norm_weight)
        if conv.bias is not None:
            out = out + conv.bias
        h = torch.relu(out)
    return h


def a2gnn_hops(num_layers: int, last_layer_steps: int) -> tuple[int, ...]:
    """A2GNN's schedule on our network: transformations only, then ``last_layer_steps`` in the last layer.

    As in the authors' code, the layers before are pure transformations in both domains and only one
    layer's step count differs between source and target.
    """
    return (0,) * (num_layers - 1) + (last_layer_steps,)


class GDABaselineTrainer:
    """One of the re-implemented baselines, trained on the same network as DACS.

    Parameters
    ----------
    method: one of ``BASELINES``.
    config: the shared :class:`DACSConfig` (width, depth, optimiser, epochs, warm-up, re-estimation
        period, ``lambda_final`` as the DANN weight, ``ratio_lambda``/``ratio_delta``/``label_lambda`` for
        Pair-Align); DACS-only fields are not read.
    target_hops: A2GNN's parameter-free propagation steps on the target (in the last GCN layer, whose
        learned weights are applied once; see :func:`asymmetric_propagate` and :func:`a2gnn_hops`).
    source_hops: A2GNN's steps on the source (0, as in the paper: no propagation on the source graph).
    """

    def __init__(
        self,
        method: str,
        config: DACSConfig | None = None,
        target_hops: int = 3,
        source_hops: int = 0,
        **overrides: Any,
    ):
        if method not in BASELINES:
            raise ValueError(f"method={method!r} is not allowed; choose one of {list(BASELINES)}")
        if config is None:
            config = DACSConfig(**overrides)
        elif overrides:
            config = DACSConfig(**{**asdict(config), **overrides})
        check_int("target_hops", target_hops, minimum=1)
        check_int("source_hops", source_hops, minimum=0)
        if source_hops > target_hops:
            raise ValueError(
                f"source_hops ({source_hops}) must not exceed target_hops ({target_hops}): "
                "A2GNN propagates more on the target"
            )
        self.method = method
        self.config = config
        self.target_hops = target_hops
        self.source_hops = source_hops
        self.model_: DACS | None = None
        self.edge_weights_: torch.Tensor | None = None
        self.label_weights_: torch.Tensor | None = None

    @property
    def adversarial(self) -> bool:
        return self.method in ("dann_gcn", "strurw", "a2gnn") and self.config.lambda_final > 0

    def _propagate_target(self, model: DACS, h0: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.method == "a2gnn":  # asymmetric: more parameter-free propagation steps on the target
            return asymmetric_propagate(model, h0, edge_index, a2gnn_hops(model.num_layers, self.target_hops))
        return model.propagate(h0, edge_index)

    def _propagate_source(
        self, model: DACS, h0: torch.Tensor, edge_index: torch.Tensor, weights: list | None
    ) -> torch.Tensor:
        if self.method == "a2gnn":  # A2GNN never reweights edges, so weights is None here
            return asymmetric_propagate(model, h0, edge_index, a2gnn_hops(model.num_layers, self.source_hops))
        return model.propagate(h0, edge_index, weights)

    @torch.no_grad()
    def _reestimate(self, source: Any, target: Any) -> None:
        model, config = self.model_, self.config
        assert model is not None
        model.eval()
        num_classes = model.classifier.out_features
        weights = None if self.edge_weights_ is None else [self.edge_weights_] * model.num_layers
        logits_s = model(source.x, source.edge_index, weights)
        logits_t = model(target.x, target.edge_index)
        pred_s, pred_t = logits_s.argmax(1).numpy(), logits_t.argmax(1).numpy()
        y_s = source.y.numpy()
        src_edges, tgt_edges = source.edge_index.numpy(), target.edge_index.numpy()
        if self.method == "strurw":
            w = strurw_edge_weights(
                y_s, src_edges, pred_t, tgt_edges, num_classes, 1.0, config.max_edge_weight
            )
        else:
            w, _ = pair_align_edge_weights(
                y_s,
                pred_s,
                src_edges,
                pred_t,
                tgt_edges,
                num_classes,
                config.ratio_lambda,
                config.ratio_delta,
                config.max_edge_weight,
            )
        self.edge_weights_ = torch.as_tensor(w, dtype=source.x.dtype)
        if self.method == "pa_both":
            mask = source_train_mask(source)
            self.label_weights_ = estimate_label_weights(
                logits_s[mask], source.y[mask], logits_t, num_classes, config.label_lambda
            )
        model.train()

    def fit(self, source: Any, target: Any, callback: Callback | None = None) -> GDABaselineTrainer:
        """Train on labelled ``source`` and unlabelled ``target``; returns ``self``."""
        check_domain_pair(source, target)
        config = self.config
        model = build_network(config, source.x.shape[1], int(source.y.max()) + 1)
        self.model_ = model
        mask = source_train_mask(source)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.edge_weights_, self.label_weights_ = None, None
        reweights = self.method in ("strurw", "pa_css", "pa_both")
        model.train()
        for epoch in range(config.epochs):
            due = (
                epoch >= config.warmup_epochs
                and (epoch - config.warmup_epochs) % config.reestimate_every == 0
            )
            if reweights and due:
                self._reestimate(source, target)
            alpha = dann_schedule(epoch / config.epochs, config.adversarial_gamma)
            weights = None if self.edge_weights_ is None else [self.edge_weights_] * model.num_layers
            h0_s = model.encode(source.x)
            h_s = self._propagate_source(model, h0_s, source.edge_index, weights)
            logits = model.classifier(h_s)
            loss = nn.functional.cross_entropy(logits[mask], source.y[mask], weight=self.label_weights_)
            if self.adversarial:
                h0_t = model.encode(target.x)
                h_t = self._propagate_target(model, h0_t, target.edge_index)
                adv = domain_adversarial_loss(model.final_discriminator, h_s, h_t, alpha)
                loss = loss + config.lambda_final * adv
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if callback is not None:
                callback(epoch, model)
        model.eval()
        return self

    @torch.no_grad()
    def predict_logits(self, data: Any, domain: str = "target") -> torch.Tensor:
        """Logits ``(N, C)``; A2GNN propagates ``target_hops`` steps when ``domain='target'``, else
        ``source_hops``."""
        if self.model_ is None:
            raise RuntimeError("call fit(source, target) before predict")
        check_graph("data", data)
        model = self.model_
        model.eval()
        if domain not in ("source", "target"):
            raise ValueError(f"domain must be 'source' or 'target', got {domain!r}")
        h0 = model.encode(data.x)
        if domain == "target":
            return model.classifier(self._propagate_target(model, h0, data.edge_index))
        return model.classifier(self._propagate_source(model, h0, data.edge_index, None))

    def predict(self, data: Any, domain: str = "target") -> torch.Tensor:
        """Predicted class per node ``(N,)``."""
        return self.predict_logits(data, domain).argmax(dim=1)
