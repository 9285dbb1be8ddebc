"""POES's central ideas switched off one at a time, the tier-1 simulator and every baseline."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from neurips26.bench.experiment import SilentProgress
from neurips26.methods.poes import POESConfig, POESScheduler
from neurips26.methods.poes.baselines import (
    FixedSubset,
    FullEvaluation,
    MaxInfoLeader,
    POESRoundScheduler,
    RandomMinibatch,
    SuccessiveHalving,
)
from neurips26.methods.poes.experiment import EXPERIMENT, POESExperimentConfig
from neurips26.methods.poes.simulator import SimulationSettings, make_item_pool, simulate


def anchored_responses(
    difficulty: np.ndarray, abilities: np.ndarray, seed: int = 0
) -> dict[int, dict[int, float]]:
    """Dense responses of prompts with the given abilities on items with the given difficulties."""
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(difficulty[None, :] - abilities[:, None]))
    y = (rng.random(p.shape) < p).astype(float)
    return {j: {i: float(y[j, i]) for i in range(len(difficulty))} for j in range(len(abilities))}


# ---- idea 1: discrimination among the leaders ---------------------------------------------------
def mean_distance_to_leaders(config: POESConfig) -> float:
    difficulty = np.linspace(-3, 3, 60)
    abilities = np.array([-1.0, -0.5, 0.0, 2.0, 2.2, 2.4])  # leaders sit high
    responses = anchored_responses(difficulty, abilities)
    embeddings = np.random.default_rng(1).normal(size=(60, 3))
    scheduler = POESScheduler(8, list(range(60)), embeddings, config)
    chosen = scheduler.select(responses)
    return float(np.abs(difficulty[chosen] - 2.2).mean())


def test_idea_discrimination_targets_items_at_the_leaders_ability() -> None:
    on = mean_distance_to_leaders(POESConfig(use_controller=False))
    off = mean_distance_to_leaders(POESConfig(use_controller=False, use_discrimination=False))
    assert on < 0.6 * off
    assert on < 1.0


# ---- idea 2: coverage -----------------------------------------------------------------------------
def clusters_covered(config: POESConfig) -> int:
    rng = np.random.default_rng(2)
    cluster = np.repeat(np.arange(4), 15)
    embeddings = 5.0 * np.eye(4)[cluster] + 0.1 * rng.normal(size=(60, 4))
    difficulty = np.where(cluster == 0, 2.0, -2.0) + 0.1 * rng.normal(
        size=60
    )  # cluster 0 matches the leaders
    responses = anchored_responses(difficulty, np.array([1.8, 2.0, 2.2]))
    chosen = POESScheduler(4, list(range(60)), embeddings, config).select(responses)
    return len(set(cluster[chosen]))


def test_idea_coverage_spreads_the_subset_over_topics() -> None:
    assert clusters_covered(POESConfig(use_controller=False)) == 4
    assert clusters_covered(POESConfig(use_controller=False, use_coverage=False)) == 1


# ---- idea 3: bounded warm-start swaps ---------------------------------------------------------------
def largest_change(config: POESConfig) -> int:
    rng = np.random.default_rng(3)
    items = list(range(80))
    difficulty = rng.normal(size=80)
    scheduler = POESScheduler(10, items, rng.normal(size=(80, 3)), config)
    previous = set(scheduler.select({}))
    worst = 0
    for r in range(6):  # leaders climb, so the informative items move
        responses = anchored_responses(difficulty, np.linspace(-2, -2 + r, 4), seed=r)
        current = set(scheduler.select(responses))
        worst = max(worst, len(previous - current))
        previous = current
    return worst


def test_idea_bounded_swaps_limit_drift_between_rounds() -> None:
    config = POESConfig(max_swaps=2)
    assert largest_change(config) <= 2
    assert largest_change(replace(config, bound_swaps=False)) > 2


# ---- idea 4: the controller ---------------------------------------------------------------------------
def weights(config: POESConfig) -> list[float]:
    difficulty = np.linspace(-2, 2, 40)
    scheduler = POESScheduler(5, list(range(40)), np.random.default_rng(4).normal(size=(40, 2)), config)
    out = []
    for gap in (0.0, 1.0, 3.0):
        scheduler.select(anchored_responses(difficulty, np.array([0.0, gap])))
        out.append(scheduler.last_round.weight)
    return out


def test_idea_controller_moves_weight_to_discrimination_as_the_margin_grows() -> None:
    on = weights(POESConfig())
    assert on[2] > on[0] + 0.2
    off = weights(POESConfig(use_controller=False))
    assert off == [0.5, 0.5, 0.5]


# ---- simulator --------------------------------------------------------------------------------------
SMALL = SimulationSettings(k=5, n_items=40, rounds=3, children_per_round=2, n_initial=2, n_parents=1)


def test_item_pool_is_misspecified_for_1pl() -> None:
    pool = make_item_pool(np.random.default_rng(0), 200, 3, 6, 8, 0.25, 0.5)
    assert (pool.guessing > 0).mean() > 0.3  # guessing floors exist
    assert (
        np.ptp(pool.loadings / pool.loadings.sum(1, keepdims=True), axis=0).max() > 0.3
    )  # items load unequally
    p = pool.probability(np.zeros((2, 3)))
    assert np.all(p >= pool.guessing) and np.all(p <= 1)


@pytest.mark.parametrize(
    "factory",
    [
        lambda pool: POESRoundScheduler(pool, 5, POESConfig()),
        lambda pool: RandomMinibatch(),
        lambda pool: FixedSubset(pool, "random"),
        lambda pool: FixedSubset(pool, "facility_location"),
        lambda pool: MaxInfoLeader(POESConfig()),
        lambda pool: SuccessiveHalving(),
    ],
)
def test_equal_budget_schedulers_stay_within_budget(factory) -> None:
    result = simulate(factory, SMALL, seed=0)
    rounds = SMALL.rounds + 1
    assert 0 < result.calls <= rounds * SMALL.children_per_round * SMALL.k
    assert 0.0 <= result.best_proposed_accuracy - result.final_accuracy <= 1.0


def test_full_evaluation_scores_every_prompt_on_every_item() -> None:
    result = simulate(lambda pool: FullEvaluation(), SMALL, seed=0)
    n_prompts = SMALL.n_initial + SMALL.rounds * SMALL.children_per_round
    assert result.calls == n_prompts * SMALL.n_items


def test_simulation_is_deterministic_and_shares_the_world_across_schedulers() -> None:
    a = simulate(lambda pool: RandomMinibatch(), SMALL, seed=3)
    b = simulate(lambda pool: RandomMinibatch(), SMALL, seed=3)
    c = simulate(lambda pool: FixedSubset(pool, "random"), SMALL, seed=3)
    assert a.final_accuracy == b.final_accuracy
    np.testing.assert_array_equal(a.true_accuracy[: SMALL.n_initial], c.true_accuracy[: SMALL.n_initial])


def test_experiment_runs_every_system_with_finite_metrics() -> None:
    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(profile, {"tier": 1, "k": 10}, {})
    assert isinstance(config, POESExperimentConfig)
    for name in EXPERIMENT.systems:
        metrics = dict(
            EXPERIMENT.run_cell(EXPERIMENT.build_system(name, config), config, profile, 0, SilentProgress())
        )
        tasks = metrics.pop("details")["task_final_accuracy"]
        assert all(np.isfinite(v) for v in metrics.values()), name
        assert 0.0 <= metrics["final_accuracy"] <= 1.0
        assert np.mean(tasks) == pytest.approx(metrics["final_accuracy"], abs=1e-5)


def test_experiment_tier2_runs_on_the_wordnet_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tier 2 through the experiment, with a bag-of-words stand-in for MiniLM (no model in unit tests)."""
    from neurips26.methods.poes import tier2
    from neurips26.methods.poes.wordnet_glosses import WORDNET_DIR

    if not (WORDNET_DIR / "data.noun").is_file():
        pytest.skip("wordnet-base not installed")
    from tests.methods.poes.test_poes_tier2 import bag_of_words_encoder

    monkeypatch.setattr(tier2, "minilm_embeddings", lambda: tier2.EmbeddingCache(bag_of_words_encoder))
    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(profile, {"tier": 2, "k": 10}, {})
    budgets = {}
    for name in ("poes", "random_minibatch", "random_minibatch_2k", "full_evaluation"):
        metrics = EXPERIMENT.run_cell(
            EXPERIMENT.build_system(name, config), config, profile, 0, SilentProgress()
        )
        assert 0.0 <= metrics["final_accuracy"] <= metrics["best_proposed_accuracy"] <= 1.0
        budgets[name] = metrics["calls"]
    pool = config.tier2.per_class_pool * len(tier2.CLASSES)
    assert (
        budgets["poes"] <= budgets["random_minibatch_2k"] <= 2 * budgets["poes"] < budgets["full_evaluation"]
    )
    assert budgets["full_evaluation"] == pool * (
        config.n_initial + config.tier2.rounds * config.children_per_round
    )


def test_experiment_systems_really_use_the_config() -> None:
    config = POESExperimentConfig(method=POESConfig(max_swaps=5))
    assert EXPERIMENT.build_system("poes", config).poes.max_swaps == 5
    assert EXPERIMENT.build_system("poes_coverage_only", config).poes.use_discrimination is False
    assert EXPERIMENT.build_system("poes_no_swap_bound", config).poes.bound_swaps is False


def test_experiment_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="k must"):
        POESExperimentConfig(k=500, n_items=300)
    with pytest.raises(ValueError, match="rounds"):
        POESExperimentConfig(rounds=0)
    with pytest.raises(ValueError, match="tier must be 1"):
        POESExperimentConfig(tier=4)
