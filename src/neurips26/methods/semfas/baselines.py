"""The baselines of the issue, on the same per-modality encoders as SEM-FAS.

All take ``model(inputs, mask)`` with ``inputs`` a dict of per-modality tensors and ``mask`` [B, M] bool
(missing modalities are zero-filled *and* masked, as in MMDG's missing-modality protocol) and return a
:class:`FusionOutput`; ``model.loss(output, labels, epoch_fraction)`` is their training loss.

- :class:`ConcatERM`: concatenated features, a linear classifier (also the body of the temperature-scaling
  and MC-dropout baselines, and with one modality the RGB-only control).
- :class:`LateFusion`: one classifier per modality, probabilities averaged over the present ones.
- :class:`MMDGLite` (re-implemented, simplified from MMDG, Lin et al. CVPR 2024): uncertainty-weighted
  cross-modal suppression + ReGrad-style gradient rebalancing.
- :class:`TMCFusion` (re-implemented from Han et al., ICLR 2021 "Trusted Multi-View Classification"):
  Dirichlet evidence per modality, reduced Dempster-Shafer combination, ACE + annealed KL loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurips26.methods.semfas.training import check_labels


@dataclass
class FusionOutput:
    """log_probs [B, C]; uncertainty [B] (the system's own score, higher = less sure)."""

    log_probs: Tensor
    uncertainty: Tensor

    @property
    def probs(self) -> Tensor:
        return self.log_probs.exp()


def entropy(log_probs: Tensor) -> Tensor:
    return -(log_probs.exp() * log_probs).sum(-1)


class _Fusion(nn.Module):
    def __init__(self, encoders: Mapping[str, nn.Module], hidden: int) -> None:
        super().__init__()
        self.modalities = tuple(encoders)
        self.encoders = nn.ModuleDict(dict(encoders))
        self.hidden = hidden

    def _features(self, inputs: Mapping[str, Tensor | None], mask: Tensor) -> Tensor:
        """Encoded features [B, M, hidden], zero for missing modalities."""
        batch = mask.shape[0]
        out = []
        for index, name in enumerate(self.modalities):
            value = inputs.get(name)
            if value is None:
                out.append(torch.zeros(batch, self.hidden))
            else:
                out.append(self.encoders[name](value) * mask[:, index : index + 1])
        return torch.stack(out, 1)

    def loss(self, output: FusionOutput, labels: Tensor, epoch_fraction: float = 1.0) -> Tensor:
        return F.nll_loss(output.log_probs, check_labels(labels, output.log_probs.shape[0]))


class ConcatERM(_Fusion):
    """Concatenation fusion trained by ERM; ``dropout`` before the classifier (MC-dropout's too)."""

    def __init__(self, encoders: Mapping[str, nn.Module], hidden: int, dropout: float = 0.1) -> None:
        super().__init__(encoders, hidden)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden * len(self.modalities), 2)

    def logits(self, inputs: Mapping[str, Tensor | None], mask: Tensor) -> Tensor:
        return self.classifier(self.dropout(self._features(inputs, mask).flatten(1)))

    def forward(self, inputs: Mapping[str, Tensor | None], mask: Tensor) -> FusionOutput:
        log_probs = F.log_softmax(self.logits(inputs, mask), -1)
        return FusionOutput(log_probs, entropy(log_probs))


class LateFusion(_Fusion):
    """Per-modality classifiers whose probabilities are averaged over the present modalities."""

    def __init__(self, encoders: Mapping[str, nn.Module], hidden: int) -> None:
        super().__init__(encoders, hidden)
        self.heads = nn.ModuleDict({m: nn.Linear(hidden, 2) for m in self.modalities})

    def forward(self, inputs: Mapping[str, Tensor | None], mask: Tensor) -> FusionOutput:
        h = self._features(inputs, mask)
        probs = torch.stack([F.softmax(self.heads[m](h[:, i]), -1) for i, m in enumerate(self.modalities)], 1)
        weights = mask.float() / mask.float().sum(1, keepdim=True)
        log_probs = torch.log((probs * weights.unsqueeze(-1)).sum(1).clamp_min(1e-12))
        return FusionOutput(log_probs, entropy(log_probs))


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, scale: Tensor) -> Tensor:  # type: ignore[override]
        ctx.scale = float(scale)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return grad * ctx.scale, None


class MMDGLite(_Fusion):
    """MMDG-lite (re-implemented, simplified): uncertainty-guided suppression and gradient rebalancing.

    Each modality has an auxiliary classifier whose predictive entropy u_m (no gradient) sets how much
    that modality may inform the others: h'_m = h_m + sum_{n != m} (1 - u_n / log 2) W h_n, the
    cross-modal messages of unreliable modalities are suppressed (MMDG's U-Adapter uses MC-dropout
    uncertainty inside ViT cross-attention). ReGrad (OGM-GE style): the encoder gradient of a modality
    whose auxiliary confidence on the true class exceeds the mean is scaled by
    1 - tanh(alpha (r_m - 1)), so the slower modalities catch up.
    """

    def __init__(self, encoders: Mapping[str, nn.Module], hidden: int, alpha: float = 1.0) -> None:
        super().__init__(encoders, hidden)
        self.aux = nn.ModuleDict({m: nn.Linear(hidden, 2) for m in self.modalities})
        self.message = nn.Linear(hidden, hidden, bias=False)
        self.classifier = nn.Linear(hidden * len(self.modalities), 2)
        self.alpha = alpha
        self.register_buffer("grad_scale", torch.ones(len(self.modalities)))

    def forward(self, inputs: Mapping[str, Tensor | None], mask: Tensor) -> FusionOutput:
        h = self._features(inputs, mask)
        if self.training:
            h = torch.stack([_ScaleGradient.apply(h[:, i], self.grad_scale[i]) for i in range(h.shape[1])], 1)
        aux = torch.stack([F.log_softmax(self.aux[m](h[:, i]), -1) for i, m in enumerate(self.modalities)], 1)
        reliability = (1.0 - entropy(aux).detach() / math.log(2.0)) * mask.float()  # [B, M]
        messages = self.message(h) * reliability.unsqueeze(-1)
        others = messages.sum(1, keepdim=True) - messages
        fused = (h + others) * mask.unsqueeze(-1).float()
        log_probs = F.log_softmax(self.classifier(fused.flatten(1)), -1)
        output = FusionOutput(log_probs, entropy(log_probs))
        output.aux = aux  # type: ignore[attr-defined]
        output.mask = mask  # type: ignore[attr-defined]
        return output

    def loss(self, output: FusionOutput, labels: Tensor, epoch_fraction: float = 1.0) -> Tensor:
        labels = check_labels(labels, output.log_probs.shape[0])
        aux, mask = output.aux, output.mask.float()  # type: ignore[attr-defined]
        aux_nll = -aux.gather(2, labels[:, None, None].expand(-1, aux.shape[1], 1)).squeeze(-1)
        aux_loss = (aux_nll * mask).sum() / mask.sum().clamp_min(1.0)
        with torch.no_grad():  # ReGrad coefficients from the true-class confidence of each modality
            confidence = (aux_nll.neg().exp() * mask).sum(0) / mask.sum(0).clamp_min(1.0)
            ratio = confidence / confidence.mean().clamp_min(1e-6)
            self.grad_scale.copy_(torch.where(ratio > 1, 1 - torch.tanh(self.alpha * (ratio - 1)), 1.0))
        return F.nll_loss(output.log_probs, labels) + aux_loss


class TMCFusion(_Fusion):
    """Trusted multi-view classification (re-implemented): Dirichlet evidence + Dempster-Shafer.

    Per modality: evidence e = softplus(W h), alpha = e + 1, belief b = e / S, uncertainty u = K / S.
    Views are combined by the reduced Dempster rule b = (b1 b2 + b1 u2 + b2 u1) / (1 - C),
    u = u1 u2 / (1 - C), C = sum_{i != j} b1_i b2_j; a missing view (b = 0, u = 1) is the identity.
    Loss: the adjusted cross-entropy of every view and of the combination plus a KL term towards
    Dir(1) on the misleading evidence, annealed linearly over training (the paper anneals over its
    first 50 epochs).
    """

    def __init__(self, encoders: Mapping[str, nn.Module], hidden: int) -> None:
        super().__init__(encoders, hidden)
        self.heads = nn.ModuleDict({m: nn.Linear(hidden, 2) for m in self.modalities})

    @staticmethod
    def combine(alpha_a: Tensor, alpha_b: Tensor) -> Tensor:
        """The reduced Dempster-Shafer combination of two Dirichlet opinions ([B, K] each)."""
        classes = alpha_a.shape[-1]
        s_a, s_b = alpha_a.sum(-1, keepdim=True), alpha_b.sum(-1, keepdim=True)
        b_a, b_b = (alpha_a - 1) / s_a, (alpha_b - 1) / s_b
        u_a, u_b = classes / s_a, classes / s_b
        conflict = (b_a.unsqueeze(-1) * b_b.unsqueeze(-2)).sum((-2, -1)) - (b_a * b_b).sum(-1)
        scale = 1.0 / (1.0 - conflict).clamp_min(1e-6)
        belief = (b_a * b_b + b_a * u_b + b_b * u_a) * scale.unsqueeze(-1)
        uncertainty = u_a * u_b * scale.unsqueeze(-1)
        strength = classes / uncertainty
        return belief * strength + 1.0

    def forward(self, inputs: Mapping[str, Tensor | None], mask: Tensor) -> FusionOutput:
        h = self._features(inputs, mask)
        alphas = []
        for i, name in enumerate(self.modalities):
            evidence = F.softplus(self.heads[name](h[:, i])) * mask[:, i : i + 1]  # no evidence when missing
            alphas.append(evidence + 1.0)
        combined = alphas[0]
        for alpha in alphas[1:]:
            combined = self.combine(combined, alpha)
        strength = combined.sum(-1, keepdim=True)
        log_probs = torch.log(combined / strength)
        output = FusionOutput(log_probs, (combined.shape[-1] / strength).squeeze(-1))
        output.alphas = [*alphas, combined]  # type: ignore[attr-defined]
        return output

    def loss(self, output: FusionOutput, labels: Tensor, epoch_fraction: float = 1.0) -> Tensor:
        labels = check_labels(labels, output.log_probs.shape[0])
        one_hot = F.one_hot(labels, 2).float()
        anneal = min(1.0, epoch_fraction)
        total = torch.zeros(())
        for alpha in output.alphas:  # type: ignore[attr-defined]
            strength = alpha.sum(-1, keepdim=True)
            ace = (one_hot * (torch.digamma(strength) - torch.digamma(alpha))).sum(-1)
            tilde = one_hot + (1 - one_hot) * alpha  # remove the true-class evidence
            total = total + (ace + anneal * _kl_to_uniform(tilde)).mean()
        return total


def _kl_to_uniform(alpha: Tensor) -> Tensor:
    """KL(Dir(alpha) || Dir(1)) per row."""
    classes = alpha.shape[-1]
    strength = alpha.sum(-1)
    return (
        torch.lgamma(strength)
        - math.lgamma(classes)
        - torch.lgamma(alpha).sum(-1)
        + ((alpha - 1) * (torch.digamma(alpha) - torch.digamma(strength).unsqueeze(-1))).sum(-1)
    )
