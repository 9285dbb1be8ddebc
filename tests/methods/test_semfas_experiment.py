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


@pytest.mark.parametrize("use_coverage", [True, False])
def test_trained_coverage_mismatch_flags_out_of_regime_inputs(use_coverage: bool) -> None:
    """Idea-off: with the coverage element, inputs far from the training data get a higher
    Tr(rho E_perp) than in-regime ones; without it the score is identically zero."""
    torch.manual_seed(0)
    model = SEMFAS(
        make_encoders(dict.fromkeys(("rgb", "depth", "ir"), 6), 16, 0.0),
        dim=16,
        heads=2,
        povm_rank=4,
        use_coverage=use_coverage,
        coverage_weight=0.5,
    )
    features, labels = _toy(400, 0)
    fit(model, features, labels, TrainSettings(epochs=30, batch_size=100, lr=0.02, modality_dropout=0.2))
    with torch.no_grad():
        inside = model(_toy(200, 1)[0]).coverage_mismatch.mean()
        outside = model(
            {m: torch.randn(200, 6) * 4 - 6 for m in ("rgb", "depth", "ir")}
        ).coverage_mismatch.mean()
        accuracy = (model(_toy(200, 1)[0]).probs.argmax(1) == _toy(200, 1)[1]).float().mean()
    assert accuracy > 0.9
    if use_coverage:
        assert outside > 1.5 * inside and outside > inside + 0.01
    else:
        assert outside.abs() < 1e-5 and inside.abs() < 1e-5


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
