"""SEM-FAS experiment parts: metrics, baselines' own invariants, a trained coverage check, a tiny run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurips26.bench.experiment import SilentProgress
from neurips26.bench.setup import build_context
from neurips26.core.config import apply_overrides
from neurips26.methods.semfas import evaluation as ev
from neurips26.methods.semfas.baselines import TMCFusion
from neurips26.methods.semfas.encoders import make_encoders
from neurips26.methods.semfas.experiment import EXPERIMENT, SYSTEMS, SEMFASExperimentConfig, run
from neurips26.methods.semfas.model import SEMFAS
from neurips26.methods.semfas.training import TrainSettings, fit

torch.set_num_threads(1)


def test_metrics_match_their_definitions_and_netcal() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    scores = np.clip(labels * 0.3 + rng.uniform(0, 0.7, 400), 0, 1)
    threshold = ev.eer_threshold(labels, scores)
    apcer = np.mean(scores[labels == 1] < threshold)
    bpcer = np.mean(scores[labels == 0] >= threshold)
    assert ev.hter(labels, scores, threshold) == pytest.approx((apcer + bpcer) / 2)
    assert abs(apcer - bpcer) < 0.05  # the EER point
    assert ev.ece(labels, scores) == pytest.approx(ev.ece_netcal(labels, scores), abs=0.02)
    assert ev.hter(labels, labels.astype(float), 0.5) == 0.0 and ev.auc(labels, labels.astype(float)) == 1.0
    errors = (rng.random(400) < 0.2).astype(float)
    assert ev.aurc(errors, errors) < ev.aurc(errors, -errors)  # ranking errors last beats first
    attribution = np.eye(3)[[0, 1, 2, 0]]
    assert ev.attribution_accuracy(attribution, np.array([0, 1, 0, -1])) == pytest.approx(2 / 3)


def test_tmc_missing_view_is_the_identity_of_dempster_shafer() -> None:
    alpha = torch.tensor([[3.0, 1.5], [1.0, 7.0]])
    assert torch.allclose(TMCFusion.combine(alpha, torch.ones(2, 2)), alpha, atol=1e-6)
    both = TMCFusion.combine(alpha, alpha)
    assert (both.sum(-1) > alpha.sum(-1)).all()  # agreeing evidence lowers the uncertainty K / S


def _toy(n: int, seed: int, shift: float = 0.0):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=generator)
    features = {m: torch.randn(n, 6, generator=generator) + shift for m in ("rgb", "depth", "ir")}
    for m in features:
        features[m][:, 0] += 2.0 * (labels.float() * 2 - 1)
    return features, labels


def _trained_coverage_mass(seed: int, use_coverage: bool, coverage_weight: float) -> tuple[float, float]:
    """In-regime mean coverage mismatch and accuracy of a small SEM-FAS trained on the toy task."""
    torch.manual_seed(seed)
    model = SEMFAS(
        make_encoders(dict.fromkeys(("rgb", "depth", "ir"), 6), 16, 0.0),
        dim=16,
        heads=2,
        povm_rank=4,
        use_coverage=use_coverage,
        coverage_weight=coverage_weight,
    )
    fit(model, *_toy(400, 0), TrainSettings(epochs=15, batch_size=100, lr=0.02, modality_dropout=0.2))
    features, labels = _toy(200, 1)
    with torch.no_grad():
        output = model(features)
    return float(output.coverage_mismatch.mean()), float((output.probs.argmax(1) == labels).float().mean())


@pytest.mark.parametrize("use_coverage", [True, False])
def test_coverage_regulariser_pulls_in_regime_states_into_the_measured_subspace(use_coverage: bool) -> None:
    """Idea-off: trained with the coverage-mass term, in-regime inputs leave at most a quarter of the
    coverage mass the same model leaves without it (measured 0.04-0.12 over seeds 0-5, so a 2x margin),
    at every one of three seeds; without the coverage element the score is identically zero and the
    ratio cannot hold. (The coverage mismatch does NOT reliably flag out-of-regime inputs: README,
    "coverage element"; benchmarks/semfas/semfas_coverage_probe.py.)"""
    for seed in range(3 if use_coverage else 1):  # off, the score is zero by construction: one seed shows it
        regularised, accuracy = _trained_coverage_mass(seed, use_coverage, coverage_weight=0.5)
        plain, _ = _trained_coverage_mass(seed, use_coverage, coverage_weight=0.0)
        assert accuracy > 0.9, seed
        if use_coverage:
            assert plain > 0.05 and regularised < 0.25 * plain, (seed, regularised, plain)
        else:
            assert abs(regularised) < 1e-6 and abs(plain) < 1e-6, seed


def test_every_system_runs_on_a_tiny_config() -> None:
    config = apply_overrides(
        SEMFASExperimentConfig(),
        {"n_per_domain": 40, "method.epochs": 1, "p3": "cw_ps", "mc_passes": 2},
    )
    smoke = EXPERIMENT.profiles["smoke"]
    context = build_context(EXPERIMENT, config, smoke, 0)
    metrics = run(SYSTEMS["semfas"](config), config, context, smoke, 0, SilentProgress())
    names = {m.name for m in EXPERIMENT.metrics}
    assert set(metrics) <= names
    for key in (
        "p1_hter",
        "p2_hter",
        "p3_hter",
        "attribution_accuracy",
        "novelty_auroc",
        "novel_mixedness_rise",
    ):
        assert np.isfinite(metrics[key]), key
    for name in ("tmc", "mmdg_lite", "erm_ts", "erm_mcdropout", "rgb_only", "semfas_nocov"):
        out = run(SYSTEMS[name](config), config, context, smoke, 0, SilentProgress())
        assert np.isfinite(out["p1_auc"]) and np.isfinite(out["novelty_auroc"]), name


def test_system_factories_use_the_config() -> None:
    config = apply_overrides(SEMFASExperimentConfig(), {"method.heads": 2})
    assert SYSTEMS["semfas"](config).method.heads == 2
    assert SYSTEMS["semfas_pure"](config).method.heads == 1
    assert not SYSTEMS["semfas_real"](config).method.use_phase
    assert not SYSTEMS["semfas_nocov"](config).method.use_coverage
    with pytest.raises(ValueError, match="p3"):
        SEMFASExperimentConfig(p3="xx")
