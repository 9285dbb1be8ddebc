"""SP-CACW's in-process engine: FedAvg equivalence, kernels vs naive loops, dropped replies, data splits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurips26.methods.spcacw import BiasEstimator, SPCACWConfig
from neurips26.methods.spcacw.baselines import BASELINES, BaselineConfig, run_baseline
from neurips26.methods.spcacw.engine import FlatMLP, Kernels, run_synthetic, run_weighted
from neurips26.methods.spcacw.federated import digits_federation, linear_federation


@pytest.fixture(scope="module")
def data():
    return digits_federation(n_clients=6, n_concepts=2, seed=1)


MODEL = FlatMLP((64, 8, 10))


@pytest.mark.parametrize("steps", [1, 3])
def test_sample_count_weights_equal_fedavg(data, steps):
    """Degenerate equivalence: alpha proportional to sample counts is FedAvg (FedSGD at one local step)."""
    update = "gradient" if steps == 1 else "delta"
    config = SPCACWConfig(lr=0.1, update=update, local_steps=steps)
    ours = run_weighted(data, MODEL, config, rule="samples", rounds=6, batch=8, seed=3, targets=[0, 2])
    fedavg = run_baseline(
        BaselineConfig("fedavg"),
        data,
        MODEL,
        lr=0.1,
        batch=8,
        local_steps=steps,
        rounds=6,
        seed=3,
        targets=[0],
    )
    torch.testing.assert_close(ours.theta[0], fedavg.theta[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.theta[1], fedavg.theta[0], atol=1e-5, rtol=1e-4)


def test_local_rule_equals_local_baseline(data):
    config = SPCACWConfig(lr=0.1)
    ours = run_weighted(data, MODEL, config, rule="local", rounds=5, batch=8, seed=0, targets=[0])
    local = run_baseline(
        BaselineConfig("local"), data, MODEL, lr=0.1, batch=8, local_steps=1, rounds=5, seed=0, targets=[0]
    )
    torch.testing.assert_close(ours.theta[0], local.theta[0], atol=1e-5, rtol=1e-4)


def test_group_kernel_matches_autograd_loop(data):
    kernels = Kernels(MODEL)
    theta = MODEL.init(3, torch.Generator().manual_seed(0))
    x = data.x[:3, :8].reshape(3, 2, 4, 64)
    y = data.y[:3, :8].reshape(3, 2, 4)
    fast = kernels.per_client_groups(theta, x, y)
    for c in range(3):
        for m in range(2):
            p = theta[c].clone().requires_grad_(True)
            MODEL.loss(p, x[c, m], y[c, m]).backward()
            torch.testing.assert_close(fast[c, m], p.grad)


@pytest.mark.parametrize("groups", [2, 4])
def test_gram_variance_kernel_matches_explicit_micro_batches(data, groups):
    """Oracle: gradient_and_variance equals within_client_variance of the explicit micro-batch gradients."""
    from neurips26.methods.spcacw import within_client_variance
    from neurips26.methods.spcacw.engine import split_groups

    model = FlatMLP((64, 8, 7, 10))
    theta = model.init(4, torch.Generator().manual_seed(1))
    x, y = data.x[:4, :16], data.y[:4, :16]
    g, s = model.gradient_and_variance(theta, x, y, groups)
    xg, yg = split_groups(x, y, groups)
    g_ref, s_ref = within_client_variance(Kernels(model).per_client_groups(theta, xg, yg))
    torch.testing.assert_close(g, g_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(s, s_ref, atol=1e-6, rtol=1e-4)


def test_nan_reply_is_dropped_and_logged(data):
    poisoned = type(data)(**{**data.__dict__, "x": data.x.clone()})
    poisoned.x[3] = float("nan")
    run = run_weighted(poisoned, MODEL, SPCACWConfig(lr=0.1), rounds=4, batch=8, seed=0, targets=[0])
    assert torch.isfinite(run.theta).all()
    for record in run.logs[0]:
        assert record.dropped == [3] and record.alpha[3] == 0.0
    with pytest.raises(ValueError, match="target"):
        run_weighted(data, MODEL, SPCACWConfig(), rounds=1, batch=8, seed=0, targets=[9])


def test_round_log_has_every_term_and_certificate(data):
    run = run_weighted(data, MODEL, SPCACWConfig(lr=0.1), rounds=5, batch=8, seed=0, targets=[1])
    records = run.logs[1]
    assert len(records) == 5 and records[0].better_off_alone  # warm-up round: no bias observed yet
    for r in records:
        assert len(r.alpha) == len(r.variance) == len(r.bias_sq) == len(r.variance_terms) == data.n_clients
        assert r.bound <= r.local_bound * (1 + 1e-12)
        assert r.better_off_alone == all(a == 0.0 for i, a in enumerate(r.alpha) if i != 1)


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_trains_and_stays_finite(data, name):
    run = run_baseline(
        BaselineConfig(name), data, MODEL, lr=0.1, batch=8, local_steps=2, rounds=4, seed=0, targets=[0, 1],
        eval_every=2,
    )  # fmt: skip
    assert run.theta.shape == (data.n_clients, MODEL.n_params) and torch.isfinite(run.theta).all()
    assert len(run.curve) == 2 and all(0 <= a <= 1 for a in np.concatenate(run.curve))


def test_synthetic_weights_approach_the_bound_optimum_and_beat_local():
    fed = linear_federation([0.0] + [0.05] * 3 + [2.0] * 4, [1.0] * 8, [8] * 8, dim=5, seed=0)
    config = SPCACWConfig(lr=0.02, smoothness=50.0)
    ours = run_synthetic(fed, config, rule="bound", rounds=200, seed=0)
    local = run_synthetic(fed, config, rule="local", rounds=200, seed=0)
    uniform = run_synthetic(fed, config, rule="uniform", rounds=200, seed=0)
    error = np.abs(ours.alphas[100:] - ours.analytic[100:]).sum(1).mean()
    assert error < 0.3  # Local's L1 distance to the optimum is 1.5, uniform's 1.0
    assert ours.alphas[100:, 4:].max() == 0.0  # far peers (zeta = 2) never get weight once observed
    assert np.mean(ours.losses[100:]) < np.mean(local.losses[100:])
    assert np.mean(ours.losses[100:]) < np.mean(uniform.losses[100:])


def test_debiased_bias_estimate_is_the_idea_that_lets_near_peers_in(monkeypatch):
    """Idea off: without subtracting s_i + s_0, near-identical peers look biased and get little weight."""
    fed = linear_federation([0.0] + [0.05] * 3 + [2.0] * 4, [1.0] * 8, [8] * 8, dim=5, seed=0)
    config = SPCACWConfig(lr=0.02, smoothness=50.0)

    def run_all() -> tuple[float, float]:
        runs = [run_synthetic(fed, config, rule="bound", rounds=200, seed=s) for s in range(3)]
        return np.mean([np.mean(r.losses[100:]) for r in runs]), np.mean(
            [r.alphas[100:, 1:4].sum(1).mean() for r in runs]
        )

    loss_on, peers_on = run_all()
    monkeypatch.setattr(
        BiasEstimator,
        "raw",
        lambda self: np.where(
            self.weight > 0, self.distance / np.where(self.weight > 0, self.weight, 1.0), np.inf
        ),
    )
    loss_off, peers_off = run_all()
    assert peers_on > 0.6 and peers_off < 0.5 * peers_on
    assert loss_on < 0.85 * loss_off


def test_digits_split_has_no_leakage_and_target_size():
    d = digits_federation(seed=0)
    assert int(d.count[0]) == 40 and d.n_clients == 16
    assert torch.allclose(d.label_weights.sum(-1), torch.ones(16))
    # no training image of any client appears in its test pool (same concept transform on both sides)
    for c in range(16):
        train = {tuple(row) for row in d.x[c, : int(d.count[c])].numpy().round(4).tolist()}
        test = {tuple(row) for row in d.test_x[c].numpy().round(4).tolist()}
        assert not train & test
    with pytest.raises(ValueError, match="concept_kind"):
        digits_federation(concept_kind="shuffle")


@pytest.mark.parametrize("form", ["linear", "squared"])
def test_vectorised_bookkeeping_equals_the_per_target_loop(data, form):
    """All targets' estimators and exact solves in one step = choose_weights and BiasEstimator per target."""
    poisoned = type(data)(**{**data.__dict__, "x": data.x.clone()})
    poisoned.x[4] = float("nan")
    config = SPCACWConfig(lr=0.1, smoothness=40.0, bias_form=form, variance_every=1)
    common = {"rounds": 12, "batch": 8, "seed": 2, "targets": [0, 3, 5]}
    fast = run_weighted(poisoned, MODEL, config, **common)
    slow = run_weighted(poisoned, MODEL, config, vectorised=False, **common)
    torch.testing.assert_close(fast.theta, slow.theta, atol=1e-6, rtol=0)
    for target in common["targets"]:
        for a, b in zip(fast.logs[target], slow.logs[target], strict=True):
            np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-12)
            np.testing.assert_allclose(a.bias_sq, b.bias_sq, atol=1e-12)
            assert (a.better_off_alone, a.dropped) == (b.better_off_alone, b.dropped) and a.dropped == [4]
    assert any(r.alpha[1] > 0 or r.alpha[2] > 0 for r in fast.logs[0])  # peers are weighted: not all Local
    with pytest.raises(ValueError, match="variance_every"):
        run_weighted(data, MODEL, SPCACWConfig(variance_every=2), vectorised=False, **common)


def test_amortised_variance_keeps_the_weights():
    """s_i every 4th round (the default) gives the weights of s_i every round, within minibatch noise."""
    data = digits_federation(n_clients=8, n_concepts=1, seed=0)
    common = {"rounds": 60, "batch": 16, "seed": 0, "targets": [0]}
    base = SPCACWConfig(lr=0.1, smoothness=100.0)
    every = run_weighted(data, MODEL, SPCACWConfig(lr=0.1, smoothness=100.0, variance_every=1), **common)
    amortised = run_weighted(data, MODEL, base, **common)
    a = np.asarray([r.alpha for r in every.logs[0]])[20:].mean(0)
    b = np.asarray([r.alpha for r in amortised.logs[0]])[20:].mean(0)
    assert a[1:].sum() > 0.3 and np.abs(a - b).sum() < 0.15  # measured: 0.49 and 0.07


@pytest.mark.parametrize("every", [1, 4])
def test_compiled_round_equals_the_numpy_path(data, every):
    """The numba round (linear form) = the NumPy path (batched.py): weights, log and models, with a NaN
    peer, a NaN target (targets 0 and 4; client 4 is poisoned) and amortised variance estimates."""
    pytest.importorskip("numba")
    from neurips26.methods.spcacw import core, kernels

    assert kernels._FLOOR == core._VARIANCE_FLOOR
    poisoned = type(data)(**{**data.__dict__, "x": data.x.clone()})
    poisoned.x[4] = float("nan")
    config = SPCACWConfig(lr=0.1, smoothness=40.0, variance_every=every)
    common = {"rounds": 14, "batch": 8, "seed": 2, "targets": [0, 3, 4]}
    fast = run_weighted(poisoned, MODEL, config, **common)
    slow = run_weighted(poisoned, MODEL, config, compiled=False, **common)
    torch.testing.assert_close(fast.theta, slow.theta, atol=1e-6, rtol=0)
    for target in common["targets"]:
        assert len(fast.logs[target]) == len(slow.logs[target]) == 14
        for a, b in zip(fast.logs[target], slow.logs[target], strict=True):
            for key in ("alpha", "bias_sq", "variance", "variance_terms"):
                np.testing.assert_allclose(getattr(a, key), getattr(b, key), atol=1e-12, rtol=1e-12)
            assert a.bound == pytest.approx(b.bound, abs=1e-12) and a.local_bound == b.local_bound
            assert (a.better_off_alone, a.dropped) == (b.better_off_alone, b.dropped) and a.dropped == [4]
    assert any(r.alpha[1] > 0 or r.alpha[2] > 0 for r in fast.logs[0])  # peers are weighted: not all Local
    # a target without a valid update of its own never observes its peers: it keeps its model
    assert all(r.better_off_alone for r in fast.logs[4])
    torch.testing.assert_close(fast.theta[2], MODEL.init(1, torch.Generator().manual_seed(2))[0])


def test_round_log_reads_like_a_list(data):
    run = run_weighted(data, MODEL, SPCACWConfig(lr=0.1), rounds=5, batch=8, seed=0, targets=[0, 1])
    log = run.logs[1]
    assert len(log) == 5 and log[-1] == log[4] and [r.round for r in log[1:3]] == [1, 2]
    assert list(log) == log[:] and log[0].round == 0
    with pytest.raises(IndexError):
        log[5]


def test_sample_batch_draws_the_rows_of_take_along_dim():
    """The flat gather draws exactly what per-client take_along_dim draws (same generator stream)."""
    d = digits_federation(seed=0)
    for batch in (1, 8, 32):
        reference, ours = torch.Generator().manual_seed(batch), torch.Generator().manual_seed(batch)
        for _ in range(3):
            index = (torch.rand(d.n_clients, batch, generator=reference) * d.count[:, None]).long()
            x, y = d.sample_batch(batch, ours)
            assert torch.equal(x, torch.take_along_dim(d.x, index[..., None], dim=1))
            assert torch.equal(y, torch.take_along_dim(d.y, index, dim=1))


def test_compiled_squared_distances_equal_torch_in_float64():
    pytest.importorskip("numba")
    from neurips26.methods.spcacw.kernels import sq_distances

    g = torch.randn(3, 5, 37, generator=torch.Generator().manual_seed(0))
    targets = np.array([0, 2, 4])
    own = g[torch.arange(3), torch.as_tensor(targets)].double()
    expected = ((g.double() - own[:, None]) ** 2).sum(-1).numpy()
    np.testing.assert_allclose(sq_distances(g.numpy(), targets), expected, rtol=1e-13)
    g[1, 3, 5] = float("nan")  # a broken peer: its distance is NaN; a broken target: its whole row
    g[2, 4, 0] = float("inf")
    d = sq_distances(g.numpy(), targets)
    assert np.isnan(d[1, 3]) and np.isfinite(np.delete(d[1], 3)).all() and not np.isfinite(d[2]).any()


@pytest.fixture(scope="module")
def concept_weights() -> tuple[float, float]:
    """The engine's SP-CACW weights (the experiment's path, compiled when numba is there) on a digits
    federation of two label-permutation concepts, averaged over the last 30 of 60 rounds: the summed
    weight of the target's same-concept peers (clients 2, 4, 6) and of the other concept's (1, 3, 5, 7)."""
    data = digits_federation(
        n_clients=8, n_concepts=2, concept_kind="label_permutation", dirichlet=100.0, target_samples=40,
        seed=1,
    )  # fmt: skip
    run = run_weighted(data, MODEL, SPCACWConfig(), rounds=60, batch=16, seed=0, targets=[0])
    alpha = np.array([record.alpha for record in run.logs[0]])[-30:].mean(0)
    return float(alpha[2::2].sum()), float(alpha[1::2].sum())


def test_idea_engine_bias_term_keeps_the_other_concepts_peers_out(concept_weights):
    """Central idea (the bound's bias term), through ``run_weighted``: peers whose labels mean something
    else get little weight (0.07 here; same-concept peers 0.41). Off (the squared bias set to 0 in the
    engine's solve) they get 0.47-0.50, as much as the same-concept peers, and this fails."""
    same, other = concept_weights
    assert other < 0.15 and other < 0.5 * same, (same, other)


def test_idea_engine_debiased_estimate_lets_same_concept_peers_in(concept_weights):
    """Central idea (debiased bias estimate: ``EMA||g_i - g_0||^2 - EMA(s_i + s_0)``), through
    ``run_weighted``: the target's same-concept peers share 0.41 of the weight. Off (the raw EMA, noise
    not subtracted) every peer looks biased and the target trains alone (0.0), so this fails."""
    same, _ = concept_weights
    assert same > 0.3, same
