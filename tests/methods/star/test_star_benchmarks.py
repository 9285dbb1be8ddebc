"""STAR's benchmarks B and C (aeon's bundled series, read without aeon), the one-model-per-state-combination
baseline and point-adjusted F1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from neurips26.bench.experiment import NotApplicable, SilentProgress
from neurips26.data.fetch import DataNotFetched
from neurips26.methods.star import STARConfig, STARDetector
from neurips26.methods.star.aeon_bundled import aeon_data_dir, read_timeeval_csv, read_ts
from neurips26.methods.star.baselines import PerStateDetector
from neurips26.methods.star.experiment import (
    ABLATIONS,
    EXPERIMENT,
    NEEDS_STATES,
    PYOD_DETECTORS,
    STARExperimentConfig,
)
from neurips26.methods.star.metrics import point_adjusted_f1, range_pr_vus
from neurips26.methods.star.plant_sim import PlantSimConfig, simulate_plant
from neurips26.methods.star.state_benchmarks import (
    NO_STATES,
    REAL_ANOMALIES,
    SEMI_REAL,
    STATELESS,
    inject_numeric,
    make_benchmark,
)
from neurips26.methods.star.tsfm import load_tiny_tsfm

torch.set_num_threads(1)


def _aeon_data_or_skip() -> None:
    try:
        aeon_data_dir()  # never downloads: tests stay offline
    except DataNotFetched:
        pytest.skip("aeon's bundled data is not cached: run `neurips26 data fetch aeon`")


# ----------------------------------------------------------------------------------- readers


def test_read_ts_handles_unequal_lengths_and_labels(tmp_path) -> None:
    path = tmp_path / "toy.ts"
    path.write_text(
        "# comment\n@problemName toy\n@univariate false\n@dimensions 2\n@classLabel true a b\n@data\n"
        "1,2,3:4,5,6:a\n7,8:9,10:b\n"
    )
    instances, labels, classes = read_ts(path)
    assert classes == ("a", "b") and list(labels) == ["a", "b"]
    assert instances[0].shape == (2, 3) and instances[1].shape == (2, 2)
    assert np.array_equal(instances[1], [[7, 8], [9, 10]])
    path.write_text("@classLabel true a\n@data\n1,2:3:a\n")
    with pytest.raises(ValueError, match="differ in length"):
        read_ts(path)


def test_read_timeeval_csv(tmp_path) -> None:
    path = tmp_path / "toy.csv"
    path.write_text("timestamp,x,y,is_anomaly\n0,1.5,2,0\n1,3,4,1\n")
    values, labels = read_timeeval_csv(path)
    assert np.array_equal(values, [[1.5, 2], [3, 4]]) and list(labels) == [0, 1]


# ----------------------------------------------------------------------------------- injectors


def test_numeric_injection_labels_every_change_and_keeps_gaps() -> None:
    rng = np.random.default_rng(0)
    series = rng.normal(size=(3000, 3))
    original = series.copy()
    labels = np.zeros(3000, dtype=np.int64)
    inject_numeric(series, labels, 3, 8, np.ones(3), rng)
    changed = (series != original).any(1)
    assert changed.any() and not (changed & (labels == 0)).any()  # every changed step is labelled
    edges = np.diff(np.r_[0, labels > 0, 0].astype(int))
    assert (edges == 1).sum() == 8  # eight separate segments


@pytest.mark.parametrize("name", ["basic_motions", "japanese_vowels"])
def test_semi_real_benchmark_has_both_families_and_wrong_declared_states(name: str) -> None:
    _aeon_data_or_skip()
    data = make_benchmark(name, seed=3, anomalies_per_family=5)
    (state,) = data.state_columns
    vocabulary = data.state_columns[state]
    assert set(np.unique(data.train[:, state])) <= set(vocabulary)
    for family in (1, 2):
        starts = np.flatnonzero(np.diff(np.r_[0, (data.labels == family).astype(int)]) == 1)
        assert len(starts) == 5
    # a wrong-declared-state segment declares a state other than its neighbours' (the instance's own)
    wrong = data.labels == 2
    for start in np.flatnonzero(np.diff(np.r_[0, wrong.astype(int)]) == 1):
        end = start + np.argmin(wrong[start:]) if not wrong[start:].all() else len(wrong)
        inside = data.test[start, state]
        neighbours = np.r_[data.test[max(0, start - 1), state], data.test[min(len(wrong) - 1, end), state]]
        assert (neighbours != inside).any()
    assert not np.array_equal(make_benchmark(name, seed=4).test, data.test)  # a new order per seed


def test_no_state_benchmarks() -> None:
    _aeon_data_or_skip()
    kdd = make_benchmark("kdd135", seed=0)
    assert kdd.state_columns == {} and kdd.train.shape == (1200, 1) and kdd.labels.sum() == 12
    daphnet = make_benchmark("daphnet", seed=0, anomalies_per_family=4)
    assert daphnet.train.shape == (3520, 9) and (daphnet.labels == 1).any() and not (daphnet.labels > 1).any()


@pytest.mark.parametrize("benchmark", STATELESS)
def test_systems_needing_states_are_not_applicable_without_states(benchmark: str) -> None:
    config = STARExperimentConfig(benchmark=benchmark)
    profile = EXPERIMENT.profile("default")
    for name in (*NEEDS_STATES, *ABLATIONS):
        with pytest.raises(NotApplicable, match="state channels"):
            EXPERIMENT.run(EXPERIMENT.build_system(name, config), config, profile, 0, SilentProgress())
    with pytest.raises(ValueError, match="benchmark must be one of"):
        STARExperimentConfig(benchmark="swat")


def test_ablations_are_not_applicable_without_states_because_they_equal_star_there() -> None:
    """Without state columns each ablation switches off a module that does nothing: bit-equal scores."""
    config = STARExperimentConfig(benchmark="daphnet")
    profile = EXPERIMENT.profile("semireal")
    for name in ABLATIONS:
        with pytest.raises(NotApplicable, match="equals star without state channels"):
            EXPERIMENT.run(EXPERIMENT.build_system(name, config), config, profile, 0, SilentProgress())
    rng = np.random.default_rng(0)
    t = np.arange(600)[:, None]
    series = np.sin(t / np.array([7.0, 11.0])) + 0.05 * rng.normal(size=(600, 2))

    def scores(star: STARConfig) -> np.ndarray:
        detector = STARDetector({}, load_tiny_tsfm(), config=star, n_steps=5, random_state=0)
        return detector.fit(series[:400]).decision_function(series[400:])

    reference = scores(STARConfig())
    for name in ABLATIONS:
        ablated = EXPERIMENT.build_system(name, config).star
        assert ablated != STARConfig()
        np.testing.assert_array_equal(scores(ablated), reference)
    # with a state column the same switch does change the scores (the equality above is not vacuous)
    codes = (np.sin(t / 13.0) > 0).astype(float)
    with_state = np.concatenate([series, codes], 1)
    schema = {2: (0.0, 1.0)}
    full = STARDetector(schema, load_tiny_tsfm(), n_steps=5, random_state=0).fit(with_state[:400])
    off = STARDetector(
        schema, load_tiny_tsfm(), config=STARConfig(use_matching=False), n_steps=5, random_state=0
    ).fit(with_state[:400])
    assert not np.array_equal(
        full.decision_function(with_state[400:]), off.decision_function(with_state[400:])
    )


def test_benchmark_claims_cover_their_benchmarks() -> None:
    wheres = [dict(claim.where) for claim in EXPERIMENT.claims]
    assert wheres[0] == {"benchmark": ("mini_swat",)}
    assert {"benchmark": ("basic_motions", "japanese_vowels")} in wheres
    assert {"benchmark": ("daphnet", "kdd135")} in wheres
    for claim in EXPERIMENT.claims:  # each claim is judged in a profile that runs its benchmarks
        for name in claim.profiles:
            ran = EXPERIMENT.profile(name).grid.get("benchmark", ("mini_swat",))  # smoke: the default
            assert set(claim.where["benchmark"]) <= set(ran)
    semireal = EXPERIMENT.profile("semireal")
    assert semireal.seeds >= 5 and set(semireal.grid["benchmark"]) == {*SEMI_REAL, *NO_STATES}
    real = EXPERIMENT.profile("real")  # the sanity profile: real labelled anomalies, no states
    assert real.seeds >= 5 and set(real.grid["benchmark"]) == set(REAL_ANOMALIES) == {"kdd135", "mitdb"}
    assert real.systems is not None and not set(real.systems) & {*NEEDS_STATES, *ABLATIONS}
    judged = [claim for claim in EXPERIMENT.claims if claim.judged_in("real")]
    assert [claim.versus for claim in judged] == [("static_lora",), PYOD_DETECTORS]
    assert all(claim.kind == "noninferior" and claim.controls == ("numeric_only",) for claim in judged)
    assert not any(claim.judged_in("real") for claim in EXPERIMENT.claims if "sanity" not in claim.text)
    assert set(EXPERIMENT.profile("full").grid["benchmark"]) == {
        "mini_swat",
        "basic_motions",
        "japanese_vowels",
        "daphnet",
        "kdd135",
    }


# ----------------------------------------------------------------------------------- PA-F1


def _pa_f1_loop(y: np.ndarray, s: np.ndarray) -> float:
    """Point-adjusted F1 straight from its definition: every threshold, adjust, count."""
    segments, i = [], 0
    while i < len(y):
        if y[i]:
            j = i
            while j < len(y) and y[j]:
                j += 1
            segments.append((i, j))
            i = j
        else:
            i += 1
    best = 0.0
    for t in np.unique(s):
        alarm = s >= t
        for a, b in segments:
            if alarm[a:b].any():
                alarm[a:b] = True
        tp = (alarm & (y > 0)).sum()
        fp = (alarm & (y == 0)).sum()
        fn = (~alarm & (y > 0)).sum()
        best = max(best, 2 * tp / (2 * tp + fp + fn))
    return float(best)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(5, 60))
def test_point_adjusted_f1_matches_its_definition(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    y[rng.integers(n)] = 1
    s = rng.normal(size=n).round(1)  # ties included
    assert math.isclose(point_adjusted_f1(y, s), _pa_f1_loop(y, s), abs_tol=1e-12)


def test_point_adjusted_f1_caveat_random_scores_score_high_on_long_segments() -> None:
    rng = np.random.default_rng(0)
    y = np.zeros(5000, dtype=int)
    for start in range(200, 5000, 1000):
        y[start : start + 300] = 1  # five long anomalies
    scores = rng.random(5000)
    assert point_adjusted_f1(y, scores) > 0.5 > range_pr_vus(y, scores, 20) + 0.15


# ----------------------------------------------------------------------------------- one per state


@pytest.fixture(scope="module")
def plant():
    return simulate_plant(PlantSimConfig(n_train=2500, n_test=2000, anomalies_per_family=2), seed=0)


def test_one_per_state_fits_a_model_per_frequent_combination(plant) -> None:
    detector = PerStateDetector(
        plant.state_columns, load_tiny_tsfm(), max_models=2, n_steps=6, batch_size=4, contamination=0.05
    )
    detector.fit(plant.train)
    assert len(detector.members_) == 3 and detector.combinations_.shape == (2, len(plant.state_columns))
    scores = detector.decision_function(plant.test)
    assert scores.shape == (2000,) and np.isfinite(scores).all()
    assert detector.decision_scores_.shape == (2500,) and detector.predict(plant.test).shape == (2000,)
    # each member trained on its own windows only (different adapters)
    a, b = (dict(m.model_.named_parameters()) for m in detector.members_[:2])
    lora = next(k for k in a if "lora_B" in k)
    assert not torch.equal(a[lora], b[lora])
    # routing: steps of the first combination are scored by the first member
    ids = detector._combination_ids(plant.test)
    assert (ids == 0).any()
    member = detector.members_[0]
    center, spread = detector.member_stats_[0]
    expected = (member.decision_function(plant.test) - center) / spread
    assert np.allclose(scores[ids == 0], expected[ids == 0])
    params = clone(detector).get_params()
    assert params["max_models"] == 2 and params["n_steps"] == 6


def test_one_per_state_needs_states_and_checks_max_models(plant) -> None:
    numeric = plant.train[:, :8]
    with pytest.raises(ValueError, match="state_columns is empty"):
        PerStateDetector({}, n_steps=1).fit(numeric)
    with pytest.raises(ValueError, match="max_models"):
        PerStateDetector(plant.state_columns, max_models=0).fit(plant.train)
