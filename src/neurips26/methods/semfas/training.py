"""Training SEM-FAS (and every fusion system of the experiment): loss, modality dropout, the fit loop.

Loss (issue, step 6): cross-entropy on the calibrated probabilities + ``coverage_weight`` x the mean
coverage mass Tr(rho E_perp) on training data (so that a high coverage mismatch flags out-of-regime inputs
at test) + modality dropout (each modality of each sample dropped with probability q, one always kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurips26.methods.semfas.model import SEMFASOutput


def check_labels(labels: Tensor, batch: int, classes: int = 2) -> Tensor:
    """Validate binary (or C-class) labels: integers in [0, classes) with one per sample."""
    if not torch.is_tensor(labels):
        raise TypeError(f"labels must be a tensor, got {type(labels).__name__}")
    if labels.shape != (batch,):
        raise ValueError(f"labels must have shape [{batch}], got {tuple(labels.shape)}")
    if labels.is_floating_point() and not bool((labels == labels.round()).all()):
        raise ValueError("labels must be integers")
    labels = labels.long()
    if bool(((labels < 0) | (labels >= classes)).any()):
        allowed = "{0, 1}" if classes == 2 else f"[0, {classes})"
        raise ValueError(f"labels must lie in {allowed}, got values {sorted(set(labels.tolist()))[:10]}")
    return labels


def semfas_loss(output: SEMFASOutput, labels: Tensor, coverage_weight: float = 0.1) -> Tensor:
    """Cross-entropy on log p plus ``coverage_weight`` x mean Tr(rho E_perp).

    Parameters
    ----------
    output : SEMFASOutput
    labels : Tensor [B] in {0, ..., C-1} (0 live, 1 spoof)
    coverage_weight : float >= 0
    """
    if coverage_weight < 0:
        raise ValueError(f"coverage_weight must be >= 0, got {coverage_weight}")
    labels = check_labels(labels, output.probs.shape[0], output.probs.shape[1])
    return F.nll_loss(output.log_probs, labels) + coverage_weight * output.coverage_mismatch.mean()


def modality_dropout(present: Tensor, rate: float, generator: torch.Generator | None = None) -> Tensor:
    """Drop each present modality of each sample with probability ``rate``, keeping at least one.

    Parameters
    ----------
    present : Tensor [B, M] bool
    rate : float in [0, 1)
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must lie in [0, 1), got {rate}")
    if rate == 0.0:
        return present
    keep = torch.rand(present.shape, generator=generator) >= rate
    dropped = present & keep
    empty = ~dropped.any(1)
    if bool(empty.any()):  # restore one random present modality of the emptied samples
        scores = torch.rand(present[empty].shape, generator=generator) * present[empty]
        restore = F.one_hot(scores.argmax(1), present.shape[1]).bool()
        dropped[empty] = restore
    return dropped


@dataclass
class TrainSettings:
    """The optimiser settings shared by every system of the experiment."""

    epochs: int = 25
    batch_size: int = 128
    lr: float = 0.01
    weight_decay: float = 1e-4
    modality_dropout: float = 0.3
    seed: int = 0


def fit(
    model: nn.Module,
    features: Mapping[str, Tensor],
    labels: Tensor,
    settings: TrainSettings,
    present: Tensor | None = None,
) -> nn.Module:
    """Train ``model`` (any system exposing ``model(features, mask)`` and ``model.loss(output, labels,
    epoch_fraction)``) with Adam, mini-batches and modality dropout; returns it in eval mode.

    Parameters
    ----------
    features : dict[str, Tensor [N, F_m]]   per-modality inputs, in the model's modality order
    labels : Tensor [N]
    present : Tensor [N, M] bool, optional  which modalities each sample really has (all by default)
    """
    names = list(features)
    n = labels.shape[0]
    labels = check_labels(labels, n)
    if present is None:
        present = torch.ones(n, len(names), dtype=torch.bool)
    generator = torch.Generator().manual_seed(settings.seed)
    optimiser = torch.optim.Adam(
        model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay, foreach=True
    )
    model.train()
    for epoch in range(settings.epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, settings.batch_size):
            index = order[start : start + settings.batch_size]
            mask = modality_dropout(present[index], settings.modality_dropout, generator)
            output = model({m: features[m][index] for m in names}, mask)
            loss = model.loss(output, labels[index], (epoch + 1) / settings.epochs)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            after = getattr(model, "after_backward", None)
            if after is not None:
                after()
            optimiser.step()
    return model.eval()
