"""DACS: degenerate equivalences, the GRL, the ratio QP, invariances, idea-off tests and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
pytest.importorskip("cvxpy")

from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.dacs import DACSConfig, DACSTrainer, diagnose_shift
from neurips26.methods.dacs import core as dacs_core
from neurips26.methods.dacs.baselines import GDABaselineTrainer
from neurips26.methods.dacs.core import (
    GradientReversal,
    conditional_ratio,
    edge_pair_histogram,
    prototype_edge_ratio,
    ratio_qp_closed_form,
    solve_ratio_qp,
)
from neurips26.methods.dacs.graph_shift import make_csbm_pair
from neurips26.methods.dacs.integration import DACS, build_network

torch.set_num_threads(1)
FAST = {"epochs": 12, "warmup_epochs": 3, "reestimate_every": 3, "hidden": 16}


def _pair(seed=0, n=300, **kwargs):
    pair = make_csbm_pair(seed=seed, n_nodes=n, **kwargs)
    target = pair.target.clone()
    for key in ("y", "subcluster", "clean_x"):
        del target[key]
    return pair, target


# -- degenerate equivalences (two independent training loops) --------------------------------------------


def test_no_adversary_no_reweighting_equals_source_only_exactly():
    pair, target = _pair(feature_shift=1.0, structure_shift=0.8)
    config = DACSConfig(**FAST, lambda_feature=0.0, lambda_final=0.0, structure_reweighting=False)
    ours = DACSTrainer(config).fit(pair.source, target)
    baseline = GDABaselineTrainer("source_only", config).fit(pair.source, target)
    assert torch.equal(ours.predict_logits(target), baseline.predict_logits(target))
    # idea-off guard: with the adversary on, the two differ
    adversarial = DACSTrainer(config, lambda_feature=0.5).fit(pair.source, target)
    assert not torch.equal(adversarial.predict_logits(target), baseline.predict_logits(target))


def test_stage_two_off_equals_dann_gcn_exactly():
    pair, target = _pair(seed=1, feature_shift=1.0)
    config = DACSConfig(**FAST, lambda_feature=0.0, lambda_final=0.7, structure_reweighting=False)
    ours = DACSTrainer(config).fit(pair.source, target)
    baseline = GDABaselineTrainer("dann_gcn", config).fit(pair.source, target)
    assert torch.equal(ours.predict_logits(target), baseline.predict_logits(target))


def test_all_ones_edge_weight_equals_none():
    pair, _ = _pair(seed=2)
    model = build_network(DACSConfig(hidden=16), pair.source.x.shape[1], 3)
    ones = torch.ones(pair.source.edge_index.shape[1])
    x, ei = pair.source.x, pair.source.edge_index
    assert torch.equal(model(x, ei, [ones, ones]), model(x, ei))


# -- the gradient reversal layer -------------------------------------------------------------------------


@given(alpha=st.floats(0.0, 5.0, allow_nan=False))
@settings(max_examples=20, deadline=None)
def test_gradient_reversal_flips_and_scales(alpha):
    x = torch.randn(5, 3, requires_grad=True)
    layer = GradientReversal(alpha)
    out = layer(x)
    assert torch.equal(out, x)
    upstream = torch.randn(5, 3)
    out.backward(upstream)
    torch.testing.assert_close(x.grad, -alpha * upstream)


# -- the ratio QP ----------------------------------------------------------------------------------------


@given(
    m=st.integers(2, 6),
    lam=st.floats(0.0, 1.0),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=25, deadline=None)
def test_ratio_qp_meets_its_constraints(m, lam, seed):
    rng = np.random.default_rng(seed)
    mu_s = rng.dirichlet(np.ones(m))
    mu_t = rng.dirichlet(np.ones(m))
    confusion = np.diag(mu_s) + 0.05 * rng.random((m, m)) * mu_s
    w = solve_ratio_qp(confusion, mu_t, mu_s, lam)
    assert (w >= 0).all()
    assert mu_s @ w == pytest.approx(1.0, abs=1e-5)


def test_ratio_qp_agrees_with_its_closed_form_on_2x2():
    mu_s = np.array([0.6, 0.4])
    mu_t = np.array([0.5, 0.5])
    confusion = np.array([[0.55, 0.05], [0.05, 0.35]])
    for lam in (0.0, 0.1, 1.0):
        qp = solve_ratio_qp(confusion, mu_t, mu_s, lam)
        closed = ratio_qp_closed_form(confusion, mu_t, mu_s, lam)
        np.testing.assert_allclose(qp, closed, atol=1e-6)
    # with lam = 0 and an invertible C the minimiser solves C w = mu_T when that is feasible
    w = solve_ratio_qp(np.diag(mu_s), mu_t, mu_s, 0.0)
    np.testing.assert_allclose(w, mu_t / mu_s, atol=1e-6)


def test_conditional_ratio_is_one_without_shift_and_recovers_known_ratio():
    joint = np.array([[0.3, 0.1], [0.1, 0.5]])
    np.testing.assert_allclose(conditional_ratio(np.ones((2, 2)), joint, 0.0), np.ones((2, 2)))
    target = np.array([[0.2, 0.2], [0.2, 0.4]])
    gamma = conditional_ratio(target / joint, joint, 0.0)
    p_t = target / target.sum(1, keepdims=True)
    p_s = joint / joint.sum(1, keepdims=True)
    np.testing.assert_allclose(gamma, p_t / p_s)


def test_edge_pair_histogram_matches_a_loop():
    rng = np.random.default_rng(0)
    assign = rng.integers(0, 4, 50)
    edges = rng.integers(0, 50, (2, 300))
    fast = edge_pair_histogram(assign, edges, 4)
    slow = np.zeros((4, 4))
    for j, i in edges.T:
        slow[assign[i], assign[j]] += 1
    np.testing.assert_allclose(fast, slow / slow.sum())


# -- the feature-conditional edge ratio ------------------------------------------------------------------


def test_gamma_error_falls_as_nodes_grow():
    errors = {}
    for n in (400, 3000):
        per_seed = []
        for seed in range(3):
            pair = make_csbm_pair(seed=seed, n_nodes=n, structure_shift=0.9)
            s, t = pair.source, pair.target
            estimate = prototype_edge_ratio(s.x, t.x, s.edge_index, t.edge_index, 6, 1e-3, 0.0, seed=seed)
            per_seed.append(float((estimate.weights - pair.true_edge_ratio()).abs().mean()))
        errors[n] = np.mean(per_seed)
    assert errors[3000] < 0.8 * errors[400]


def test_idea_reweighted_source_matches_the_target_edge_distribution(monkeypatch):
    """Central idea (stage 2): reweighting source edges by gamma moves P_S(b|a) onto P_T(b|a)."""
    pair = make_csbm_pair(seed=4, n_nodes=1500, structure_shift=0.9)
    s, t = pair.source, pair.target

    def gap(estimate):
        k = estimate.gamma.shape[0]
        assign, edges = estimate.source_assign, s.edge_index.numpy()
        cells = assign[edges[1]] * k + assign[edges[0]]
        weighted = np.bincount(cells, weights=estimate.weights.numpy(), minlength=k * k).reshape(k, k)
        p_w = weighted / weighted.sum(1, keepdims=True)
        p_t = estimate.target_joint / estimate.target_joint.sum(1, keepdims=True)
        return np.abs(p_w - p_t).sum(1).mean()

    args = (s.x, t.x, s.edge_index, t.edge_index, 6, 1e-3, 0.0)
    on = gap(prototype_edge_ratio(*args))
    p_s = prototype_edge_ratio(*args)
    unweighted = (
        np.abs(
            p_s.source_joint / p_s.source_joint.sum(1, keepdims=True)
            - p_s.target_joint / p_s.target_joint.sum(1, keepdims=True)
        )
        .sum(1)
        .mean()
    )
    assert on < 0.25 * unweighted
    # idea off: a QP that returns w = 1 leaves the gap where it was
    monkeypatch.setattr(dacs_core, "solve_ratio_qp", lambda c, t_, s_, lam: np.ones(len(s_)))
    off = gap(prototype_edge_ratio(*args))
    assert off > 0.8 * unweighted


def test_idea_stage_order_fcss_estimate_needs_aligned_features():
    """Central idea (stages are not interchangeable): under FS the prototypes split by domain, so the
    FCSS ratio estimated before alignment is wrong; removing the shift (what stage 1 learns) fixes it."""
    pair = make_csbm_pair(seed=5, n_nodes=1500, structure_shift=0.9, feature_shift=1.5)
    s, t = pair.source, pair.target
    truth = pair.true_edge_ratio()
    shift = 1.5 * pair.spec.class_separation * pair.shift_direction
    raw = prototype_edge_ratio(s.x, t.x, s.edge_index, t.edge_index, 6, 1e-3, 0.0)
    aligned = prototype_edge_ratio(s.x, t.x - shift, s.edge_index, t.edge_index, 6, 1e-3, 0.0)
    err_raw = float((raw.weights - truth).abs().mean())
    err_aligned = float((aligned.weights - truth).abs().mean())
    assert err_aligned < 0.5 * err_raw


def test_idea_stage_one_aligns_representations_before_propagation():
    """Central idea (stage 1): the adversary on h0 shrinks the domain gap of h0 (before any propagation)."""
    pair, target = _pair(seed=6, n=400, feature_shift=1.5)
    config = DACSConfig(epochs=100, structure_reweighting=False, lambda_final=0.0)

    def h0_gap(trainer):
        with torch.no_grad():
            h_s, h_t = trainer.model_.encode(pair.source.x), trainer.model_.encode(target.x)
        spread = torch.cat([h_s, h_t]).var(0).sum().sqrt()
        return float((h_s.mean(0) - h_t.mean(0)).norm() / spread)

    on = h0_gap(DACSTrainer(config, lambda_feature=10.0).fit(pair.source, target))
    off = h0_gap(DACSTrainer(config, lambda_feature=0.0).fit(pair.source, target))
    assert on < 0.75 * off


@pytest.mark.parametrize("stage_two_wired", [True, False], ids=["wired", "weights_cut_out"])
def test_idea_trainer_trains_on_stage_two_weights(monkeypatch, stage_two_wired):
    """Central idea (stage 2), through ``DACSTrainer.fit``: the re-estimated edge weights enter training.

    The trained model must differ from the one trained without stage 2. The negative case cuts the
    weights out of the training forward pass (``DACS.propagate`` drops them; re-estimation still runs),
    the reviewer's break of issue 43: the model then equals the stage-2-off model bit for bit, so this
    test would fail if the wiring were cut.
    """
    if not stage_two_wired:
        propagate = DACS.propagate

        def propagate_without_weights(self, h0, edge_index, edge_weights=None):
            return propagate(self, h0, edge_index)

        monkeypatch.setattr(DACS, "propagate", propagate_without_weights)
    pair, target = _pair(seed=7, structure_shift=0.9)
    with_stage_two = DACSTrainer(DACSConfig(**FAST)).fit(pair.source, target)
    without = DACSTrainer(DACSConfig(**FAST, structure_reweighting=False)).fit(pair.source, target)
    assert not torch.all(with_stage_two.edge_weights_[0] == 1)  # stage 2 did estimate non-unit weights
    gap = float((with_stage_two.predict_logits(target) - without.predict_logits(target)).abs().max())
    assert (gap > 0.05) == stage_two_wired, gap


def test_trainer_weights_follow_warmup_and_reestimation():
    pair, target = _pair(seed=7, structure_shift=0.9)
    seen = []
    trainer = DACSTrainer(DACSConfig(**FAST))

    def spy(epoch, model):
        seen.append(torch.stack(trainer.edge_weights_).clone())

    trainer.fit(pair.source, target, callback=spy)
    assert all(torch.all(w == 1) for w in seen[:3])  # warm-up: unit weights
    assert not torch.all(seen[3] == 1)  # first re-estimation at epoch 3
    assert len(trainer.edge_weights_) == 2
    assert trainer.edge_weights_[0].shape == (pair.source.edge_index.shape[1],)
    assert not torch.equal(trainer.edge_weights_[0], trainer.edge_weights_[1])  # one estimate per layer


def test_density_ratio_variant_and_label_weights_run():
    pair, target = _pair(seed=8, structure_shift=0.9, label_shift=0.8)
    trainer = DACSTrainer(DACSConfig(**FAST, ratio_estimator="density", label_weights=True))
    trainer.fit(pair.source, target)
    assert trainer.label_weights_ is not None and trainer.label_weights_.shape == (3,)
    assert torch.isfinite(trainer.edge_weights_[0]).all() and (trainer.edge_weights_[0] >= 0).all()


# -- invariance ------------------------------------------------------------------------------------------


def test_predictions_are_equivariant_to_node_permutation():
    pair, target = _pair(seed=9, structure_shift=0.9, feature_shift=1.0)
    trainer = DACSTrainer(DACSConfig(**FAST)).fit(pair.source, target)
    perm = torch.randperm(target.num_nodes, generator=torch.Generator().manual_seed(0))
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel())
    permuted = target.clone()
    permuted.x = target.x[perm]
    permuted.edge_index = inverse[target.edge_index]
    torch.testing.assert_close(trainer.predict_logits(permuted), trainer.predict_logits(target)[perm])


# -- diagnose_shift --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fs", "fcss"),
    [
        ({}, False, False),
        ({"feature_shift": 1.0}, True, False),
        ({"structure_shift": 0.9}, False, True),
        ({"feature_shift": 1.0, "structure_shift": 0.9}, True, True),
    ],
)
def test_diagnose_shift_flags_the_right_stages(kwargs, fs, fcss):
    pair, target = _pair(seed=10, n=1500, **kwargs)
    diagnosis = diagnose_shift(pair.source, target)
    assert diagnosis.feature_shift is fs
    assert diagnosis.structure_shift is fcss
    assert (1 in diagnosis.stages) is fs and (2 in diagnosis.stages) is fcss
    assert "recommended stages" in str(diagnosis)


# -- bad input -------------------------------------------------------------------------------------------


def test_bad_input_errors_name_the_argument():
    pair, target = _pair(seed=11)
    trainer = DACSTrainer(DACSConfig(**FAST))
    narrow = target.clone()
    narrow.x = target.x[:, :5]
    with pytest.raises(ValueError, match=r"target\.x has 5 features"):
        trainer.fit(pair.source, narrow)
    unlabelled = pair.source.clone()
    del unlabelled.y
    with pytest.raises(ValueError, match=r"source\.y is required"):
        trainer.fit(unlabelled, target)
    broken = target.clone()
    broken.edge_index = target.edge_index.clone()
    broken.edge_index[0, 0] = 10_000
    with pytest.raises(ValueError, match=r"target\.edge_index"):
        trainer.fit(pair.source, broken)
    with pytest.raises(ValueError, match="n_prototypes"):
        DACSTrainer(DACSConfig(**FAST, n_prototypes=10_000)).fit(pair.source, target)
    with pytest.raises(ValueError, match="lambda_feature"):
        DACSConfig(lambda_feature=-1.0)
    with pytest.raises(ValueError, match="ratio_estimator"):
        DACSConfig(ratio_estimator="kernel")
    with pytest.raises(RuntimeError, match="fit"):
        DACSTrainer().predict(target)
    with pytest.raises(ValueError, match="lam"):
        solve_ratio_qp(np.eye(2), np.ones(2) / 2, np.ones(2) / 2, -1.0)
    with pytest.raises(ValueError, match="method"):
        GDABaselineTrainer("gcn2")


def test_target_labels_are_warned_about_and_ignored():
    pair, target = _pair(seed=12)
    config = DACSConfig(**FAST)
    with pytest.warns(UserWarning, match="target.y is present"):
        labelled = DACSTrainer(config).fit(pair.source, pair.target)
    unlabelled = DACSTrainer(config).fit(pair.source, target)
    assert torch.equal(labelled.predict_logits(target), unlabelled.predict_logits(target))


def test_experiment_cell_reports_every_metric_and_never_reads_target_labels(monkeypatch):
    from neurips26.bench.experiment import SilentProgress
    from neurips26.methods.dacs import experiment as dacs_experiment
    from neurips26.methods.dacs import integration

    profile = dacs_experiment.EXPERIMENT.profiles["smoke"]
    config = dacs_experiment.EXPERIMENT.config_for(profile, {"setting": "coupled"}, {"n_nodes": 200})
    seen_targets = []
    original = integration.check_domain_pair

    def spy(source, target):
        seen_targets.append(target)
        return original(source, target)

    monkeypatch.setattr(integration, "check_domain_pair", spy)
    system = dacs_experiment.EXPERIMENT.build_system("dacs", config)
    metrics = dacs_experiment.run(system, config, profile, 0, SilentProgress())
    for key in ("target_accuracy", "target_macro_f1", "gamma_error", "diagnosis_agreement", "epoch_ms"):
        assert np.isfinite(metrics[key]), key
    assert all(getattr(t, "y", None) is None and "subcluster" not in t for t in seen_targets)
