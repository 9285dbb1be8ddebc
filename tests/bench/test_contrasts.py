"""Every claim of every registered experiment names a positive contrast (issue #48): a known-good and a
known-bad system the design must resolve on the claim's metric before it judges the claim, run in every
profile that judges it."""

from __future__ import annotations

import pytest

from neurips26.registry import METHODS

READY = [spec for spec in METHODS if spec.status == "ready"]


@pytest.mark.parametrize("spec", READY, ids=[spec.slug for spec in READY])
def test_every_claim_declares_a_positive_contrast(spec) -> None:
    claims = spec.load_experiment().claims
    without = [claim.text for claim in claims if claim.contrast is None]
    assert not without, f"{spec.slug}: claims without a positive contrast (Claim(contrast=...)): {without}"


@pytest.mark.parametrize("spec", READY, ids=[spec.slug for spec in READY])
def test_each_contrast_runs_wherever_its_claim_is_judged(spec) -> None:
    # a profile that runs the claim's own systems but not its contrast would call every claim there
    # inconclusive for a reason that is no fault of the design
    experiment = spec.load_experiment()
    gaps = []
    for name, profile in experiment.profiles.items():
        present = set(experiment.system_names(profile))
        for claim in experiment.claims:
            compared = (claim.ours, *claim.versus, *claim.controls)
            if claim.contrast and claim.judged_in(name) and set(compared) <= present:
                gaps += [f"{name}: {claim.text!r} lacks {s}" for s in claim.contrast if s not in present]
    assert not gaps, f"{spec.slug}: " + "; ".join(gaps)
