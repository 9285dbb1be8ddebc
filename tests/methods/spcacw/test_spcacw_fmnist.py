"""The ``fmnist`` task of the SP-CACW experiment on the real images (skips without Debian's data)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from neurips26.bench.experiment import NotApplicable
from neurips26.methods.spcacw.experiment import EXPERIMENT, SYSTEMS, SPCACWExperimentConfig
from neurips26.methods.spcacw.fashion_mnist import DEBIAN_ROOT

needs_data = pytest.mark.skipif(
    not (Path(DEBIAN_ROOT) / "train-labels-idx1-ubyte.gz").exists(),
    reason="needs `apt-get install dataset-fashion-mnist`",
)


class _Quiet:
    def loop(self, iterable, total=None, desc=""):
        return iterable


def test_fmnist_profile_leaves_the_default_config_alone():
    """The task is the profile's grid value (no new field): the default config and its hash stay as published
    (tests/test_provenance.py checks the hash)."""
    profile = EXPERIMENT.profile("fmnist")
    assert {p["task"] for p in profile.points()} == {"fmnist"}
    assert sorted(p["dirichlet"] for p in profile.points()) == [0.1, 0.5]
    assert profile.seeds >= 5
    config = EXPERIMENT.config_for(profile, profile.points()[0], {})
    assert (config.task, config.n_clients, config.n_concepts) == ("fmnist", 30, 1)
    assert SPCACWExperimentConfig().task == "digits"
    with pytest.raises(NotApplicable, match="uniform_weights"):  # one concept: the oracle is uniform
        EXPERIMENT.run_cell(SYSTEMS["oracle_weights"](config), config, profile, 0, _Quiet())


@needs_data
def test_fmnist_cells_run_and_spcacw_reports_its_peer_weight():
    config = replace(
        SPCACWExperimentConfig(), task="fmnist", n_clients=20, n_concepts=1, dirichlet=0.5, rounds=6,
        eval_every=3, n_targets=2,
    )  # fmt: skip
    profile = EXPERIMENT.profile("fmnist")
    ours = EXPERIMENT.run_cell(SYSTEMS["spcacw"](config), config, profile, 0, _Quiet())
    local = EXPERIMENT.run_cell(SYSTEMS["local"](config), config, profile, 0, _Quiet())
    assert 0.0 <= ours["peer_weight"] <= 1.0 and 0.0 <= ours["alone_share"] <= 1.0
    assert 0.1 < local["target_accuracy"] <= 1.0  # above chance after 6 steps on the target's own labels
    if ours["peer_weight"] == 0.0:  # certified alone every round: SP-CACW's model is Local's, exactly
        assert ours["target_accuracy"] == local["target_accuracy"]
