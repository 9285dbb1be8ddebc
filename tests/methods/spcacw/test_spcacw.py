"""SP-CACW core: the weight solve (properties, brute force, OSQP), estimators, certificate, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.spcacw import (
    BiasEstimator,
    SPCACWConfig,
    bound_value,
    choose_weights,
    within_client_variance,
)
from neurips26.methods.spcacw.core import solve_exact
from neurips26.methods.spcacw.federated import linear_federation

FORMS = ("squared", "linear")


@st.composite
def problems(draw, max_clients: int = 12):
    n = draw(st.integers(2, max_clients))
    pos = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)
    variance = np.array(draw(st.lists(pos, min_size=n, max_size=n)))
    bias = np.array(draw(st.lists(st.floats(0.0, 1e3), min_size=n, max_size=n)))
    bias[0] = 0.0
    scale = draw(st.floats(1e-2, 1e2))
    return variance, bias, scale


@settings(max_examples=150, deadline=None)
@given(problems(), st.sampled_from(FORMS))
def test_weights_lie_on_simplex_and_zero_beyond_threshold(problem, form):
    variance, bias, scale = problem
    sol = choose_weights(variance, bias, scale=scale, bias_form=form)
    assert (sol.alpha >= 0).all()
    assert sol.alpha.sum() == pytest.approx(1.0, abs=1e-12)
    # a client at or beyond the derived threshold gets exactly zero weight, one below it a positive weight
    for i, z in enumerate(bias):
        if z >= sol.threshold * (1 + 1e-9):
            assert sol.alpha[i] == 0.0
        elif z <= sol.threshold * (1 - 1e-9):
            assert sol.alpha[i] > 0.0
    assert sol.bound <= sol.local_bound * (1 + 1e-12)  # the target alone is always feasible
    assert sol.bound == pytest.approx(bound_value(sol.alpha, variance, bias, scale, form), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(problems(max_clients=8), st.sampled_from(FORMS))
def test_exact_solution_matches_osqp(problem, form):
    variance, bias, scale = problem
    exact = choose_weights(variance, bias, scale=scale, bias_form=form)
    qp = choose_weights(variance, bias, scale=scale, bias_form=form, solver="osqp")
    assert exact.bound <= qp.bound * (1 + 1e-9) + 1e-12
    assert qp.bound == pytest.approx(exact.bound, rel=1e-6, abs=1e-10)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("seed", range(5))
def test_qp_matches_brute_force_grid_on_three_peers(form, seed):
    rng = np.random.default_rng(seed)
    variance = rng.uniform(0.2, 2.0, 4)
    bias = np.concatenate([[0.0], rng.uniform(0.0, 0.6, 3)])
    step = 0.005
    ticks = np.arange(0, 1 + step / 2, step)
    a, b, c = np.meshgrid(ticks, ticks, ticks, indexing="ij")
    grid = np.column_stack([a.ravel(), b.ravel(), c.ravel()])
    grid = grid[grid.sum(1) <= 1 + 1e-12]
    alpha = np.column_stack([1 - grid.sum(1), grid])
    bias_part = (alpha @ np.sqrt(bias)) ** 2 if form == "squared" else alpha @ bias
    values = (alpha**2) @ variance + bias_part  # scale = 1
    best = alpha[values.argmin()]
    sol = choose_weights(variance, bias, scale=1.0, bias_form=form)
    assert sol.bound <= values.min() + 1e-12
    assert values.min() - sol.bound < 1e-3
    np.testing.assert_allclose(sol.alpha, best, atol=2 * step)


@pytest.mark.parametrize("form", FORMS)
def test_identical_peers_get_uniform_weights(form):
    sol = choose_weights(np.full(7, 0.3), np.zeros(7), scale=0.8, bias_form=form)
    np.testing.assert_allclose(sol.alpha, np.full(7, 1 / 7), rtol=1e-12)
    assert not sol.better_off_alone


def test_infinitely_biased_peers_leave_the_target_alone():
    bias = np.array([0.0, 1e12, 1e14, 1e13])
    variance = np.array([1.0, 1e-3, 1e-3, 1e-3])
    sol = choose_weights(variance, bias, scale=1.0, bias_form="linear")
    np.testing.assert_array_equal(sol.alpha, [1.0, 0.0, 0.0, 0.0])
    assert sol.better_off_alone and sol.gain == 0.0
    # the squared form reaches Local only in the limit: its least-biased peer keeps a weight ~ 1/zeta^2
    squared = choose_weights(variance, bias, scale=1.0, bias_form="squared")
    assert squared.alpha[0] > 1 - 1e-11 and squared.alpha[1] > 0 and not squared.better_off_alone
    # an excluded peer (zeta = inf) is the same as an infinitely biased one, in both forms
    for form in FORMS:
        sol_inf = choose_weights([1.0, 1e-3], [0.0, np.inf], scale=1.0, bias_form=form)
        np.testing.assert_array_equal(sol_inf.alpha, [1.0, 0.0])


def test_linear_form_threshold_is_twice_the_targets_variance_term():
    """Linear form, target alone: a peer is zeroed iff zeta_i^2 >= 2 L eta s_0 (the certificate's rule)."""
    scale, s0 = 0.5, 2.0
    just_below = choose_weights([s0, 1.0], [0.0, 2 * scale * s0 * 0.999], scale=scale, bias_form="linear")
    at = choose_weights([s0, 1.0], [0.0, 2 * scale * s0], scale=scale, bias_form="linear")
    assert just_below.alpha[1] > 0 and not just_below.better_off_alone
    assert at.alpha[1] == 0.0 and at.better_off_alone


def test_target_anywhere_and_threshold_separates_peers():
    sol = choose_weights(
        [1.0, 1.0, 1.0, 1.0], [0.01, 0.0, 9.0, 0.02], scale=1.0, target=1, bias_form="linear"
    )
    assert sol.alpha[2] == 0.0 and sol.alpha[1] > sol.alpha[0] > sol.alpha[3] > 0
    assert 0.02 < sol.threshold <= 9.0


def test_batched_exact_solve_equals_row_by_row():
    rng = np.random.default_rng(0)
    variance = rng.uniform(0.1, 3, (50, 9))
    bias = rng.uniform(0, 2, (50, 9)) ** 2
    bias[:, 0] = 0
    for form in FORMS:
        batched, thresholds = solve_exact(variance, bias, 0.7, form)
        for row in range(50):
            single = choose_weights(variance[row], bias[row], scale=0.7, bias_form=form)
            np.testing.assert_allclose(batched[row], single.alpha, atol=1e-14)
            assert thresholds[row] == pytest.approx(single.threshold)


def test_bias_term_is_the_idea_that_zeroes_harmful_peers():
    """Idea off: without the bias term the solve weights by variance only and a harmful peer gets weight."""
    variance = np.array([1.0, 0.5, 0.5])
    bias = np.array([0.0, 0.0, 100.0])
    on = choose_weights(variance, bias, scale=1.0)
    off = choose_weights(variance, np.zeros(3), scale=1.0)
    assert on.alpha[2] == 0.0
    assert off.alpha[2] > 0.3


# ------------------------------------------------------------------------------------------ estimators


def test_within_client_variance_matches_naive_loop():
    g = torch.randn(3, 5, 4, 7, dtype=torch.float64)
    mean, var = within_client_variance(g)
    for idx in itertools.product(range(3), range(5)):
        groups = g[idx]
        naive = sum(float(((row - groups.mean(0)) ** 2).sum()) for row in groups) / (4 * 3)
        assert var[idx].item() == pytest.approx(naive)
        torch.testing.assert_close(mean[idx], groups.mean(0))


def test_estimators_are_unbiased_on_the_synthetic_task():
    zeta = [0.0, 0.0, 0.5, 1.5]
    fed = linear_federation(zeta, [1.0, 0.5, 1.0, 2.0], [8, 16, 8, 8], dim=6, seed=0)
    x = torch.full((6,), 0.3, dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    draws, variances = [], []
    for _ in range(3000):
        g, s = within_client_variance(fed.group_gradients(x, 4, generator))
        raw = BiasEstimator(4, 0, 0.9)
        raw.update(((g - g[0]) ** 2).sum(-1).numpy(), s.numpy())
        draws.append(raw.raw())  # one round's debiased estimate, before the floor
        variances.append(s.numpy())
    draws, variances = np.array(draws), np.array(variances)
    true_var = fed.true_variance(x).numpy()
    se_var = variances.std(0) / np.sqrt(len(variances))
    assert (np.abs(variances.mean(0) - true_var) < 4 * se_var).all()
    true_bias = fed.true_bias_sq().numpy()
    se_bias = draws[:, 1:].std(0) / np.sqrt(len(draws))
    assert (np.abs(draws[:, 1:].mean(0) - true_bias[1:]) < 4 * se_bias).all()


def test_debiasing_is_the_idea_that_makes_identical_peers_look_identical():
    """Idea off: without subtracting the variance terms, a noiseless copy of the target looks biased."""
    est = BiasEstimator(3, 0, 0.5)
    est.update([0.0, 2.0, 6.0], [1.0, 1.0, 1.0])  # E||g_i - g_0||^2 = zeta^2 + s_i + s_0
    np.testing.assert_allclose(est.estimate(), [0.0, 0.0, 4.0])
    np.testing.assert_allclose(est.distance / est.weight, [0.0, 2.0, 6.0])  # the raw EMA, biased by 2


def test_bias_estimator_ema_drops_and_round_trips():
    est = BiasEstimator(3, 1, 0.8)
    assert np.isinf(est.estimate()[0]) and est.estimate()[1] == 0.0
    est.update([1.0, 0.0, 5.0], [0.1, 0.1, 0.1])
    est.update([3.0, 0.0, np.nan], [0.1, 0.1, 0.1])  # a NaN reply leaves client 2's state alone
    assert est.weight[2] == pytest.approx(0.2)
    expected0 = ((0.8 * 0.2 * 1.0 + 0.2 * 3.0) - (0.8 * 0.2 * 0.2 + 0.2 * 0.2)) / (0.8 * 0.2 + 0.2)
    assert est.estimate()[0] == pytest.approx(expected0)
    again = BiasEstimator.from_state_dict(est.state_dict())
    np.testing.assert_array_equal(again.estimate(), est.estimate())


# ------------------------------------------------------------------------------------------ bad input


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="target"):
        choose_weights([1.0, 1.0], [0.0, 1.0], scale=1.0, target=5)
    with pytest.raises(ValueError, match="zero peers"):
        choose_weights([1.0], [0.0], scale=1.0)
    with pytest.raises(ValueError, match="variance"):
        choose_weights([1.0, -1.0], [0.0, 1.0], scale=1.0)
    with pytest.raises(ValueError, match="bias_sq"):
        choose_weights([1.0, 1.0], [0.0, np.nan], scale=1.0)
    with pytest.raises(ValueError, match="scale"):
        choose_weights([1.0, 1.0], [0.0, 1.0], scale=0.0)
    with pytest.raises(ValueError, match="bias_form"):
        choose_weights([1.0, 1.0], [0.0, 1.0], scale=1.0, bias_form="cubic")
    with pytest.raises(ValueError, match="lr"):
        SPCACWConfig(lr=-0.1)
    with pytest.raises(ValueError, match="smoothness"):
        SPCACWConfig(smoothness=0.0)
    with pytest.raises(ValueError, match="local_steps"):
        SPCACWConfig(local_steps=3)
    with pytest.raises(ValueError, match="target"):
        BiasEstimator(3, 3)
