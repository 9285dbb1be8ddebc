"""The entropy-budget idea on a real pretrained LM, whose layers really differ in concentration.

The idea test in ``test_spectralkv_ideas.py`` runs on a random-init model whose layer concentrations are
all ~1e-4, so there the budgets follow noise. Here the press runs on Qwen2.5-Coder-0.5B (24 layers, GQA
14/2) over a short stdlib text: its layers' concentrations spread over a factor of ~2 (0.23-0.54 on 384
tokens), so budgets that follow them are visibly non-uniform, and switching the idea off (the
concentration replaced by a constant, as ``IDEAS`` says) makes the check fail. Skips, naming the commands,
where the converted weights are absent (CI).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("kvpress")

from neurips26.methods.spectralkv import SpectralKVPress, integration
from neurips26.zoo import real_lm

MODEL = "qwen2.5-coder-0.5b"
TOKENS = 160  # short: one prefill of the 0.5B model costs a few seconds on one core


@pytest.fixture(scope="module")
def real_model():
    if not (real_lm.real_model_dir(MODEL) / real_lm.MANIFEST).is_file():
        pytest.skip(
            f"needs the converted {MODEL} in the user cache: {real_lm.INSTALL_COMMAND} && "
            f"{real_lm.fetch_command(MODEL)}"
        )
    model, tokenizer = real_lm.load_real(MODEL, verify=False)  # sizes only: the zoo tests re-hash
    return model, tokenizer


@pytest.fixture(scope="module")
def ids(real_model):
    from pydoc_data.topics import topics  # Python's own reference text, in every install

    _, tokenizer = real_model
    ids = tokenizer(topics["assignment"], return_tensors="pt").input_ids[:, :TOKENS]
    assert ids.shape[1] == TOKENS
    return ids


def entropy_prefill(model, ids) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer concentrations and kept budgets of one entropy-mode prefill at 50% keep."""
    from transformers import DynamicCache

    press = SpectralKVPress(0.5, n_sink=4, window_size=32)
    with torch.no_grad(), press(model):
        model.model(ids, past_key_values=DynamicCache())  # the decoder only: no logits are needed
    press.ledger.check()
    layers = model.config.num_hidden_layers
    return np.array([press.concentrations[i] for i in range(layers)]), np.array(press.ledger.per_layer())


def check_budgets_follow_concentration(concentration: np.ndarray, budgets: np.ndarray) -> None:
    """Budgets differ between layers, rise with concentration, and are proportional to it within
    rounding (no layer of this model and text reaches the floor or the cap)."""
    assert budgets.max() - budgets.min() >= 0.25 * budgets.mean(), f"budgets nearly uniform: {budgets}"
    order = np.argsort(concentration, kind="stable")
    assert np.all(np.diff(budgets[order]) >= 0), "budgets do not rise with concentration"
    expected = concentration / concentration.sum() * budgets.sum()
    assert np.all(np.abs(budgets - expected) <= 1.0), "budgets are not proportional to concentration"


@pytest.fixture(scope="module")
def entropy_run(real_model, ids):
    return entropy_prefill(real_model[0], ids)


def test_real_lm_layers_differ_in_concentration(entropy_run):
    concentration, _ = entropy_run
    assert concentration.min() > 0.05, concentration  # not the ~1e-4 of a random-init model
    assert concentration.max() >= 1.5 * concentration.min(), concentration


def test_idea_entropy_budgets_follow_real_concentration(entropy_run):
    check_budgets_follow_concentration(*entropy_run)


def test_entropy_budgets_idea_off_on_a_real_lm(real_model, ids, monkeypatch):
    # the idea switched off as IDEAS says: every layer's concentration replaced by one constant
    monkeypatch.setattr(integration, "attention_concentration", lambda *a, **k: 0.5)
    concentration, budgets = entropy_prefill(real_model[0], ids)
    assert np.ptp(budgets) <= 1, budgets  # uniform up to rounding
    with pytest.raises(AssertionError, match="nearly uniform"):
        check_budgets_follow_concentration(concentration, budgets)
