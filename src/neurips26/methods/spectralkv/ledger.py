"""Budget ledger and static budget profiles: the accounting side of SpectralKV.

* :class:`BudgetLedger` -- kept tokens per layer and KV head (sinks and window included) next to the
  nominal budget ``n_layers * n_kv_heads * compute_n_kept(n, ratio)``. :func:`ledger_from_cache` builds one
  for *any* kvpress press from the cache it left behind (physically dropped entries and AdaKV-style
  masked ones), so our press and every baseline are audited the same way.
* :class:`BudgetProfile` -- per-layer budget weights calibrated offline and stored as JSON; the static
  variant applies it layer by layer during prefill.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neurips26.core.files import atomic_write_json

__all__ = ["BudgetLedger", "BudgetProfile", "LayerRecord", "ledger_from_cache", "nominal_kept"]


def nominal_kept(context: int, compression_ratio: float) -> int:
    """Tokens one (layer, head) keeps under kvpress's convention: ``max(1, int(n * (1 - ratio)))``."""
    if compression_ratio == 0:
        return context
    return max(1, int(context * (1 - compression_ratio)))


@dataclass
class LayerRecord:
    """What one attention layer kept."""

    layer: int
    context: int
    nominal: int  # per head
    kept_per_head: list[int]
    forced: int = 0  # sinks + window inside the kept count
    note: str = ""


@dataclass
class BudgetLedger:
    """Kept-token accounting of one prefill, per layer and KV head."""

    compression_ratio: float
    records: list[LayerRecord] = field(default_factory=list)

    def add(self, record: LayerRecord) -> None:
        self.records = [r for r in self.records if r.layer != record.layer] + [record]
        self.records.sort(key=lambda r: r.layer)

    @property
    def total_kept(self) -> int:
        return sum(sum(r.kept_per_head) for r in self.records)

    @property
    def nominal_total(self) -> int:
        return sum(r.nominal * len(r.kept_per_head) for r in self.records)

    @property
    def kept_fraction(self) -> float:
        full = sum(r.context * len(r.kept_per_head) for r in self.records)
        return self.total_kept / full if full else float("nan")

    @property
    def matches_nominal(self) -> bool:
        return self.total_kept == self.nominal_total

    def per_layer(self) -> list[int]:
        """Kept tokens per layer, summed over heads."""
        return [sum(r.kept_per_head) for r in self.records]

    def check(self) -> None:
        """Raise ``AssertionError`` naming the layers when the total differs from the nominal budget."""
        if not self.matches_nominal:
            detail = ", ".join(
                f"layer {r.layer}: {r.kept_per_head} vs {r.nominal}/head" for r in self.records
            )
            raise AssertionError(
                f"kept {self.total_kept} tokens, nominal budget is {self.nominal_total} ({detail})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "compression_ratio": self.compression_ratio,
            "total_kept": self.total_kept,
            "nominal_total": self.nominal_total,
            "records": [asdict(r) for r in self.records],
        }


def ledger_from_cache(
    model: Any, cache: Any, context: int, compression_ratio: float, masked: list[Any] | None = None
) -> BudgetLedger:
    """Audit what any press left in ``cache`` after a prefill of ``context`` tokens.

    A layer's kept count per head is its cache length minus the entries a head-wise press (AdaKV,
    DuoAttention) masked through ``module.masked_key_indices`` (read from the modules, or from ``masked``,
    a per-layer snapshot taken right after the prefill).
    """
    import torch

    ledger = BudgetLedger(compression_ratio)
    from neurips26.methods.spectralkv.press_eval import decoder_layers

    layers = decoder_layers(model)
    for idx, layer in enumerate(layers):
        keys = cache.layers[idx].keys
        batch, heads, length, _ = keys.shape
        kept = torch.full((batch, heads), length, dtype=torch.long)
        layer_masked = (
            masked[idx] if masked is not None else getattr(layer.self_attn, "masked_key_indices", None)
        )
        if layer_masked is not None:
            b_idx, h_idx, _ = layer_masked
            kept -= torch.zeros(batch, heads, dtype=torch.long).index_put(
                (b_idx.cpu(), h_idx.cpu()), torch.ones_like(b_idx.cpu()), accumulate=True
            )
        ledger.add(
            LayerRecord(
                layer=idx,
                context=context,
                nominal=nominal_kept(context, compression_ratio),
                kept_per_head=kept.sum(0).div(batch).round().long().tolist(),
            )
        )
    return ledger


@dataclass
class BudgetProfile:
    """Per-layer budget weights (mean 1) calibrated offline for one model architecture.

    The static variant water-fills ``n_layers * nominal`` tokens with these weights at any context length,
    so each layer can be compressed right after its own attention during prefill.
    """

    weights: list[float]
    model_type: str = ""
    calibration: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.weights or any(not math.isfinite(w) or w < 0 for w in self.weights):
            raise ValueError(f"BudgetProfile.weights must be finite and >= 0, got {self.weights!r}")
        if sum(self.weights) == 0:
            raise ValueError("BudgetProfile.weights must not all be zero")

    @property
    def num_layers(self) -> int:
        return len(self.weights)

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON (atomically: an interrupted save never leaves a half file)."""
        return atomic_write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> BudgetProfile:
        """Read a profile written by :meth:`save`; a missing or malformed file raises ``ValueError``."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(
                f"budget profile {path} does not exist; create one with calibrate_budget_profile"
            )
        try:
            payload = json.loads(path.read_text())
            return cls(**payload)
        except (json.JSONDecodeError, TypeError) as err:
            raise ValueError(f"budget profile {path} is not a valid profile: {err}") from err
