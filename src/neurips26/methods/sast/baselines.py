"""Baselines for CLIP self-training, all re-implemented (no library ships them) on the same loop.

Every baseline runs on the same backbone, trainable set, epoch and step budget as SAST, and logs the same
:class:`~neurips26.methods.sast.ledger.FlipLedger` (flip rate, stability, pseudo-label precision).

- :class:`ZeroShot`: the prompt-ensemble classifier, no adaptation.
- :class:`FixedPseudoLabels`: one class-balanced top-K selection from zero-shot, trained on for all epochs.
- :class:`GRIP` (Menghini et al., NeurIPS 2023): growing class-balanced top-K, re-selected every epoch.
- :class:`CPL` (Zhang et al., ICML 2024): candidate pseudo-label sets from intra-instance (classes near the
  top probability) and inter-instance (per-class top-K) selection, trained with a partial-label loss.
- :class:`ReCLIP` (Hu et al., WACV 2024): text-SVD projection removing the shared direction, label
  spreading (sklearn ``LabelSpreading``) over projected features, self-training on samples where the
  propagated label agrees with the text prediction.
- :class:`LaFTer` (Mirza et al., NeurIPS 2023): a text-only classifier trained on caption embeddings,
  then FixMatch (confident weak-view pseudo-labels, CE on strong views; kornia augmentations).
- :class:`RandomFlips`: negative control, zero-shot with 10 % of predictions re-drawn at random per epoch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from neurips26.methods.sast import core
from neurips26.methods.sast.trainer import SASTClassifier, SelfTrainer

__all__ = [
    "CPL",
    "GRIP",
    "FixedPseudoLabels",
    "LaFTer",
    "RandomFlips",
    "ReCLIP",
    "ZeroShot",
    "kornia_views",
]


class GRIP(SelfTrainer):
    """GRIP (re-implemented): Menghini et al., 'Enhancing CLIP with CLIP', NeurIPS 2023.

    Class-balanced top-K pseudo-labels per class from the current model, K growing linearly each
    iteration; CE on them. Ours: one epoch per iteration, no re-initialisation between iterations.
    """

    name = "grip"


class ZeroShot(SelfTrainer):
    """CLIP zero-shot with the prompt ensemble (no parameter changes)."""

    name = "zero_shot"

    def adapt(
        self,
        target: Any,
        setting: str = "UL",
        labels: torch.Tensor | None = None,
        diagnostic_labels: torch.Tensor | None = None,
        augment: Any = None,
    ) -> SASTClassifier:
        self._setup(target, setting, labels, augment)
        self.classifier = self.build_classifier()
        from neurips26.methods.sast.ledger import FlipLedger

        self.ledger = FlipLedger(len(self.source), self.n_classes, self.config.window)
        probs = self.predict()[1]
        for _ in range(max(self.config.epochs, 1)):
            self.ledger.update(probs.argmax(1))
        self.log = {
            "method": self.name,
            "class_names": self.class_names,
            "templates": self.templates,
            "preprocessing": self.backbone.preprocessing(),
            "setting": setting,
        }
        return self.classifier.eval()


class RandomFlips(ZeroShot):
    """Negative control for the premise: zero-shot whose logged predictions flip at random
    (10 % per epoch)."""

    name = "random_flips"
    rate = 0.1

    def adapt(
        self,
        target: Any,
        setting: str = "UL",
        labels: torch.Tensor | None = None,
        diagnostic_labels: torch.Tensor | None = None,
        augment: Any = None,
    ) -> SASTClassifier:
        classifier = super().adapt(target, setting, labels, diagnostic_labels, augment)
        from neurips26.methods.sast.ledger import FlipLedger

        generator = torch.Generator().manual_seed(self.config.seed)
        base = self.predict()[1].argmax(1)
        self.ledger = FlipLedger(len(base), self.n_classes, self.config.window)
        for _ in range(max(self.config.epochs, 1)):
            noisy = base.clone()
            flip = torch.rand(len(base), generator=generator) < self.rate
            noisy[flip] = torch.randint(0, self.n_classes, (int(flip.sum()),), generator=generator)
            self.ledger.update(noisy)
        return classifier


class FixedPseudoLabels(SelfTrainer):
    """Zero-shot pseudo-labels selected once (class-balanced top-K at the final K) and never revised."""

    name = "fixed_pl"

    def select(
        self, epoch: int, probs: torch.Tensor, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if epoch == 0:
            per_class = max(1, len(candidates) // max(len(self.pl_classes), 1))
            k = core.growing_k(1, 1, per_class, self.config.k_end, self.config.k_end)
            index, labels = core.class_balanced_top_k(probs[candidates], k, self.pl_classes)
            self._fixed = (candidates[index], labels)
        return self._fixed


class CPL(SelfTrainer):
    """CPL (re-implemented): Zhang et al., 'Candidate Pseudolabel Learning', ICML 2024.

    Candidates of sample x: classes c with p(c|x) >= ``ratio`` * max p (intra-instance, at most
    ``max_candidates``) that also rank x among the top-K_e samples of column c (inter-instance, K growing as
    in GRIP). Samples with a non-empty set train with the partial-label loss -log sum_{c in S(x)} p(c|x).
    """

    name = "cpl"
    ratio = 0.5
    max_candidates = 3

    def select(
        self, epoch: int, probs: torch.Tensor, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        p = probs[candidates]
        n, c = p.shape
        per_class = max(1, n // max(len(self.pl_classes), 1))
        k = min(
            n, core.growing_k(epoch, self.config.epochs, per_class, self.config.k_start, self.config.k_end)
        )
        top = p.topk(min(self.max_candidates, c), dim=1)
        intra = torch.zeros_like(p, dtype=torch.bool).scatter_(
            1, top.indices, top.values >= self.ratio * top.values[:, :1]
        )
        column_rank = p.argsort(dim=0, descending=True).argsort(dim=0)
        inter = column_rank < k
        allowed = torch.zeros(c, dtype=torch.bool)
        allowed[self.pl_classes] = True
        sets = intra & inter & allowed[None, :]
        keep = torch.nonzero(sets.any(dim=1)).flatten()
        self._sets = torch.zeros(len(self.source), c, dtype=torch.bool)
        self._sets[candidates[keep]] = sets[keep]
        # the reported pseudo-label: the most probable candidate
        labels = torch.where(sets[keep], p[keep], torch.full_like(p[keep], -1.0)).argmax(dim=1)
        return candidates[keep], labels

    def training_loss(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        weights: torch.Tensor | None,
        index: torch.Tensor,
        generator: torch.Generator,
    ) -> torch.Tensor:
        sets = self._sets[index].clone()
        labelled = self.labels[index] >= 0
        sets[labelled] = F.one_hot(self.labels[index][labelled], self.n_classes).bool()
        log_p = F.log_softmax(logits, dim=1)
        return -torch.logsumexp(log_p.masked_fill(~sets, float("-inf")), dim=1).mean()


class ReCLIP(SelfTrainer):
    """ReCLIP (re-implemented, image side only): Hu et al., WACV 2024.

    Projection: with the SVD of the text anchors T = U S V^T, features and anchors are projected onto the
    span of T's right singular vectors minus the first (the direction all class prompts share). Pseudo-
    labels: sklearn ``LabelSpreading`` (kNN graph) seeded with the most confident half of the projected
    zero-shot predictions; training samples: those whose propagated label equals the text prediction.
    """

    name = "reclip"
    n_neighbors = 10

    def _projection(self) -> torch.Tensor:
        anchors = self.classifier.text_anchors
        _, _, vh = torch.linalg.svd(anchors, full_matrices=False)
        basis = vh[1:]  # drop the shared first direction
        return basis.T @ basis

    def select(
        self, epoch: int, probs: torch.Tensor, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from sklearn.semi_supervised import LabelSpreading

        with torch.no_grad():
            proj = self._projection()
            f = F.normalize(self.classifier.project(self.source.all_raw()[candidates]) @ proj, dim=1)
            anchors = F.normalize(self.classifier.anchors() @ proj, dim=1)
            text_probs = (self.classifier.scale * f @ anchors.T).softmax(1)
        conf, pred = text_probs.max(1)
        seeds = torch.full((len(candidates),), -1, dtype=torch.long)
        confident = conf >= conf.median()
        seeds[confident] = pred[confident]
        if len(torch.unique(seeds[confident])) < 2:
            return candidates[:0], pred[:0]
        spreading = LabelSpreading(
            kernel="knn", n_neighbors=min(self.n_neighbors, len(candidates) - 1), alpha=0.2, max_iter=50
        )
        spreading.fit(f.numpy(), seeds.numpy())
        propagated = torch.as_tensor(spreading.transduction_, dtype=torch.long)
        agree = (propagated == pred) & torch.isin(pred, self.pl_classes)
        return candidates[agree], pred[agree]


def kornia_views(images: torch.Tensor, view: str) -> torch.Tensor:
    """LaFTer/FixMatch augmentations with kornia: "weak" = shift + flip-free affine; "strong" adds colour
    jitter, Gaussian noise and random erasing. Images (B, 3, H, W) in [0, 1]."""
    import kornia.augmentation as K

    if view == "weak":
        aug = K.RandomAffine(degrees=5.0, translate=(0.08, 0.08), p=1.0)
    elif view == "strong":
        aug = K.AugmentationSequential(
            K.RandomAffine(degrees=15.0, translate=(0.12, 0.12), scale=(0.85, 1.15), p=1.0),
            K.ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8),
            K.RandomGaussianNoise(std=0.05, p=0.5),
            K.RandomErasing(scale=(0.02, 0.15), p=0.5),
        )
    else:
        raise ValueError(f"view must be 'weak' or 'strong', got {view!r}")
    return aug(images).clamp(0, 1)


class LaFTer(SelfTrainer):
    """LaFTer (re-implemented): Mirza et al., 'Label-Free Fine-Tuning of Zero-Shot Models', NeurIPS 2023.

    Stage 1: a linear classifier W (C, D) trained on caption embeddings alone (every template x class, with
    Gaussian feature noise), whose rows replace the text anchors. Stage 2: FixMatch -- weak-view prediction
    with confidence >= ``threshold`` is the pseudo-label for CE on a strong view; trains the adapter (or norm
    affines) and W. Augmented views come from :func:`kornia_views` (live) or cached view embeddings.
    """

    name = "lafter"
    threshold = 0.6
    text_steps = 200
    caption_templates = (
        "a photo of {}.",
        "an image of {}.",
        "a picture showing {}.",
        "{}.",
        "a close-up of {}.",
    )

    def build_classifier(self) -> SASTClassifier:
        classifier = super().build_classifier()
        texts = [t.format(c) for c in self.class_names for t in (*self.templates, *self.caption_templates)]
        with torch.no_grad():
            emb = F.normalize(self.backbone.encode_text(texts).float(), dim=1)
        labels = torch.arange(self.n_classes).repeat_interleave(len(texts) // self.n_classes)
        weight = classifier.text_anchors.clone().requires_grad_(True)
        optimizer = torch.optim.Adam([weight], lr=1e-2)
        generator = torch.Generator().manual_seed(self.config.seed)
        for _ in range(self.text_steps):
            noisy = F.normalize(emb + 0.05 * torch.randn(emb.shape, generator=generator), dim=1)
            loss = F.cross_entropy(classifier.scale * noisy @ F.normalize(weight, dim=1).T, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        classifier.text_anchors.copy_(F.normalize(weight.detach(), dim=1))
        return classifier

    def parameters_to_train(self, classifier: SASTClassifier) -> list:
        return [*super().parameters_to_train(classifier), classifier.delta]

    def select(
        self, epoch: int, probs: torch.Tensor, candidates: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        conf, pred = probs[candidates].max(1)
        keep = (conf >= self.threshold) & torch.isin(pred, self.pl_classes)
        return candidates[keep], pred[keep]

    def run_epoch(self, epoch: int, diagnostic_labels: torch.Tensor | None = None) -> None:
        _f, probs, _ = self.predict()
        preds = probs.argmax(1)
        self.pl_index, pl_labels = self.select(epoch, probs, self.unlabelled)
        self.ledger.update(preds, self.pl_index, pl_labels, diagnostic_labels)
        self.log["epochs"].append({"pseudo_labels": len(self.pl_index)})
        pool = torch.cat([self.unlabelled, self.labelled])
        for _ in range(self.config.steps_per_epoch):
            pick = pool[
                torch.randint(
                    0, len(pool), (min(self.config.batch_size, len(pool)),), generator=self.generator
                )
            ]
            with torch.no_grad():
                weak = self.classifier.logits_from_raw(self.source.raw(pick, "weak", self.generator)).softmax(
                    1
                )
            conf, target = weak.max(1)
            known = self.labels[pick] >= 0
            target = torch.where(known, self.labels[pick], target)
            mask = (conf >= self.threshold) & torch.isin(target, self.pl_classes) | known
            if not bool(mask.any()):
                continue
            strong = self.classifier.logits_from_raw(self.source.raw(pick[mask], "strong", self.generator))
            loss = (
                F.cross_entropy(strong, target[mask])
                + self.config.delta_l2 * self.classifier.delta.pow(2).sum(1).mean()
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
