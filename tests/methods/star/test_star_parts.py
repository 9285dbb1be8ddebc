"""STAR's supporting parts: VUS-PR against a loop written from the definition (and aeon where installed),
the mini-SWaT simulator, and the tiny-tsfm backbone (protocol, pretraining smoke, committed checkpoint)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.star.metrics import range_pr_auc, range_pr_vus, soft_labels
from neurips26.methods.star.plant_sim import (
    FAMILIES,
    NUMERIC_CHANNELS,
    PlantSimConfig,
    mass_balance_residual,
    simulate_plant,
)
from neurips26.methods.star.tsfm import (
    TinyTSFM,
    TinyTSFMConfig,
    TSBackbone,
    TSFMPretrainConfig,
    load_tiny_tsfm,
    pretrain_tiny_tsfm,
)

torch.set_num_threads(1)


# ---------------------------------------------------------------- VUS-PR oracle (Paparrizos et al. 2022)


def naive_range_pr_auc(y: np.ndarray, score: np.ndarray, buffer: int) -> float:
    """Loop over thresholds and ranges, written from the definition (as aeon 1.6 computes it)."""
    y = (y > 0).astype(float)
    soft = y.copy()
    runs, start = [], None
    for i, v in enumerate(np.r_[y, 0]):
        if v and start is None:
            start = i
        if not v and start is not None:
            runs.append((start, i - 1))
            start = None
    if buffer > 1:
        half = buffer // 2
        for s, e in runs:
            for x in range(e, min(e + half, len(y))):
                soft[x] += np.sqrt(1 - (x - e) / buffer)
            for x in range(max(s - half, 0), s):
                soft[x] += np.sqrt(1 - (s - x) / buffer)
        soft = np.clip(soft, 0, 1)
        runs, start = [], None
        for i, v in enumerate(np.r_[soft, 0]):
            if v > 0 and start is None:
                start = i
            if not v > 0 and start is not None:
                runs.append((start, i - 1))
                start = None
    thresholds = np.sort(score)[::-1][np.linspace(0, len(score) - 1, 250, dtype=int)]
    p = (y.sum() + soft.sum()) / 2
    recalls, precisions = [0.0], [1.0]
    for t in thresholds:
        pred = score >= t
        tp = float((soft * pred).sum())
        existence = np.mean([(soft[s : e + 1] * pred[s : e + 1]).sum() > 0 for s, e in runs])
        recalls.append(min(tp / p, 1) * existence)
        precisions.append(tp / pred.sum())
    r, q = np.array(recalls), np.array(precisions)
    return float(np.sum((r[1:] - r[:-1]) * (q[1:] + q[:-1]) / 2))


@st.composite
def labelled_scores(draw):
    n = draw(st.integers(30, 200))
    y = np.zeros(n, dtype=int)
    for _ in range(draw(st.integers(1, 4))):
        s = draw(st.integers(0, n - 1))
        y[s : s + draw(st.integers(1, 15))] = 1
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    score = rng.normal(size=n) + y * draw(st.floats(0, 3))
    if draw(st.booleans()):
        score = np.round(score, 1)  # ties
    return y, score


@settings(max_examples=30, deadline=None)
@given(case=labelled_scores(), buffer=st.integers(0, 30))
def test_range_pr_auc_matches_the_definition(case, buffer) -> None:
    y, score = case
    if np.unique(score).size == 1:
        return
    assert range_pr_auc(y, score, buffer) == pytest.approx(naive_range_pr_auc(y, score, buffer), abs=1e-12)


def test_vus_is_the_mean_over_buffers_and_perfect_scores_reach_one() -> None:
    rng = np.random.default_rng(0)
    y = np.zeros(300, dtype=int)
    y[50:60] = y[200:230] = 1
    score = rng.normal(size=300) + 2 * y
    expected = np.mean([naive_range_pr_auc(y, score, b) for b in range(11)])
    assert range_pr_vus(y, score, 10) == pytest.approx(expected, abs=1e-12)
    assert range_pr_vus(y, y.astype(float) + 1e-3 * rng.random(300), 0) > 0.99
    assert soft_labels(y, 10)[45] == pytest.approx(np.sqrt(1 - 5 / 10))


def test_vus_agrees_with_aeon_when_installed() -> None:
    aeon = pytest.importorskip("aeon.benchmarking.metrics.anomaly_detection")
    rng = np.random.default_rng(1)
    y = np.zeros(400, dtype=int)
    y[100:120] = y[390:] = 1
    score = rng.normal(size=400) + y
    assert range_pr_vus(y, score, 25) == pytest.approx(aeon.range_pr_vus_score(y, score, max_buffer_size=25))


def test_metric_bad_input() -> None:
    with pytest.raises(ValueError, match="holds no anomaly"):
        range_pr_vus(np.zeros(10), np.arange(10.0))
    with pytest.raises(ValueError, match="equal length"):
        range_pr_vus(np.ones(10), np.arange(9.0))
    with pytest.raises(ValueError, match="finite"):
        range_pr_vus(np.ones(3), np.array([0, np.nan, 1]))


# ---------------------------------------------------------------- mini-SWaT


def test_simulator_keeps_mass_balance_on_normal_data() -> None:
    config = PlantSimConfig(n_train=3000, n_test=1000, anomalies_per_family=1)
    data = simulate_plant(config, seed=3)
    residual = mass_balance_residual(data.train)
    # measurement noise only: area * (noise on two levels) + noise on two flows
    bound = config.noise * np.sqrt(2) * np.array([4.0, 3.0, 5.0]) + config.noise * np.sqrt(2)
    assert np.all(np.abs(residual.mean(0)) < 0.01)
    assert np.all(residual.std(0) < 1.15 * bound)
    clean = mass_balance_residual(data.clean_test)
    assert np.all(clean.std(0) < 1.15 * bound)


def test_simulator_labels_every_injected_anomaly() -> None:
    config = PlantSimConfig(n_train=2000, n_test=4000, anomalies_per_family=5)
    data = simulate_plant(config, seed=1)
    changed = np.any(data.test != data.clean_test, axis=1)
    assert not np.any(changed & (data.labels == 0))  # nothing altered outside a label
    starts = np.flatnonzero(np.diff(np.r_[0, data.labels]) > 0)
    families = data.labels[starts]
    assert sorted(np.bincount(families, minlength=4)[1:]) == [5, 5, 5]
    numeric, states = slice(0, len(NUMERIC_CHANNELS)), slice(len(NUMERIC_CHANNELS), None)
    diff = data.test != data.clean_test
    for family, _ in FAMILIES.items():
        rows = data.labels == family
        if family == 3:
            assert not diff[rows][:, numeric].any() and diff[rows][:, states].any()  # states only
        else:
            assert not diff[rows][:, states].any() and diff[rows][:, numeric].any()  # numerics only
    for column, vocab in data.state_columns.items():
        assert set(np.unique(data.test[:, column])) <= set(vocab)


def test_simulator_states_change_with_level_triggers_and_bad_config() -> None:
    data = simulate_plant(PlantSimConfig(n_train=3000, n_test=500, anomalies_per_family=1), seed=0)
    level1, valve1 = data.train[:, 1], data.train[:, 8]
    opens = np.flatnonzero(np.diff(valve1) > 0) + 1
    assert opens.size > 5 and np.all(level1[opens - 1] < 1.6)  # V1 opens only on a low tank 1
    with pytest.raises(ValueError, match="n_train and n_test"):
        PlantSimConfig(n_train=10)


# ---------------------------------------------------------------- tiny-tsfm


def test_tiny_tsfm_implements_the_protocol_and_size() -> None:
    model = TinyTSFM()
    assert isinstance(model, TSBackbone)
    n = sum(p.numel() for p in model.parameters())
    assert 80_000 < n < 130_000
    patches = model.patchify(torch.randn(2, 3, 64))
    assert patches.shape == (6, 8, 8)
    assert model(patches).shape == patches.shape
    assert set(model.adaptable_linears()) >= {"blocks.0.q", "blocks.1.fc2"}
    with pytest.raises(ValueError, match="multiple of patch_len"):
        model.patchify(torch.randn(1, 1, 30))
    with pytest.raises(ValueError, match="divisible by n_heads"):
        TinyTSFMConfig(d_model=30, n_heads=4)


def test_pretraining_smoke_learns_beyond_the_mean() -> None:
    """A seconds-long pretraining run already beats predicting the mean on held-out masked patches."""
    config = TSFMPretrainConfig(
        n_series=300, series_length=256, window=64, steps=200, batch_size=32, eval_series=50, lr=3e-3
    )
    small = TinyTSFMConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64)
    _, log = pretrain_tiny_tsfm(config, small)
    ev = log["evaluation"]
    assert ev["masked_mse"] < 0.92 * ev["mean_predictor_mse"]
    assert log["train_loss"][-1][1] < 0.8 * log["train_loss"][0][1]
    _, log2 = pretrain_tiny_tsfm(config, small)
    assert log2["train_loss"] == log["train_loss"]  # reproducible from the seed


def test_committed_checkpoint_loads_frozen_and_matches_its_card() -> None:
    import json

    from neurips26.methods.star.tsfm import CHECKPOINT_DIR

    model = load_tiny_tsfm()
    assert not any(p.requires_grad for p in model.parameters())
    log = json.loads((CHECKPOINT_DIR / "training_log.json").read_text())
    assert log["n_parameters"] == sum(p.numel() for p in model.parameters())
    ev = log["evaluation"]
    assert ev["masked_mse"] < ev["interpolation_mse"] < ev["mean_predictor_mse"]
    card = (CHECKPOINT_DIR / "MODEL_CARD.md").read_text()
    assert f"{ev['masked_mse']:.3f}" in card
    with pytest.raises(FileNotFoundError, match=r"python -m neurips26\.methods\.star\.tsfm train"):
        load_tiny_tsfm(CHECKPOINT_DIR / "missing")


# ---------------------------------------------------------------- a second backbone: transformers' PatchTST


def test_star_injects_into_patchtst_and_starts_from_it_exactly() -> None:
    pytest.importorskip("transformers")
    import copy

    from neurips26.methods.star import STARConfig, inject_star
    from neurips26.methods.star.patchtst_backbone import PatchTSTBackbone

    backbone = PatchTSTBackbone.small(context_length=32)
    assert isinstance(backbone, TSBackbone)
    x = torch.randn(2, 3, 32)
    patches = backbone.patchify(x)
    mask = torch.zeros(patches.shape[:2], dtype=torch.bool)
    mask[:, ::2] = True
    with torch.no_grad():
        reference = backbone(patches, mask)
    config = STARConfig(target_modules=("q_proj", "v_proj", "3"))
    model = inject_star(copy.deepcopy(backbone), config, n_numeric=3, vocab_sizes=(2, 3))
    assert len(model.adapters) == 6
    codes = torch.stack([torch.randint(0, 2, (2, 32)), torch.randint(0, 3, (2, 32))], dim=1)
    with torch.no_grad():
        recon = model._reconstruct(patches, model.context(codes), mask, (1, 3))
    torch.testing.assert_close(recon, reference, rtol=0, atol=0)  # B = 0: the backbone exactly
    loss = model.training_loss(x, codes, 0.3, torch.Generator().manual_seed(0))
    loss.backward()
    assert all(p.grad is None for p in model.backbone.parameters() if not p.requires_grad)
    assert any(a.lora_A.grad is not None for a in model.adapters.values())
