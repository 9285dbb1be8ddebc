"""SASTTrainer: stability-aware self-training of a CLIP-like backbone, and the GRIP loop it extends.

Paper: *Stability-Aware Self-Training for CLIP* (SAST). One epoch of :class:`SelfTrainer` (GRIP, the
shared skeleton) is: predict every target sample -> record the predictions in the :class:`FlipLedger` ->
select class-balanced top-K pseudo-labels (K grows) -> a few optimiser steps of CE on them. SAST adds,
with each step switchable: stability weights s^kappa [s >= s_min] on the CE, stability-weighted image
prototypes (SWIP), a light text refinement (delta with L2 and a margin on the most-flipped class pairs)
and the adaptive fusion of text and prototype logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from neurips26.methods.sast import core
from neurips26.methods.sast.backbone import check_backbone, check_images
from neurips26.methods.sast.config import SETTINGS, SASTConfig
from neurips26.methods.sast.ledger import FlipLedger

__all__ = [
    "CachedFeatures",
    "ResidualAdapter",
    "SASTClassifier",
    "SASTTrainer",
    "SelfTrainer",
    "build_text_anchors",
    "check_class_names",
    "check_templates",
]


def check_class_names(class_names: Sequence[str]) -> list[str]:
    """Validate class names: a non-empty sequence of distinct, non-blank strings."""
    if isinstance(class_names, str) or not isinstance(class_names, Sequence):
        raise TypeError("class_names must be a list of strings")
    names = list(class_names)
    if len(names) < 2:
        raise ValueError(f"class_names needs at least 2 classes, got {len(names)}")
    if any(not isinstance(n, str) or not n.strip() for n in names):
        raise ValueError("class_names must be non-empty strings")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"class_names has duplicates: {duplicates}")
    return names


def check_templates(templates: Sequence[str]) -> list[str]:
    """Validate prompt templates: non-empty, each with exactly one ``{}`` slot for the class name."""
    if isinstance(templates, str) or not isinstance(templates, Sequence) or len(templates) == 0:
        raise ValueError("templates must be a non-empty list of strings such as 'a photo of a {}.'")
    for t in templates:
        if not isinstance(t, str) or t.count("{}") != 1:
            raise ValueError(f"each template needs exactly one '{{}}' slot for the class name, got {t!r}")
    return list(templates)


@torch.no_grad()
def build_text_anchors(backbone: Any, class_names: list[str], templates: list[str]) -> torch.Tensor:
    """CLIP's prompt ensemble: t_c = normalise(mean_templates normalise(encode_text(template(c)))) (C, D)."""
    texts = [t.format(c) for c in class_names for t in templates]
    emb = F.normalize(backbone.encode_text(texts).float(), dim=-1)
    return F.normalize(emb.view(len(class_names), len(templates), -1).mean(1), dim=-1)


class ResidualAdapter(nn.Module):
    """x + W2 gelu(W1 x), W2 zero-initialised: the identity at the start (CLIP-Adapter style)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.down = nn.Linear(dim, hidden)
        self.up = nn.Linear(hidden, dim)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(F.gelu(self.down(x)))


class SASTClassifier(nn.Module):
    """The adapted classifier: logits = (1 - alpha) z_text + alpha z_img (issue #27, step 4).

    z_text = tau cos(f, t'_c) with t'_c = normalise(t_c + delta_c); z_img = tau cos(f, mu_c) with the SWIP
    prototypes mu; alpha adaptive (per sample) or fixed. ``forward(images)`` takes (B, 3, H, W) in [0, 1].
    """

    def __init__(
        self,
        backbone: nn.Module,
        text_anchors: torch.Tensor,
        scale: float,
        config: SASTConfig,
        adapter: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.adapter = adapter if adapter is not None else nn.Identity()
        n_classes, dim = text_anchors.shape
        self.register_buffer("text_anchors", text_anchors.clone())
        self.delta = nn.Parameter(torch.zeros(n_classes, dim))
        self.register_buffer("prototypes", torch.zeros(n_classes, dim))
        self.register_buffer("has_prototypes", torch.tensor(False))
        self.register_buffer("class_stability", torch.ones(n_classes))
        self.register_buffer("scale", torch.tensor(float(scale)))
        self.fusion, self.alpha = config.fusion, config.alpha
        self.fusion_a, self.fusion_b, self.fusion_bias = config.fusion_a, config.fusion_b, config.fusion_bias
        self.use_swip = config.use_swip

    def project(self, raw: torch.Tensor) -> torch.Tensor:
        """Adapter then L2 normalisation of raw image embeddings (N, D)."""
        return F.normalize(self.adapter(raw), dim=-1)

    def anchors(self) -> torch.Tensor:
        return F.normalize(self.text_anchors + self.delta, dim=-1)

    def mix(self, f: torch.Tensor, alpha: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(fused logits, text cosines) for normalised features f (N, D); ``alpha`` (N, 1) overrides the
        fusion weight (training steps reuse the epoch's per-sample alpha)."""
        cos_text = f @ self.anchors().T
        z_text = self.scale * cos_text
        if not (self.use_swip and bool(self.has_prototypes)):
            return z_text, cos_text
        z_img = self.scale * f @ self.prototypes.T
        if alpha is None and self.fusion == "fixed":
            alpha = torch.full((f.shape[0], 1), self.alpha, dtype=f.dtype, device=f.device)
        elif alpha is None:
            alpha = core.fusion_weight(
                z_text.detach(),
                z_img.detach(),
                self.class_stability,
                self.fusion_a,
                self.fusion_b,
                self.fusion_bias,
            )
        return (1.0 - alpha) * z_text + alpha * z_img, cos_text

    def logits_from_raw(self, raw: torch.Tensor) -> torch.Tensor:
        return self.mix(self.project(raw))[0]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.logits_from_raw(self.backbone.encode_image(images))


@dataclass
class CachedFeatures:
    """Raw image embeddings computed once with the frozen backbone (for ``trainable="adapter"``).

    ``views`` optionally holds augmented embeddings, e.g. {"weak": (V, N, D), "strong": (V, N, D)}.
    """

    raw: torch.Tensor
    views: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.raw.shape[0]


class FeatureSource:
    """Image embeddings for a set of target samples, cached (frozen tower) or live (trainable tower)."""

    def __init__(self, backbone: Any, target: Any, batch: int = 256, augment: Callable | None = None) -> None:
        self.backbone, self.batch, self.augment = backbone, batch, augment
        if isinstance(target, CachedFeatures):
            self.cached: CachedFeatures | None = target
            self.images = None
        else:
            self.cached, self.images = None, check_images("target", target)

    def __len__(self) -> int:
        return len(self.cached) if self.cached is not None else self.images.shape[0]

    @torch.no_grad()
    def all_raw(self) -> torch.Tensor:
        if self.cached is not None:
            return self.cached.raw
        return torch.cat(
            [
                self.backbone.encode_image(self.images[i : i + self.batch])
                for i in range(0, len(self), self.batch)
            ]
        )

    def raw(
        self, index: torch.Tensor, view: str = "plain", generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Embeddings of ``index`` (with grad when live); ``view`` "weak"/"strong" picks an augmentation."""
        if self.cached is not None:
            if view == "plain":
                return self.cached.raw[index]
            stack = self.cached.views[view]
            pick = torch.randint(0, stack.shape[0], (len(index),), generator=generator)
            return stack[pick, index]
        images = self.images[index]
        if view != "plain":
            if self.augment is None:
                raise ValueError(f"view {view!r} needs an augment function or cached views")
            images = self.augment(images, view)
        return self.backbone.encode_image(images)


class SelfTrainer:
    """GRIP (Menghini et al. 2023, re-implemented): class-balanced top-K pseudo-labels with growing K.

    Subclasses override :meth:`select`, :meth:`sample_weights`, :meth:`after_predict` and
    :meth:`extra_loss`. ``adapt`` returns the adapted :class:`SASTClassifier`; ``self.ledger`` keeps the
    flip history, ``self.log`` the templates, class names, preprocessing and per-epoch numbers.
    """

    name = "grip"

    def __init__(
        self,
        backbone: Any,
        class_names: Sequence[str],
        templates: Sequence[str],
        config: SASTConfig | None = None,
    ) -> None:
        check_backbone(backbone)
        self.backbone = backbone
        self.class_names = check_class_names(class_names)
        self.templates = check_templates(templates)
        self.config = config or SASTConfig()
        if not isinstance(self.config, SASTConfig):
            raise TypeError(f"config must be a SASTConfig, got {type(self.config).__name__}")
        self.n_classes = len(self.class_names)

    # ----- hooks ---------------------------------------------------------------------------------
    def select(
        self, epoch: int, probs: torch.Tensor, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pseudo-labels for this epoch: (index, labels) among ``candidates`` (unlabelled samples)."""
        per_class = max(1, len(candidates) // max(len(self.pl_classes), 1))
        k = core.growing_k(epoch, self.config.epochs, per_class, self.config.k_start, self.config.k_end)
        index, labels = core.class_balanced_top_k(probs[candidates], k, self.pl_classes)
        return candidates[index], labels

    def sample_weights(self, index: torch.Tensor) -> torch.Tensor | None:
        return None

    def after_predict(self, f: torch.Tensor, probs: torch.Tensor, preds: torch.Tensor) -> None:
        return None

    def extra_loss(self, cos_text: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        return None

    def step_alpha(self, index: torch.Tensor) -> torch.Tensor | None:
        """Fusion weights (len(index), 1) for a training minibatch, or None to compute them afresh."""
        return None

    def training_loss(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        weights: torch.Tensor | None,
        index: torch.Tensor,
        generator: torch.Generator,
    ) -> torch.Tensor:
        return core.weighted_cross_entropy(logits, labels, weights)

    def parameters_to_train(self, classifier: SASTClassifier) -> list[nn.Parameter]:
        params = list(classifier.adapter.parameters())
        if "norm" in self.config.trainable:
            params += self.backbone.trainable_parameters("norm")
        return params

    # ----- the loop ------------------------------------------------------------------------------
    def _setup(
        self, target: Any, setting: str, labels: torch.Tensor | None, augment: Callable | None
    ) -> None:
        if setting not in SETTINGS:
            raise ValueError(f"setting={setting!r} is not allowed; choose one of {list(SETTINGS)}")
        self.source = FeatureSource(self.backbone, target, augment=augment)
        n = len(self.source)
        if labels is None:
            if setting != "UL":
                raise ValueError(f"setting={setting!r} needs labels (N,) with -1 for unlabelled samples")
            labels = torch.full((n,), -1, dtype=torch.long)
        labels = torch.as_tensor(labels).long().reshape(-1)
        if labels.numel() != n:
            raise ValueError(f"labels must have one entry per target sample ({n}), got {labels.numel()}")
        if bool((labels >= self.n_classes).any()) or bool((labels < -1).any()):
            bad = sorted({int(v) for v in labels[(labels >= self.n_classes) | (labels < -1)]})
            raise ValueError(
                f"labels name unknown classes {bad}; allowed 0..{self.n_classes - 1} or -1 (unlabelled)"
            )
        if setting == "UL" and bool((labels >= 0).any()):
            raise ValueError("setting='UL' takes no labels; use 'SSL' or 'TRZSL'")
        self.labels = labels
        self.labelled = torch.nonzero(labels >= 0).flatten()
        self.unlabelled = torch.nonzero(labels < 0).flatten()
        seen = torch.unique(labels[labels >= 0])
        if setting == "TRZSL":  # pseudo-labels only for the classes without labels (Menghini et al.)
            mask = torch.ones(self.n_classes, dtype=torch.bool)
            mask[seen] = False
            if not bool(mask.any()):
                raise ValueError("setting='TRZSL' needs some classes without labels (the unseen classes)")
            self.pl_classes = torch.nonzero(mask).flatten()
        else:
            self.pl_classes = torch.arange(self.n_classes)
        self.setting = setting

    def build_classifier(self) -> SASTClassifier:
        torch.manual_seed(self.config.seed)
        anchors = build_text_anchors(self.backbone, self.class_names, self.templates)
        adapter = (
            ResidualAdapter(anchors.shape[1], self.config.adapter_hidden)
            if "adapter" in self.config.trainable
            else None
        )
        return SASTClassifier(self.backbone, anchors, self.backbone.logit_scale(), self.config, adapter)

    @torch.no_grad()
    def predict(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(normalised features (N, D), probabilities (N, C), text cosines (N, C)) of every target sample."""
        f = self.classifier.project(self.source.all_raw())
        logits, cos_text = self.classifier.mix(f)
        return f, logits.softmax(dim=1), cos_text

    def adapt(
        self,
        target: Any,
        setting: str = "UL",
        labels: torch.Tensor | None = None,
        diagnostic_labels: torch.Tensor | None = None,
        augment: Callable | None = None,
    ) -> SASTClassifier:
        """Self-train on ``target`` and return the adapted classifier (an ``nn.Module``).

        Parameters
        ----------
        target: images (N, 3, H, W) float in [0, 1], or :class:`CachedFeatures` from the same backbone.
        setting: "UL" (no labels), "SSL" (a few labels per class), "TRZSL" (labels for seen classes only).
        labels: (N,) int, -1 for unlabelled samples (SSL, TRZSL).
        diagnostic_labels: hidden true labels (N,), used only to log pseudo-label precision.
        augment: ``augment(images, view)`` for methods that need weak/strong views on live images.
        """
        cfg = self.config
        self._setup(target, setting, labels, augment)
        self.classifier = self.build_classifier()
        self.ledger = FlipLedger(len(self.source), self.n_classes, cfg.window)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        params = self.parameters_to_train(self.classifier)
        self.optimizer = (
            torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay) if params else None
        )
        self.log: dict[str, Any] = {
            "method": self.name,
            "class_names": self.class_names,
            "templates": self.templates,
            "preprocessing": self.backbone.preprocessing(),
            "setting": setting,
            "epochs": [],
        }
        self.pl_index = torch.zeros(0, dtype=torch.long)
        for epoch in range(cfg.epochs):
            self.run_epoch(epoch, diagnostic_labels)
        if cfg.epochs == 0:
            _f, probs, _ = self.predict()
            self.ledger.update(probs.argmax(1))
        self.classifier.eval()
        return self.classifier

    def run_epoch(self, epoch: int, diagnostic_labels: torch.Tensor | None = None) -> None:
        """One self-training epoch: predict, log flips, hooks, pseudo-label, optimise."""
        f, probs, _ = self.predict()
        preds = probs.argmax(dim=1)
        self.pl_index, pl_labels = self.select(epoch, probs, self.unlabelled)
        self.ledger.update(preds, self.pl_index, pl_labels, diagnostic_labels)
        self.after_predict(f, probs, preds)
        index = torch.cat([self.pl_index, self.labelled])
        targets = torch.cat([pl_labels, self.labels[self.labelled]])
        weights = self.sample_weights(index)
        self.log["epochs"].append(
            {
                "pseudo_labels": len(self.pl_index),
                "flip_rate": self.ledger.flip_rates[-1] if self.ledger.flip_rates else 0.0,
            }
        )
        if self.optimizer is None or len(index) == 0:
            return
        for _ in range(self.config.steps_per_epoch):
            pick = torch.randint(
                0, len(index), (min(self.config.batch_size, len(index)),), generator=self.generator
            )
            features = self.classifier.project(self.source.raw(index[pick]))
            logits, cos_text = self.classifier.mix(features, self.step_alpha(index[pick]))
            w = None if weights is None else weights[pick]
            loss = self.training_loss(logits, targets[pick], w, index[pick], self.generator)
            extra = self.extra_loss(cos_text, targets[pick])
            if extra is not None:
                loss = loss + extra
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()


class SASTTrainer(SelfTrainer):
    """Stability-Aware Self-Training (SAST) on any :class:`~neurips26.methods.sast.backbone.VLMBackbone`.

    ``SASTTrainer(backbone, class_names, templates, SASTConfig()).adapt(target, setting="UL")`` returns
    an ``nn.Module`` classifier. Steps (issue #27): stability s(x) from the :class:`FlipLedger`; SWIP
    prototypes mu_c = normalise(sum w f), w = s^kappa p(y|x) [s >= s_min], EMA across epochs; text
    refinement t'_c = normalise(t_c + delta_c) with L2 on delta and a margin on the most-flipped pairs;
    fusion alpha = sigmoid(a (H_text - H_img) + b s_bar_c + bias); stability-weighted CE on GRIP's
    class-balanced growing top-K pseudo-labels.
    """

    name = "sast"

    def __init__(
        self,
        backbone: Any,
        class_names: Sequence[str],
        templates: Sequence[str],
        config: SASTConfig | None = None,
    ) -> None:
        super().__init__(backbone, class_names, templates, config)
        self._shuffle = torch.Generator().manual_seed(self.config.seed + 7919)

    def stability(self) -> torch.Tensor:
        """s(x) for every target sample (labelled samples count as fully stable)."""
        s = self.ledger.stability()
        if self.config.shuffle_stability:  # negative control: the same scores, detached from the samples
            s = s[torch.randperm(len(s), generator=self._shuffle)]
        s = s.clone()
        s[self.labelled] = 1.0
        return s

    def parameters_to_train(self, classifier: SASTClassifier) -> list[nn.Parameter]:
        params = super().parameters_to_train(classifier)
        return [*params, classifier.delta] if self.config.refine else params

    def after_predict(self, f: torch.Tensor, probs: torch.Tensor, preds: torch.Tensor) -> None:
        cfg, clf = self.config, self.classifier
        s = self.stability()
        self._stability = s
        self._pairs = self.ledger.most_flipped_pairs(cfg.flipped_pairs)  # once per epoch
        self._alpha = None
        if not cfg.use_swip:
            return
        labels = preds.clone()
        labels[self.labelled] = self.labels[self.labelled]
        confidence = probs.gather(1, labels[:, None]).squeeze(1)
        confidence[self.labelled] = 1.0
        weights = core.stability_weights(s, confidence, cfg.kappa, cfg.s_min)
        new, mass = core.swip_prototypes(f, labels, weights, self.n_classes)
        previous = clf.prototypes if bool(clf.has_prototypes) else None
        if previous is None:  # classes without mass start from their text anchor
            new = torch.where((mass > 0)[:, None], new, clf.anchors().detach())
        clf.prototypes.copy_(core.update_prototypes(previous, new, mass, cfg.prototype_momentum))
        clf.has_prototypes.fill_(True)
        total = torch.zeros(self.n_classes).index_add_(0, labels, s)
        count = torch.zeros(self.n_classes).index_add_(0, labels, torch.ones_like(s))
        clf.class_stability.copy_(torch.where(count > 0, total / count.clamp_min(1), torch.ones_like(total)))
        if cfg.fusion == "adaptive":  # per-sample alpha of this epoch, reused by its training steps
            z_text = clf.scale * f @ clf.anchors().detach().T
            z_img = clf.scale * f @ clf.prototypes.T
            self._alpha = core.fusion_weight(
                z_text, z_img, clf.class_stability, cfg.fusion_a, cfg.fusion_b, cfg.fusion_bias
            )

    def sample_weights(self, index: torch.Tensor) -> torch.Tensor | None:
        s = self._stability[index]
        return s.pow(self.config.kappa) * (s >= self.config.s_min).float()

    def extra_loss(self, cos_text: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        cfg = self.config
        if not cfg.refine:
            return None
        loss = cfg.delta_l2 * self.classifier.delta.pow(2).sum(dim=1).mean()
        return loss + cfg.margin_weight * core.pair_margin_loss(cos_text, labels, self._pairs, cfg.margin)

    def step_alpha(self, index: torch.Tensor) -> torch.Tensor | None:
        return None if self._alpha is None else self._alpha[index]
