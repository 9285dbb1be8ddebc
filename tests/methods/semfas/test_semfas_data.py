"""The frozen sensor generator (hash, ground-truth cues) and the on-disk dataset loaders."""

from __future__ import annotations

import numpy as np
import pytest

from neurips26.methods.semfas.fas_sensors import (
    DOMAINS,
    GENERATOR_VERSION,
    MODALITIES,
    generator_hash,
    lfw_albedo,
    render_domain,
)

# Frozen before any method was tuned (concat-ERM at 17-27% HTER on held-out domains). A change to the
# generator or its domain parameters changes this hash: bump GENERATOR_VERSION and say so in the README.
FROZEN = {"1.0": "841484de6e048381"}


def test_generator_is_frozen() -> None:
    assert generator_hash() == FROZEN[GENERATOR_VERSION]


def test_albedo_is_real_lfw_faces() -> None:
    faces = lfw_albedo()
    assert faces.shape == (100, 32, 32) and faces.min() >= 0 and faces.max() <= 1
    assert faces.std(axis=(1, 2)).min() > 0.05  # textured crops, not constants


@pytest.mark.parametrize("domain", DOMAINS)
def test_cue_labels_match_the_rendered_evidence(domain: str) -> None:
    """Render each sample with and without its artefact: the recorded cue modality is the one that moved."""
    attacked, clean = render_domain(domain, 300, seed=3), render_domain(domain, 300, seed=3, clean=True)
    assert (attacked.label == clean.label).all() and (attacked.cue == clean.cue).all()
    assert ((attacked.cue >= 0) == (attacked.label == 1)).all()
    change = np.stack(
        [np.abs(attacked.modality(m) - clean.modality(m)).mean((1, 2, 3)) for m in MODALITIES], 1
    )
    live = (attacked.label == 0) & (attacked.corrupted < 0)
    ratio = change / change[live].mean(0)  # change relative to sensor noise alone
    full_face = (attacked.label == 1) & (attacked.corrupted < 0) & (attacked.attack != 4)
    partial = (attacked.attack == 4) & (attacked.corrupted < 0)
    assert np.mean(ratio[full_face].argmax(1) == attacked.cue[full_face]) >= 0.9
    if partial.sum() >= 10:  # eye-band attacks are weak by design: above chance, not perfect
        assert np.mean(ratio[partial].argmax(1) == attacked.cue[partial]) > 1 / 3


def test_domains_differ_and_bad_arguments_are_refused() -> None:
    c, s = render_domain("C", 50, seed=0), render_domain("S", 50, seed=0)
    assert set(c.identity).isdisjoint(set(s.identity))
    assert abs(c.ir.mean() - s.ir.mean()) > 0.01
    with pytest.raises(ValueError, match="domain"):
        render_domain("X", 10, seed=0)
    with pytest.raises(ValueError, match="n must"):
        render_domain("C", 1, seed=0)
    with pytest.raises(ValueError, match="seed"):
        render_domain("C", 10, seed=-1)
