"""SpectralKV: entropy-guided layer budgets and spectral-coreset KV-cache compression.

Public API: :class:`SpectralKVPress` (a kvpress press), :func:`calibrate_budget_profile` and
:class:`BudgetProfile` (the static variant), :class:`BudgetLedger` / :func:`ledger_from_cache` (budget
audit for any press), and the tensor-level steps in :mod:`neurips26.methods.spectralkv.core`.
"""

from __future__ import annotations

from neurips26.methods.spectralkv.core import (
    allocate_layer_budgets,
    attention_concentration,
    metric_features,
    near_duplicate_share,
    pivoted_selection,
    select_coreset,
)
from neurips26.methods.spectralkv.integration import (
    SpectralKVPress,
    calibrate_budget_profile,
    check_supported_model,
)
from neurips26.methods.spectralkv.ledger import BudgetLedger, BudgetProfile, ledger_from_cache

__all__ = [
    "BudgetLedger",
    "BudgetProfile",
    "SpectralKVPress",
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
