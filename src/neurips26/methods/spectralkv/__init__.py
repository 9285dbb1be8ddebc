"""SpectralKV: entropy-guided layer budgets and spectral-coreset KV-cache compression.

Public API: :class:`SpectralKVPress` (a kvpress press), :func:`calibrate_budget_profile` and
:class:`BudgetProfile` (the static variant), :class:`BudgetLedger` / :func:`ledger_from_cache` (budget
audit for any press), :class:`SpectralKVPressConfig` (every hyper-parameter), and the tensor-level steps:
:mod:`~neurips26.methods.spectralkv.budgets` (across layers), :mod:`~neurips26.methods.spectralkv.features`
and :mod:`~neurips26.methods.spectralkv.core` (the coreset within a layer),
:mod:`~neurips26.methods.spectralkv.duplicates` (near-duplicate pairs).
"""

from __future__ import annotations

from neurips26.methods.spectralkv.budgets import allocate_layer_budgets, attention_concentration
from neurips26.methods.spectralkv.config import SpectralKVPressConfig
from neurips26.methods.spectralkv.core import pivoted_selection, select_coreset
from neurips26.methods.spectralkv.duplicates import near_duplicate_share
from neurips26.methods.spectralkv.features import metric_features
from neurips26.methods.spectralkv.integration import (
    SpectralKVPress,
    calibrate_budget_profile,
    check_supported_model,
)
from neurips26.methods.spectralkv.ledger import BudgetLedger, BudgetProfile, ledger_from_cache

#: Ecosystem families the public API conforms to (``neurips26.testing.conformance``).
CONFORMANCE: tuple[tuple[str, str], ...] = (("press", "neurips26.methods.spectralkv.conformance:tiny_press"),)

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); each runs ``SpectralKVPress`` on a stock HF Llama; the README's "Central ideas"
#: list says how each is switched off.
IDEAS: dict[str, str] = {
    "entropy budgets: layer budgets follow attention concentration": (
        "tests/methods/spectralkv/test_spectralkv_ideas.py::test_idea_entropy_budgets_follow_concentration"
    ),
    "spectral coreset: residual pivoting suppresses near-duplicates": (
        "tests/methods/spectralkv/test_spectralkv_ideas.py::test_idea_press_keeps_fewer_near_duplicates_than_snapkv"
    ),
    "static budgets compress each layer during prefill (lower peak)": (
        "tests/methods/spectralkv/test_spectralkv_ideas.py::test_idea_static_prefill_peak_matches_a_per_layer_press"
    ),
}

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "BudgetLedger",
    "BudgetProfile",
    "SpectralKVPress",
    "SpectralKVPressConfig",
    "allocate_layer_budgets",
    "attention_concentration",
    "calibrate_budget_profile",
    "check_supported_model",
    "ledger_from_cache",
    "metric_features",
    "near_duplicate_share",
    "pivoted_selection",
    "select_coreset",
]
