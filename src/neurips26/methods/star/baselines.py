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
from sklearn.exceptions import NotFittedError  # sklearn's type: clone/check_is_fitted users catch it

from neurips26.methods.star.config import FINE_TUNING, STARConfig
from neurips26.methods.star.core import MaskedPatchReconstructor
from neurips26.methods.star.integration import (
    SchemaSeries,
    WindowedReconstructionDetector,
    _robust_stats,
    _validate_schema,
    _window_starts,
    encode_series,
)
from neurips26.methods.star.tsfm import TSBackbone

__all__ = ["BackboneDetector", "FrozenReconstructor", "PerStateDetector", "SeriesPyOD", "WindowedPyOD"]

STATE_HANDLING = ("drop", "numbers", "one_hot")
ADAPTERS = ("none", "lora")

_STAR = STARConfig()  # the LoRA baselines default to STAR's rank, alpha and targets (like for like)


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
        rank: int = _STAR.rank,
        alpha: float = _STAR.alpha,
        target_modules: tuple[str, ...] = _STAR.target_modules,
        window: int = FINE_TUNING.window,
        n_steps: int = FINE_TUNING.n_steps,
        batch_size: int = FINE_TUNING.batch_size,
        lr: float = FINE_TUNING.lr,
        mask_ratio: float = FINE_TUNING.mask_ratio,
        mask_groups: int = FINE_TUNING.mask_groups,
        stride: int = FINE_TUNING.stride,
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


class _SubsetLoRA(BackboneDetector):
    """A numeric-only static-LoRA detector fine-tuned on a given subset of window starts."""

    allowed_starts: np.ndarray | None = None

    def _training_starts(self, n: int) -> np.ndarray:
        return super()._training_starts(n) if self.allowed_starts is None else self.allowed_starts


class PerStateDetector(BaseDetector):
    """One model per state combination (re-implemented; the paper's "separate model per state" baseline).

    Each training window is assigned the combination of state values most of its steps share; the
    ``max_models`` most frequent combinations with at least ``min_windows`` windows each get their own
    backbone + static LoRA (numeric channels, peft), fine-tuned on their windows only; one more model,
    fine-tuned on every window, scores the steps of any other combination (rare or unseen). The total
    fine-tuning budget ``n_steps`` is split evenly over the models, so the baseline gets the same
    optimizer steps as STAR. Each model's scores are robust-normalised on the training steps of its own
    combination, so scores of different models are comparable. Needs at least one state column.
    """

    def __init__(
        self,
        state_columns: Mapping[Hashable, Sequence[Any]] | None = None,
        backbone: TSBackbone | None = None,
        max_models: int = 4,
        min_windows: int = 8,
        rank: int = _STAR.rank,
        alpha: float = _STAR.alpha,
        target_modules: tuple[str, ...] = _STAR.target_modules,
        window: int = FINE_TUNING.window,
        n_steps: int = FINE_TUNING.n_steps,
        batch_size: int = FINE_TUNING.batch_size,
        lr: float = FINE_TUNING.lr,
        mask_ratio: float = FINE_TUNING.mask_ratio,
        stride: int = FINE_TUNING.stride,
        contamination: float = 0.1,
        random_state: int = 0,
    ) -> None:
        super().__init__(contamination=contamination)
        self.state_columns = state_columns
        self.backbone = backbone
        self.max_models = max_models
        self.min_windows = min_windows
        self.rank = rank
        self.alpha = alpha
        self.target_modules = target_modules
        self.window = window
        self.n_steps = n_steps
        self.batch_size = batch_size
        self.lr = lr
        self.mask_ratio = mask_ratio
        self.stride = stride
        self.random_state = random_state

    def _combination_ids(self, X: Any) -> np.ndarray:
        """Per step: the index of its state combination among ``combinations_`` (-1: none of them)."""
        _, codes, _, _ = encode_series(X, self.schema_, self.numeric_columns_)
        match = (codes[:, None, :] == self.combinations_[None]).all(-1)  # (n, K)
        return np.where(match.any(1), match.argmax(1), -1)

    def fit(self, X: Any, y: Any = None) -> PerStateDetector:
        """Fit the per-combination models and the fallback model on normal data ``X``."""
        if not isinstance(self.max_models, int) or self.max_models < 1:
            raise ValueError(f"max_models must be an int >= 1, got {self.max_models!r}")
        self.schema_ = _validate_schema(self.state_columns)
        if not self.schema_:
            raise ValueError("state_columns is empty: one model per state combination needs a state column")
        _, codes, _, keys = encode_series(X, self.schema_)
        self.numeric_columns_ = keys
        starts = _window_starts(len(codes), self.window, self.stride)
        combos, step_ids = np.unique(codes, axis=0, return_inverse=True)
        step_ids = step_ids.reshape(-1)
        window_ids = step_ids[starts[:, None] + np.arange(self.window)]  # (W, window)
        counts = (window_ids[:, :, None] == np.arange(len(combos))).sum(1)  # (W, n_combos)
        modal = counts.argmax(1)
        frequency = np.bincount(modal, minlength=len(combos))
        ranked = [k for k in np.argsort(-frequency, kind="stable") if frequency[k] >= self.min_windows]
        chosen = ranked[: self.max_models]
        self.combinations_ = combos[chosen].reshape(len(chosen), -1)
        steps_each = max(1, self.n_steps // (len(chosen) + 1))
        self.members_: list[_SubsetLoRA] = []
        ids = self._combination_ids(X)
        self.member_stats_: list[tuple[float, float]] = []
        for position, subset in enumerate([*(starts[modal == k] for k in chosen), None]):
            member = _SubsetLoRA(
                self.schema_,
                self.backbone,
                "drop",
                "lora",
                self.rank,
                self.alpha,
                self.target_modules,
                self.window,
                steps_each,
                self.batch_size,
                self.lr,
                self.mask_ratio,
                4,
                self.stride,
                self.contamination,
                self.random_state + position,
            )
            member.allowed_starts = subset
            member.fit(X)
            own = ids == position if subset is not None else np.ones(len(ids), dtype=bool)
            center, spread = _robust_stats(member.decision_scores_[own][:, None])
            self.member_stats_.append((float(center[0]), float(spread[0])))
            self.members_.append(member)
        which = np.where(ids >= 0, ids, len(self.members_) - 1)
        self.decision_scores_ = np.empty(len(ids))
        for position, member in enumerate(self.members_):  # the members' own training scores, no rescoring
            center, spread = self.member_stats_[position]
            mine = which == position
            self.decision_scores_[mine] = (member.decision_scores_[mine] - center) / spread
        self._process_decision_scores()
        return self

    def _score(self, X: Any, ids: np.ndarray) -> np.ndarray:
        fallback = len(self.members_) - 1
        which = np.where(ids >= 0, ids, fallback)
        score = np.empty(len(ids))
        for position, member in enumerate(self.members_):
            mine = which == position
            if mine.any():
                center, spread = self.member_stats_[position]
                score[mine] = (member.decision_function(X)[mine] - center) / spread
        return score

    def decision_function(self, X: Any) -> np.ndarray:
        """Anomaly score per step: the model of the step's state combination (else the fallback)."""
        if not hasattr(self, "members_"):
            raise NotFittedError("PerStateDetector is not fitted: call fit(X) first")
        return self._score(X, self._combination_ids(X))
