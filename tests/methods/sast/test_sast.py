"""SAST library tests: ledger invariants and oracle, SWIP, fusion, refinement, GRIP equivalence, bad input.

Everything runs on the in-code toy backbone of ``sast_toys`` (no MiniLM, no checkpoint).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from neurips26.methods.sast import (
    CPL,
    GRIP,
    FixedPseudoLabels,
    FlipLedger,
    LaFTer,
    RandomFlips,
    ReCLIP,
    SASTConfig,
    SASTTrainer,
    ZeroShot,
    core,
)
from neurips26.methods.sast.trainer import SASTClassifier
from tests.methods.sast_toys import ToyBackbone, toy_task

torch.set_num_threads(1)
TEMPLATES = ["a photo of {}."]


# ----- FlipLedger ---------------------------------------------------------------------------------


def naive_ledger(
    predictions: list[list[int]], n_classes: int, window: int
) -> tuple[list[float], torch.Tensor, list[int]]:
    """Oracle: stability, flip matrix and flip counts by Python loops over the full history."""
    n = len(predictions[0])
    flip_matrix = torch.zeros(n_classes, n_classes, dtype=torch.int64)
    counts = [0] * n
    for e in range(1, len(predictions)):
        for i in range(n):
            a, b = predictions[e - 1][i], predictions[e][i]
            if a != b:
                flip_matrix[a, b] += 1
                counts[i] += 1
    recent = predictions[-window:]
    length = len(recent)
    stability = []
    for i in range(n):
        flips = sum(recent[e][i] != recent[e - 1][i] for e in range(1, length))
        stability.append(1.0 if length < 2 else 1.0 - flips / (length - 1))
    return stability, flip_matrix, counts


history_strategy = st.integers(2, 5).flatmap(
    lambda c: st.tuples(
        st.just(c),
        st.integers(2, 6),
        st.lists(st.lists(st.integers(0, c - 1), min_size=7, max_size=7), min_size=1, max_size=9),
    )
)


@settings(max_examples=60, deadline=None)
@given(history_strategy)
def test_ledger_matches_the_naive_oracle_and_keeps_its_invariants(case) -> None:
    n_classes, window, predictions = case
    ledger = FlipLedger(7, n_classes, window)
    for p in predictions:
        ledger.update(torch.tensor(p))
    stability, flip_matrix, counts = naive_ledger(predictions, n_classes, window)
    assert torch.allclose(ledger.stability(), torch.tensor(stability))
    assert torch.equal(ledger.flip_matrix, flip_matrix)
    assert ledger.flip_counts.tolist() == counts
    # invariants: flips in the window <= W - 1, s in [0, 1], F sums to the total flip count, no self-flips
    assert int(ledger.window_flips().max()) <= window - 1
    s = ledger.stability()
    assert bool(((s >= 0) & (s <= 1)).all())
    assert int(ledger.flip_matrix.sum()) == int(ledger.flip_counts.sum())
    assert int(ledger.flip_matrix.diagonal().sum()) == 0


@settings(max_examples=40, deadline=None)
@given(history_strategy, st.randoms(use_true_random=False))
def test_ledger_is_permutation_equivariant(case, rnd) -> None:
    n_classes, window, predictions = case
    sample_perm = list(range(7))
    rnd.shuffle(sample_perm)
    class_perm = list(range(n_classes))
    rnd.shuffle(class_perm)
    base, moved = FlipLedger(7, n_classes, window), FlipLedger(7, n_classes, window)
    for p in predictions:
        base.update(torch.tensor(p))
        moved.update(torch.tensor([class_perm[p[i]] for i in sample_perm]))
    sp, cp = torch.tensor(sample_perm), torch.tensor(class_perm)
    assert torch.equal(moved.stability(), base.stability()[sp])
    assert torch.equal(moved.flip_counts, base.flip_counts[sp])
    expected = torch.zeros_like(base.flip_matrix)
    expected[cp[:, None], cp[None, :]] = base.flip_matrix
    assert torch.equal(moved.flip_matrix, expected)


def test_ledger_memory_is_small_ints_linear_in_samples() -> None:
    small, large = FlipLedger(1000, 10, 5), FlipLedger(10000, 10, 5)
    assert small.history.dtype == torch.int8
    assert large.memory_bytes() - small.memory_bytes() == 9000 * (5 + 8)  # int8 history + int64 counts
    assert FlipLedger(10, 300, 4).history.dtype == torch.int16


def test_ledger_precision_and_most_flipped_pairs() -> None:
    ledger = FlipLedger(4, 3, 3)
    ledger.update(torch.tensor([0, 0, 1, 2]))
    ledger.update(
        torch.tensor([1, 0, 0, 2]), torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([1, 1, 0, 2])
    )
    ledger.update(torch.tensor([0, 2, 0, 2]))
    assert ledger.precisions == [0.5]
    assert ledger.most_flipped_pairs(1).tolist() == [[0, 1]]  # 0->1, 1->0, 0->1 against one 0->2
    assert ledger.flip_rates == [0.5, 0.5]


@pytest.mark.parametrize(
    "kwargs, match",
    [({"window": 1}, "window"), ({"n_samples": 0}, "n_samples"), ({"n_classes": 1}, "n_classes")],
)
def test_ledger_rejects_bad_sizes(kwargs, match) -> None:
    args = {"n_samples": 4, "n_classes": 3, "window": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        FlipLedger(**args)


def test_ledger_rejects_predictions_out_of_range() -> None:
    ledger = FlipLedger(3, 2, 2)
    with pytest.raises(ValueError, match="predictions"):
        ledger.update(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="predictions"):
        ledger.update(torch.tensor([0, 1]))


# ----- core: SWIP, top-K, fusion, refinement ------------------------------------------------------


def test_swip_with_kappa_and_s_min_zero_is_the_confidence_weighted_class_mean() -> None:
    generator = torch.Generator().manual_seed(0)
    f = F.normalize(torch.randn(50, 6, generator=generator), dim=1)
    labels = torch.randint(0, 4, (50,), generator=generator)
    confidence = torch.rand(50, generator=generator)
    stability = torch.rand(50, generator=generator)
    weights = core.stability_weights(stability, confidence, kappa=0.0, s_min=0.0)
    prototypes, _ = core.swip_prototypes(f, labels, weights, 4)
    for c in range(4):
        members = labels == c
        mean = (confidence[members, None] * f[members]).sum(0)
        assert torch.allclose(prototypes[c], F.normalize(mean, dim=0), atol=1e-6)


def test_idea_stability_weighting_keeps_flipping_samples_out_of_the_prototypes() -> None:
    """Central idea (SWIP's stability weights): samples that flip are mislabelled more often; weighting by
    s^kappa [s >= s_min] gives a prototype closer to the true class mean than confidence alone."""
    generator = torch.Generator().manual_seed(1)
    true_mean = F.normalize(torch.tensor([1.0, 0, 0, 0]), dim=0)
    wrong_mean = F.normalize(torch.tensor([0.0, 1, 0, 0]), dim=0)
    stable = F.normalize(true_mean + 0.2 * torch.randn(30, 4, generator=generator), dim=1)
    flipping = F.normalize(wrong_mean + 0.2 * torch.randn(20, 4, generator=generator), dim=1)
    f = torch.cat([stable, flipping])
    labels = torch.zeros(50, dtype=torch.long)
    confidence = torch.full((50,), 0.8)
    stability = torch.cat([torch.full((30,), 1.0), torch.full((20,), 1 / 3)])
    on, _ = core.swip_prototypes(f, labels, core.stability_weights(stability, confidence, 2.0, 0.5), 1)
    off, _ = core.swip_prototypes(f, labels, core.stability_weights(stability, confidence, 0.0, 0.0), 1)
    assert float(on[0] @ true_mean) > 0.99
    assert float(on[0] @ true_mean) - float(off[0] @ true_mean) > 0.1


def test_class_balanced_top_k_matches_a_loop_over_classes() -> None:
    generator = torch.Generator().manual_seed(2)
    probs = torch.softmax(3 * torch.randn(60, 5, generator=generator), dim=1)
    for k, allowed in [(3, None), (7, torch.tensor([1, 3])), (100, None)]:
        index, labels = core.class_balanced_top_k(probs, k, allowed)
        conf, pred = probs.max(1)
        expected = {}
        for c in range(5) if allowed is None else allowed.tolist():
            members = torch.nonzero(pred == c).flatten()
            top = members[conf[members].argsort(descending=True)[:k]]
            expected.update({int(i): c for i in top})
        assert dict(zip(index.tolist(), labels.tolist(), strict=True)) == expected


def test_idea_adaptive_fusion_trusts_the_confident_stream() -> None:
    """Central idea (adaptive fusion): alpha rises when the text stream is the more uncertain one and falls
    in the opposite case, so the fused prediction follows the sharper stream; a fixed alpha = 0.5 follows
    the larger raw margin and gets both samples wrong here."""
    f1 = F.normalize(torch.tensor([0.5, 0.7, 0.65]), dim=0)  # text: flat over 3 classes, top = 1 (wrong)
    f2 = F.normalize(torch.tensor([0.75, 0.6614, 0.0]), dim=0)  # text: sharp between 2 classes, top = 0
    u = F.normalize(f1 - f2, dim=0)
    reflection = torch.eye(3) - 2 * torch.outer(u, u)  # image stream sees f1 as f2 and f2 as f1
    f = torch.stack([f1, f2])
    truth = torch.tensor([0, 0])

    def predictions(config: SASTConfig) -> torch.Tensor:
        classifier = SASTClassifier(torch.nn.Identity(), torch.eye(3), 10.0, config)
        classifier.prototypes.copy_(reflection)
        classifier.has_prototypes.fill_(True)
        return classifier.mix(f)[0].argmax(1)

    alpha = core.fusion_weight(10 * f, 10 * f @ reflection.T, torch.ones(3), a=4.0, b=2.0, bias=-2.0)
    assert float(alpha[0]) > 0.6 and float(alpha[1]) < 0.4
    assert torch.equal(predictions(SASTConfig()), truth)
    assert torch.equal(predictions(SASTConfig(fusion="fixed", alpha=0.5)), 1 - truth)


def test_pair_margin_loss_counts_only_samples_of_the_pair() -> None:
    cos = torch.tensor([[0.5, 0.45, 0.0], [0.1, 0.3, 0.9]])
    pairs = torch.tensor([[0, 1]])
    loss = core.pair_margin_loss(cos, torch.tensor([0, 2]), pairs, margin=0.1)
    assert torch.isclose(loss, torch.tensor(0.05))
    assert float(core.pair_margin_loss(cos, torch.tensor([2, 2]), pairs, 0.1)) == 0.0


# ----- trainer ------------------------------------------------------------------------------------


def _adapt(cls, config: SASTConfig, task=None, setting: str = "UL", labels=None):
    backbone, images, truth, names = task or toy_task(anchor_shift=1.0, seed=2)
    trainer = cls(backbone, names, TEMPLATES, config)
    classifier = trainer.adapt(images, setting, labels, diagnostic_labels=truth)
    return trainer, classifier, images, truth


def test_degenerate_sast_is_grip_exactly() -> None:
    """fusion alpha = 0, delta off, kappa = s_min = 0: the same pseudo-labels and bit-identical updates."""
    off = SASTConfig(fusion="fixed", alpha=0.0, refine=False, kappa=0.0, s_min=0.0, epochs=6)
    task = toy_task(anchor_shift=1.0, seed=2)
    grip, grip_clf, _images, _ = _adapt(GRIP, off, task)
    sast, sast_clf, _, _ = _adapt(SASTTrainer, off, task)
    assert torch.equal(grip.ledger.history, sast.ledger.history)
    assert grip.ledger.precisions == sast.ledger.precisions
    assert torch.equal(grip.pl_index, sast.pl_index)
    for (name, a), (_, b) in zip(
        grip_clf.adapter.state_dict().items(), sast_clf.adapter.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    # and the novelty switched on changes the run
    _on, on_clf, _, _ = _adapt(SASTTrainer, SASTConfig(epochs=6), task)
    assert not torch.equal(on_clf.adapter.up.weight, grip_clf.adapter.up.weight)


def test_idea_swip_prototypes_sit_on_the_visual_clusters() -> None:
    """Central idea (SWIP): after adaptation the image prototypes are closer to the visual class means
    than the (shifted) text anchors; with SWIP off there are no prototypes and the text stream alone
    classifies."""
    backbone, images, truth, _names = task = toy_task(anchor_shift=0.8, seed=1, spread=0.2)
    config = SASTConfig(epochs=5, trainable="norm")
    _trainer, classifier, _, _ = _adapt(SASTTrainer, config, task)
    assert bool(classifier.has_prototypes)
    with torch.no_grad():
        f = classifier.project(backbone.encode_image(images))
        means = F.normalize(torch.stack([f[truth == c].mean(0) for c in range(4)]), dim=1)
        proto_fit = (classifier.prototypes * means).sum(1).mean()
        anchor_fit = (classifier.anchors() * means).sum(1).mean()
    assert float(proto_fit) > float(anchor_fit) + 0.05
    _, plain, _, _ = _adapt(SASTTrainer, replace(config, use_swip=False), task)
    assert not bool(plain.has_prototypes)


@pytest.mark.parametrize("stability_wired", [True, False], ids=["wired", "stability_ignored"])
def test_idea_trainer_builds_swip_prototypes_from_stable_samples(monkeypatch, stability_wired) -> None:
    """Central idea (SWIP's stability weights), through ``SASTTrainer.adapt``: the trainer's prototypes
    are built from the stable samples. The ledger's stability is made an oracle (1 exactly on the correctly
    predicted samples), so a trainer that reads it puts each prototype on its true class mean, while the
    confidence-weighted mean of all predicted members (what SWIP is without stability) sits far off. The
    negative case is issue 43's break: the trainer's call of ``core.stability_weights`` sees s = 1."""
    backbone, images, truth, names = toy_task(anchor_shift=1.0, seed=2)
    monkeypatch.setattr(FlipLedger, "stability", lambda self: (self.last == truth).float())
    if not stability_wired:
        weights = core.stability_weights

        def ignoring_stability(stability, confidence, kappa, s_min):
            return weights(torch.ones_like(stability), confidence, kappa, s_min)

        monkeypatch.setattr(core, "stability_weights", ignoring_stability)
    trainer = SASTTrainer(backbone, names, TEMPLATES, SASTConfig(epochs=1))  # prototypes of epoch 0
    classifier = trainer.adapt(images, "UL", diagnostic_labels=truth)
    with torch.no_grad():  # epoch 0's features and probabilities: the untrained classifier's
        fresh = SASTTrainer(backbone, names, TEMPLATES, SASTConfig(epochs=0)).build_classifier()
        f = fresh.project(backbone.encode_image(images))
        probs = fresh.mix(f)[0].softmax(dim=1)
    predicted = trainer.ledger.last
    assert 0.3 < float((predicted == truth).float().mean()) < 0.8  # the zero-shot labels are noisy
    confidence = probs.gather(1, predicted[:, None]).squeeze(1)
    without_stability, _ = core.swip_prototypes(f, predicted, confidence, 4)
    means = F.normalize(torch.stack([f[truth == c].mean(0) for c in range(4)]), dim=1)
    fit = float((classifier.prototypes * means).sum(1).mean())
    fit_without = float((without_stability * means).sum(1).mean())
    assert (fit > 0.95 and fit > fit_without + 0.2) == stability_wired, (fit, fit_without)


def test_idea_text_refinement_separates_the_most_flipped_pair() -> None:
    """Central idea (text refinement): the margin on the most-flipped class pair makes the refined anchors
    t' separate that pair's (pseudo-labelled) samples better than CLIP's anchors t do, in the same adapted
    feature space; with refinement off, t' = t."""
    backbone, images, _truth, _names = task = toy_task(anchor_shift=1.0, seed=2)

    def pair_margin(
        classifier: SASTClassifier, anchors: torch.Tensor, labels: torch.Tensor, a: int, b: int
    ) -> float:
        with torch.no_grad():
            f = classifier.project(backbone.encode_image(images))
        cos = f @ F.normalize(anchors, dim=1).T
        members = (labels == a) | (labels == b)
        other = torch.where(labels == a, b, a)[members]
        own = cos[members].gather(1, labels[members, None]).squeeze(1)
        return float((own - cos[members].gather(1, other[:, None]).squeeze(1)).mean())

    config = SASTConfig(epochs=8, margin=0.3, margin_weight=5.0, delta_l2=0.1)
    trainer, classifier, _, _ = _adapt(SASTTrainer, config, task)
    a, b = trainer.ledger.most_flipped_pairs(1)[0].tolist()
    labels = trainer.ledger.last
    refined = pair_margin(classifier, classifier.anchors().detach(), labels, a, b)
    original = pair_margin(classifier, classifier.text_anchors, labels, a, b)
    assert refined > original + 0.02
    _, off, _, _ = _adapt(SASTTrainer, replace(config, refine=False), task)
    assert torch.equal(off.anchors().detach(), F.normalize(off.text_anchors, dim=1))


@pytest.mark.parametrize("cls", [ZeroShot, RandomFlips, FixedPseudoLabels, GRIP, CPL, ReCLIP, SASTTrainer])
@pytest.mark.parametrize("setting", ["UL", "SSL", "TRZSL"])
def test_every_method_adapts_in_every_setting_and_logs_the_ledger(cls, setting) -> None:
    _backbone, images, truth, names = task = toy_task(anchor_shift=0.9, seed=1)
    labels = None
    if setting == "SSL":
        labels = torch.full_like(truth, -1)
        for c in range(4):
            labels[torch.nonzero(truth == c).flatten()[:2]] = c
    elif setting == "TRZSL":
        labels = torch.where(truth < 2, truth, torch.full_like(truth, -1))
    trainer, classifier, images, _ = _adapt(cls, SASTConfig(epochs=3), task, setting, labels)
    with torch.no_grad():
        logits = classifier(images)
    assert logits.shape == (len(images), 4) and bool(torch.isfinite(logits).all())
    assert trainer.ledger.epochs >= 1
    assert trainer.log["templates"] == TEMPLATES and trainer.log["class_names"] == names
    if setting == "TRZSL" and cls not in (ZeroShot, RandomFlips) and len(trainer.pl_index):
        assert bool((truth[trainer.pl_index] >= 0).all())


def test_lafter_with_live_augmentations() -> None:
    def jitter(images, view):
        return (images + (0.02 if view == "weak" else 0.08) * torch.randn_like(images)).clamp(0, 1)

    backbone, images, _truth, names = toy_task(seed=3)
    trainer = LaFTer(backbone, names, TEMPLATES, SASTConfig(epochs=2))
    classifier = trainer.adapt(images, "UL", augment=jitter)
    assert classifier(images).shape == (len(images), 4)


def test_state_dict_round_trip() -> None:
    task = toy_task(seed=4)
    _, classifier, images, _ = _adapt(SASTTrainer, SASTConfig(epochs=3), task)
    fresh = SASTTrainer(task[0], task[3], TEMPLATES, SASTConfig(epochs=0)).build_classifier()
    fresh.load_state_dict(classifier.state_dict())
    with torch.no_grad():
        assert torch.equal(fresh(images), classifier(images))


def test_shuffled_stability_control_changes_the_weights_only() -> None:
    task = toy_task(anchor_shift=1.0, seed=2)
    a, _, _, _ = _adapt(SASTTrainer, SASTConfig(epochs=5), task)
    b, _, _, _ = _adapt(SASTTrainer, SASTConfig(epochs=5, shuffle_stability=True), task)
    assert not torch.equal(a.ledger.history, b.ledger.history)


# ----- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names, templates, match",
    [
        (["a", "a", "b"], TEMPLATES, "duplicates"),
        ([], TEMPLATES, "at least 2"),
        (["a", " "], TEMPLATES, "non-empty"),
        (["a", "b"], ["a photo"], r"\{\}"),
        (["a", "b"], [], "templates"),
    ],
)
def test_bad_class_names_and_templates(names, templates, match) -> None:
    backbone = toy_task()[0]
    with pytest.raises(ValueError, match=match):
        SASTTrainer(backbone, names, templates)


def test_bad_images_labels_and_settings() -> None:
    backbone, images, truth, names = toy_task()
    trainer = SASTTrainer(backbone, names, TEMPLATES, SASTConfig(epochs=1))
    with pytest.raises(ValueError, match="target must have shape"):
        trainer.adapt(images[:, :1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        trainer.adapt(images * 255)
    with pytest.raises(TypeError, match="target"):
        trainer.adapt(images.numpy())
    with pytest.raises(ValueError, match="unknown classes"):
        trainer.adapt(images, "SSL", torch.full_like(truth, 7))
    with pytest.raises(ValueError, match="needs labels"):
        trainer.adapt(images, "SSL")
    with pytest.raises(ValueError, match="setting"):
        trainer.adapt(images, "semi")
    with pytest.raises(ValueError, match="unseen"):
        trainer.adapt(images, "TRZSL", truth)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"window": 1}, "window"),
        ({"s_min": 1.5}, "s_min"),
        ({"s_min": -0.1}, "s_min"),
        ({"fusion": "max"}, "fusion"),
        ({"trainable": "all"}, "trainable"),
    ],
)
def test_bad_config(changes, match) -> None:
    with pytest.raises(ValueError, match=match):
        SASTConfig(**changes)


def test_backbone_without_the_protocol_is_rejected() -> None:
    class NotABackbone(torch.nn.Module):
        def encode_image(self, images):
            return images

    with pytest.raises(TypeError, match="encode_text"):
        SASTTrainer(NotABackbone(), ["a", "b"], TEMPLATES)
    with pytest.raises(TypeError, match="VLMBackbone"):
        SASTTrainer(object(), ["a", "b"], TEMPLATES)


def test_toy_backbone_follows_the_protocol() -> None:
    from neurips26.methods.sast import VLMBackbone

    assert isinstance(ToyBackbone(torch.eye(3, 4)), VLMBackbone)
