"""tiny-patchtst: transformers' PatchTST pretrained like tiny-tsfm, STAR's second backbone."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from neurips26.bench.experiment import SilentProgress
from neurips26.methods.star.experiment import EXPERIMENT
from neurips26.methods.star.patchtst_backbone import PatchTSTBackbone
from neurips26.methods.star.tiny_patchtst import (
    CHECKPOINT_DIR,
    PatchTSTPretrainConfig,
    load_tiny_patchtst,
    pretrain_tiny_patchtst,
)
from neurips26.methods.star.tsfm import TSBackbone, evaluate_masked_reconstruction, generic_corpus

torch.set_num_threads(1)


def test_patchtst_pretraining_smoke_learns_beyond_the_mean() -> None:
    config = PatchTSTPretrainConfig(n_series=300, series_length=256, steps=150, batch_size=32, eval_series=50)
    _, log = pretrain_tiny_patchtst(config)
    ev = log["evaluation"]
    assert ev["masked_mse"] < 0.92 * ev["mean_predictor_mse"]
    untrained = PatchTSTBackbone.small(context_length=config.window, seed=config.seed)
    corpus = generic_corpus(config.eval_series, config.series_length, config.seed + 10_000)
    held_out = torch.from_numpy(corpus)
    before = evaluate_masked_reconstruction(untrained, held_out[:, : config.window], config.mask_ratio, 0)
    assert ev["masked_mse"] < 0.8 * before["masked_mse"]  # pretraining, not the architecture, does it


def test_committed_patchtst_checkpoint_loads_frozen_and_matches_its_card() -> None:
    model = load_tiny_patchtst()
    assert isinstance(model, TSBackbone)
    assert not any(p.requires_grad for p in model.parameters())
    log = json.loads((CHECKPOINT_DIR / "training_log.json").read_text())
    assert log["n_parameters"] == sum(p.numel() for p in model.parameters())
    ev = log["evaluation"]
    assert ev["masked_mse"] < ev["interpolation_mse"] < ev["mean_predictor_mse"]
    assert f"{ev['masked_mse']:.3f}" in (CHECKPOINT_DIR / "MODEL_CARD.md").read_text()
    with pytest.raises(FileNotFoundError, match=r"python -m neurips26\.methods\.star\.tiny_patchtst train"):
        load_tiny_patchtst(CHECKPOINT_DIR / "missing")


def test_experiment_runs_star_on_patchtst() -> None:
    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(profile, {}, {"backbone": "tiny-patchtst", "n_steps": 3})
    metrics = EXPERIMENT.run(EXPERIMENT.build_system("star", config), config, profile, 0, SilentProgress())
    assert np.isfinite(metrics["vus_pr"]) and metrics["trainable_params"] > 0
