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


# a one-dialect book with nothing between 0 and 4: every magnitude below 2 (in block units) rounds to 0
_COARSE_BOOK = ((0.0, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.5),)


@pytest.mark.skipif(not (CHECKPOINT_DIR / "classifier.pt").exists(), reason="tiny-vdit checkpoint missing")
def test_layer_output_error_is_zero_for_fp_and_separates_a_coarse_format():
    """The claims' metric (issue #48): quantization switched off gives exactly zero error on the FP model's
    activations; a coarse book (about 2 useful bits) gives an error far above NVFP4's."""
    config = replace(SemanticDialectExperimentConfig(), n_videos=1, sampling_steps=2, probe_steps=1)
    profile = EXPERIMENT.profiles["smoke"]
    off = FormatConfig("nvfp4", quantize_weights=False, quantize_activations=False, quantize_attention=False)
    coarse = SemanticDialectConfig(dialects=_COARSE_BOOK, seda=False, decomposition_ratio=0.0)
    errors = {
        name: EXPERIMENT.run_cell(system, config, profile, 0, SilentProgress())
        for name, system in {"off": off, "nvfp4": SYSTEMS["nvfp4"](config), "coarse": coarse}.items()
    }
    assert errors["off"]["linear_output_error"] == 0.0 and errors["off"]["sample_error"] == 0.0
    assert 0.0 < errors["nvfp4"]["linear_output_error"] < 0.05
    assert errors["coarse"]["linear_output_error"] > 3 * errors["nvfp4"]["linear_output_error"]
    assert errors["nvfp4"]["attention_output_error"] > 0.0


def test_probes_cannot_exceed_the_steps_or_videos():
    with pytest.raises(ValueError, match="probe_steps"):
        SemanticDialectExperimentConfig(sampling_steps=2, probe_steps=3)
    with pytest.raises(ValueError, match="probe_videos"):
        SemanticDialectExperimentConfig(n_videos=1, probe_videos=2)
