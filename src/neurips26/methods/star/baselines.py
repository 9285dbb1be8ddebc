"""STAR's baselines: the backbone with the states dropped, fed as numbers or one-hot, with or without a
static LoRA (peft), and pyod's windowed IsolationForest and PCA.

All backbone variants share STAR's pipeline (``WindowedReconstructionDetector``): same standardisation,
windows, masked-reconstruction scoring and robust normalisation; only the channels and the adapter differ.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from peft import LoraConfig, inject_adapter_in_model
from pyod.models.base import BaseDetector
from pyod.models.iforest import IForest
from pyod.models.pca import PCA
from pyod.models.ts_od import TimeSeriesOD

from neurips26.methods.star.core import MaskedPatchReconstructor
from neurips26.methods.star.integration import (
    SchemaSeries,
    WindowedReconstructionDetector,
    _validate_schema,
    encode_series,
)
from neurips26.zoo.tsfm import TSBackbone

__all__ = ["BackboneDetector", "FrozenReconstructor", "WindowedPyOD"]

STATE_HANDLING = ("drop", "numbers", "one_hot")
ADAPTERS = ("none", "lora")


class FrozenReconstructor(MaskedPatchReconstructor):
    """The backbone alone (frozen), or with a static LoRA injected by peft (only the LoRA factors train)."""

    def __init__(self, backbone: TSBackbone, lora: LoraConfig | None = None) -> None:
        super().__init__()
        for p in backbone.parameters():  # type: ignore[attr-defined]
            p.requires_grad_(False)
        if lora is not None:
            backbone = inject_adapter_in_model(lora, backbone)
            for name, p in backbone.named_parameters():  # type: ignore[attr-defined]
                p.requires_grad_("lora_" in name)
        self.backbone = backbone


class BackboneDetector(WindowedReconstructionDetector):
    """A TSFM detector that treats states the usual way (the paper's baselines).

    Parameters
    ----------
    state_handling : "drop" (numeric channels only), "numbers" (state codes standardised and appended as
        numeric channels: the paper's motivating degradation), "one_hot" (one 0/1 channel per state value).
    adapter : "none" (the frozen backbone, zero-shot) or "lora" (a static LoRA via peft, fine-tuned).
    rank, alpha, target_modules : the LoRA's (STAR's defaults, so the comparison is like for like).
    Other parameters: as ``STARDetector``.
    """

    def __init__(
        self,
        state_columns: Mapping[Hashable, Sequence[Any]] | None = None,
        backbone: TSBackbone | None = None,
        state_handling: str = "drop",
        adapter: str = "lora",
        rank: int = 4,
        alpha: float = 8.0,
        target_modules: tuple[str, ...] = ("q", "v", "fc2"),
        window: int = 64,
        n_steps: int = 300,
        batch_size: int = 32,
        lr: float = 3e-3,
        mask_ratio: float = 0.3,
        mask_groups: int = 4,
        stride: int = 16,
        contamination: float = 0.1,
        random_state: int = 0,
    ) -> None:
        super().__init__(
            state_columns,
            backbone,
            window,
            n_steps,
            batch_size,
            lr,
            mask_ratio,
            mask_groups,
            stride,
            0.0,
            contamination,
            random_state,
        )
        self.state_handling = state_handling
        self.adapter = adapter
        self.rank = rank
        self.alpha = alpha
        self.target_modules = target_modules

    def _check_params(self) -> None:
        if self.state_handling not in STATE_HANDLING:
            raise ValueError(f"state_handling must be one of {STATE_HANDLING}, got {self.state_handling!r}")
        if self.adapter not in ADAPTERS:
            raise ValueError(f"adapter must be one of {ADAPTERS}, got {self.adapter!r}")
        super()._check_params()

    def _transform_channels(self, series: SchemaSeries) -> np.ndarray:
        numeric, codes = series.numeric, series.codes
        if self.state_handling == "drop" or codes.shape[1] == 0:
            return numeric
        if self.state_handling == "numbers":
            extra = series.raw.astype(np.float32)  # the codes as given, as numeric channels
        else:
            sizes = [len(v) for v in self.schema_.values()]
            extra = np.concatenate(
                [(codes[:, j : j + 1] == np.arange(v)).astype(np.float32) for j, v in enumerate(sizes)],
                axis=1,
            )
        if not hasattr(self, "extra_center_"):
            self.extra_center_ = extra.mean(0)
            scale = extra.std(0)
            self.extra_scale_ = np.where(scale > 1e-6, scale, 1.0)
        return np.concatenate([numeric, (extra - self.extra_center_) / self.extra_scale_], axis=1)

    def fit(self, X: Any, y: Any = None) -> BackboneDetector:
        for name in ("extra_center_", "extra_scale_"):
            self.__dict__.pop(name, None)
        return super().fit(X, y)  # type: ignore[return-value]

    def _build_model(
        self, n_numeric: int, vocab_sizes: tuple[int, ...], backbone: TSBackbone
    ) -> MaskedPatchReconstructor:
        lora = None
        if self.adapter == "lora":
            lora = LoraConfig(
                r=self.rank, lora_alpha=self.alpha, target_modules=list(self.target_modules), lora_dropout=0.0
            )
        return FrozenReconstructor(backbone, lora)


class WindowedPyOD(TimeSeriesOD):
    """pyod's ``TimeSeriesOD`` (sliding windows, max aggregation) on standardised channels.

    ``inner`` is "iforest" or "pca"; states enter as standardised codes (what a generic detector sees).
    """

    def __init__(
        self,
        state_columns: Mapping[Hashable, Sequence[Any]] | None = None,
        inner: str = "iforest",
        window_size: int = 16,
        step: int = 4,
        contamination: float = 0.1,
        random_state: int = 0,
    ) -> None:
        if inner not in ("iforest", "pca"):
            raise ValueError(f"inner must be 'iforest' or 'pca', got {inner!r}")
        detector = (
            IForest(n_estimators=100, random_state=random_state)
            if inner == "iforest"
            else PCA(n_components=0.95)
        )
        super().__init__(detector=detector, window_size=window_size, step=step, contamination=contamination)
        self.state_columns = state_columns
        self.inner = inner
        self.random_state = random_state

    def _table(self, X: Any, fitting: bool) -> np.ndarray:
        schema = _validate_schema(self.state_columns)
        numeric, codes, _, _ = encode_series(X, schema)
        table = np.concatenate([numeric, codes.astype(np.float64)], axis=1)
        if fitting:
            self.center_ = table.mean(0)
            scale = table.std(0)
            self.scale_ = np.where(scale > 1e-6, scale, 1.0)
        return (table - self.center_) / self.scale_

    def fit(self, X: Any, y: Any = None) -> WindowedPyOD:
        torch.manual_seed(self.random_state)
        return super().fit(self._table(X, True))

    def decision_function(self, X: Any) -> np.ndarray:
        return super().decision_function(self._table(X, False))


class SeriesPyOD(WindowedPyOD):
    """pyod's deep time-series detectors on the same standardised channels: ``LSTMAD`` (forecasting
    error of an LSTM) or ``AnomalyTransformer`` (association discrepancy), sized for a CPU.
    """

    def __init__(
        self,
        state_columns: Mapping[Hashable, Sequence[Any]] | None = None,
        inner: str = "lstm",
        window_size: int = 32,
        epochs: int = 3,
        contamination: float = 0.1,
        random_state: int = 0,
    ) -> None:
        if inner not in ("lstm", "anomaly_transformer"):
            raise ValueError(f"inner must be 'lstm' or 'anomaly_transformer', got {inner!r}")
        BaseDetector.__init__(self, contamination=contamination)
        self.state_columns = state_columns
        self.inner = inner
        self.window_size = window_size
        self.epochs = epochs
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> SeriesPyOD:
        from pyod.models.ts_anomaly_transformer import AnomalyTransformer
        from pyod.models.ts_lstm import LSTMAD

        torch.manual_seed(self.random_state)
        table = self._table(X, True)
        if self.inner == "lstm":
            self.detector_ = LSTMAD(
                window_size=self.window_size,
                hidden_size=32,
                n_layers=1,
                epochs=self.epochs,
                contamination=self.contamination,
            )
        else:
            self.detector_ = AnomalyTransformer(
                window_size=self.window_size,
                d_model=64,
                n_heads=4,
                n_layers=2,
                epochs=self.epochs,
                step=max(1, self.window_size // 4),
                contamination=self.contamination,
                device="cpu",
            )
        self.detector_.fit(table)
        self.decision_scores_ = np.asarray(self.detector_.decision_scores_, dtype=np.float64)
        self._process_decision_scores()
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        return np.asarray(self.detector_.decision_function(self._table(X, False)), dtype=np.float64)
