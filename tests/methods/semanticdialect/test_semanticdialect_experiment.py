"""SemanticDialect experiment: systems use the config, a tiny run on the committed tiny-vdit is finite."""

import json
import math
from dataclasses import replace

import pytest

from neurips26.bench.experiment import SilentProgress
from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.experiment import (
    EXPERIMENT,
    SYSTEMS,
    SemanticDialectExperimentConfig,
)
from neurips26.methods.semanticdialect.integration import FormatConfig
from neurips26.methods.semanticdialect.tiny_vdit import CHECKPOINT_DIR


def test_every_claim_has_a_control_and_known_systems():
    for claim in EXPERIMENT.claims:
        assert claim.controls, claim.text
        for name in (claim.ours, *claim.versus, *claim.controls):
            assert name in SYSTEMS
            assert name in EXPERIMENT.profiles["default"].systems


def test_systems_are_built_from_the_config():
    config = SemanticDialectExperimentConfig(method=SemanticDialectConfig(seda_k=2, n_dialects=32))
    assert SYSTEMS["semanticdialect"](config).seda_k == 2
    assert SYSTEMS["sd_seda"](config).n_dialects == 32 and SYSTEMS["sd_seda"](config).decomposition_ratio == 0
    assert SYSTEMS["sd_lut64"](config).n_dialects == 64
    assert SYSTEMS["sd_decomp_random"](config).salient_selection == "random"
    assert SYSTEMS["sd_seda_kmeans"](config).seda_clustering == "kmeans"
    assert isinstance(SYSTEMS["mxfp4"](config), FormatConfig)


def test_experiment_config_rejects_bad_values():
    with pytest.raises(ValueError, match="n_videos"):
        SemanticDialectExperimentConfig(n_videos=0)
    with pytest.raises(ValueError, match="high_noise_sigma"):
        SemanticDialectExperimentConfig(high_noise_sigma=2.0)


@pytest.mark.skipif(not (CHECKPOINT_DIR / "classifier.pt").exists(), reason="tiny-vdit checkpoint missing")
def test_tiny_run_gives_finite_metrics_and_a_temporal_report():
    config = replace(SemanticDialectExperimentConfig(), n_videos=1, sampling_steps=2)
    profile = EXPERIMENT.profiles["smoke"]
    ours = EXPERIMENT.run_cell(SYSTEMS["semanticdialect"](config), config, profile, 0, SilentProgress())
    details = ours.pop("details")
    assert all(math.isfinite(v) for v in ours.values())
    assert ours["psnr"] > 10 and 4.2 < ours["weight_bits"] < 4.5
    report = details["temporal_report"]
    assert any("attn1.to_q" in name for name in report)
    json.dumps(details)
    fp = EXPERIMENT.run_cell(SYSTEMS["fp"](config), config, profile, 0, SilentProgress())
    assert "psnr" not in fp and fp["act_kurtosis_max"] > 0
