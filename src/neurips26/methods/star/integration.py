"""pyod detectors on a series with a channel schema: ``STARDetector`` and the shared windowed pipeline.

A series is an array (n_steps, n_channels) or a DataFrame-like object (``.columns``, ``.to_numpy()``);
``state_columns={column: vocabulary}`` declares the discrete channels (by index for arrays, by name for
frames), every other channel is numeric. Columns of a frame are matched by name, so reordering them
changes nothing. A step's score is the robust-normalised reconstruction error of its patch (masked while
reconstructed) averaged over the numeric channels, plus ``beta`` times the robust-normalised NLL of the
observed states under the Numeral-State Matching head.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from pyod.models.base import BaseDetector
from sklearn.exceptions import NotFittedError  # sklearn's type: clone/check_is_fitted users catch it

from neurips26.methods.star.config import FINE_TUNING, STARConfig
from neurips26.methods.star.core import MaskedPatchReconstructor, inject_star
from neurips26.methods.star.tsfm import TSBackbone, load_tiny_tsfm

__all__ = ["STARDetector", "SchemaSeries", "WindowedReconstructionDetector", "encode_series"]

_EPS = 1e-6


class SchemaSeries:
    """A series split by its schema: standardised numerics, state codes and unknown-value flags."""

    def __init__(self, numeric: np.ndarray, codes: np.ndarray, unknown: np.ndarray, raw: np.ndarray) -> None:
        self.numeric = numeric  # (n, C) float32
        self.codes = codes  # (n, S) int64 in [0, V_j]; V_j marks an unknown value
        self.unknown = unknown  # (n, S) bool
        self.raw = raw  # (n, S) float64: the state codes as given


def _as_table(X: Any, argument: str = "X") -> tuple[np.ndarray, list[Hashable]]:
    """(values (n, d) float64, column keys): names for frames, positions for arrays."""
    import scipy.sparse

    if scipy.sparse.issparse(X):
        raise TypeError(f"{argument} is sparse; sparse input is not supported: pass a dense array")
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        columns = list(X.columns)
        values = X.to_numpy()
    else:
        values = np.asarray(X)
        if values.ndim != 2:
            raise ValueError(f"{argument} must be 2-D (n_steps, n_channels), got shape {values.shape}")
        columns = list(range(values.shape[1]))
    if values.ndim != 2:
        raise ValueError(f"{argument} must be 2-D (n_steps, n_channels), got shape {values.shape}")
    if np.iscomplexobj(values):  # casting would silently drop the imaginary part
        raise ValueError(f"Complex data not supported: {argument} has dtype {values.dtype}")
    try:
        values = values.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"{argument} must hold numbers (state codes too), got dtype {values.dtype}"
        ) from error
    return values, columns


def _validate_schema(state_columns: Mapping[Hashable, Sequence[Any]] | None) -> dict[Hashable, tuple]:
    if state_columns is None:
        return {}
    if not isinstance(state_columns, Mapping):
        raise TypeError(
            f"state_columns must be a mapping {{column: vocabulary}}, got {type(state_columns).__name__}"
        )
    schema = {}
    for column, vocabulary in state_columns.items():
        vocab = tuple(vocabulary)
        if not vocab:
            raise ValueError(f"state_columns[{column!r}]: the vocabulary is empty")
        if len(set(vocab)) != len(vocab):
            raise ValueError(f"state_columns[{column!r}]: the vocabulary has duplicates: {vocab}")
        for value in vocab:
            if not float(value).is_integer():
                raise ValueError(f"state_columns[{column!r}]: codes must be integers, got {value!r}")
        schema[column] = vocab
    return schema


def encode_series(
    X: Any,
    schema: Mapping[Hashable, tuple],
    numeric_columns: Sequence[Hashable] | None = None,
    argument: str = "X",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Hashable]]:
    """Split ``X`` into numeric values (n, C), state codes (n, S), unknown flags (n, S), numeric keys.

    Raises ``ValueError`` naming ``argument`` (or ``state_columns``) for NaN/inf numerics, non-integer or
    missing state codes, a schema column absent from ``X``, or numeric columns other than
    ``numeric_columns``.
    """
    values, columns = _as_table(X, argument)
    missing = [c for c in schema if c not in columns]
    if missing:
        raise ValueError(f"state_columns names columns {missing} that {argument} lacks (it has {columns})")
    position = {c: i for i, c in enumerate(columns)}
    numeric_keys = [c for c in columns if c not in schema]
    if hasattr(X, "columns"):
        numeric_keys = sorted(numeric_keys, key=str)  # by name: column order does not matter
    if numeric_columns is not None and list(numeric_keys) != list(numeric_columns):
        raise ValueError(
            f"{argument} has {len(numeric_keys)} numeric channels {numeric_keys}, but the detector was "
            f"fitted "
            f"on {len(numeric_columns)}: {list(numeric_columns)}"
        )
    if not numeric_keys:
        raise ValueError(f"{argument} has no numeric channel: every column is a state in state_columns")
    numeric = values[:, [position[c] for c in numeric_keys]]
    if not np.isfinite(numeric).all():
        bad = sorted({numeric_keys[j] for j in np.argwhere(~np.isfinite(numeric))[:, 1]}, key=str)
        raise ValueError(f"{argument} has NaN or inf in numeric channels {bad}")
    n = values.shape[0]
    codes = np.zeros((n, len(schema)), dtype=np.int64)
    unknown = np.zeros((n, len(schema)), dtype=bool)
    for j, (column, vocab) in enumerate(schema.items()):
        raw = values[:, position[column]]
        if not np.isfinite(raw).all():
            raise ValueError(f"{argument} column {column!r} (a state) has NaN or inf codes")
        if not np.all(raw == np.round(raw)):
            raise ValueError(
                f"{argument} column {column!r} (a state) has non-integer codes, "
                f"e.g. {raw[raw != np.round(raw)][0]}"
            )
        order = np.argsort(np.asarray(vocab, dtype=np.float64))
        sorted_vocab = np.asarray(vocab, dtype=np.float64)[order]
        at = np.clip(np.searchsorted(sorted_vocab, raw), 0, len(vocab) - 1)
        found = sorted_vocab[at] == raw
        codes[:, j] = np.where(found, order[at], len(vocab))  # unknown values -> slot V_j
        unknown[:, j] = ~found
    return numeric, codes, unknown, numeric_keys


def _window_starts(n: int, window: int, stride: int) -> np.ndarray:
    starts = np.arange(0, n - window + 1, stride)
    if starts[-1] != n - window:
        starts = np.r_[starts, n - window]
    return starts


class WindowedReconstructionDetector(BaseDetector):
    """Shared pipeline: schema encoding, standardisation, window training and masked-reconstruction scores.

    Subclasses implement ``_build_model(n_numeric, vocab_sizes, backbone) -> MaskedPatchReconstructor``.
    """

    def __init__(
        self,
        state_columns: Mapping[Hashable, Sequence[Any]] | None = None,
        backbone: TSBackbone | None = None,
        window: int = FINE_TUNING.window,
        n_steps: int = FINE_TUNING.n_steps,
        batch_size: int = FINE_TUNING.batch_size,
        lr: float = FINE_TUNING.lr,
        mask_ratio: float = FINE_TUNING.mask_ratio,
        mask_groups: int = FINE_TUNING.mask_groups,
        stride: int = FINE_TUNING.stride,
        beta: float = 1.0,
        contamination: float = 0.1,
        random_state: int = 0,
    ) -> None:
        super().__init__(contamination=contamination)
        self.state_columns = state_columns
        self.backbone = backbone
        self.window = window
        self.n_steps = n_steps
        self.batch_size = batch_size
        self.lr = lr
        self.mask_ratio = mask_ratio
        self.mask_groups = mask_groups
        self.stride = stride
        self.beta = beta
        self.random_state = random_state

    # ------------------------------------------------------------------ hooks
    def _build_model(
        self, n_numeric: int, vocab_sizes: tuple[int, ...], backbone: TSBackbone
    ) -> MaskedPatchReconstructor:
        raise NotImplementedError

    def _transform_channels(self, series: SchemaSeries) -> np.ndarray:
        """The channels the backbone reconstructs (baselines append states here)."""
        return series.numeric

    def _training_starts(self, n: int) -> np.ndarray:
        """Start steps of the windows fine-tuning samples from (a baseline may keep a subset)."""
        return _window_starts(n, self.window, self.stride)

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        for name in ("window", "batch_size", "mask_groups", "stride"):
            value = getattr(self, name)
            if not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.n_steps, int | np.integer) or self.n_steps < 0:
            raise ValueError(f"n_steps must be an int >= 0, got {self.n_steps!r}")
        if not 0 < self.mask_ratio < 1:
            raise ValueError(f"mask_ratio must be in (0, 1), got {self.mask_ratio!r}")
        if not (isinstance(self.contamination, float | int) and 0 < self.contamination <= 0.5):
            raise ValueError(f"contamination must be in (0, 0.5], got {self.contamination!r}")
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta!r}")

    def _encode(self, X: Any, fitting: bool) -> SchemaSeries:
        schema = self.schema_ if not fitting else _validate_schema(self.state_columns)
        values, columns = _as_table(X)
        if fitting:
            self.n_features_in_ = len(columns)  # sklearn's attribute: pipelines and checks read it
        elif len(columns) != self.n_features_in_:
            raise ValueError(
                f"X has {len(columns)} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        numeric, codes, unknown, keys = encode_series(X, schema, None if fitting else self.numeric_columns_)
        raw = values[:, [columns.index(c) for c in schema]]
        if numeric.shape[0] < self.window:
            raise ValueError(f"X has {numeric.shape[0]} steps, fewer than one window (window={self.window})")
        if fitting:
            self.schema_ = schema
            self.numeric_columns_ = keys
            center = np.median(numeric, axis=0)
            scale = numeric.std(axis=0)
            self.center_, self.scale_ = center, np.where(scale > _EPS, scale, 1.0)
        standard = ((numeric - self.center_) / self.scale_).astype(np.float32)
        return SchemaSeries(standard, codes, unknown, raw)

    # ------------------------------------------------------------------ pyod API
    def fit(self, X: Any, y: Any = None) -> WindowedReconstructionDetector:
        """Fine-tune the adapter on normal data ``X`` (n_steps, n_channels); ``y`` is ignored."""
        self._check_params()
        series = self._encode(X, fitting=True)
        backbone = self.backbone if self.backbone is not None else load_tiny_tsfm()
        if self.window % backbone.patch_len:
            raise ValueError(
                f"window={self.window} must be a multiple of the backbone's patch_len={backbone.patch_len}"
            )
        torch.manual_seed(self.random_state)
        self._set_n_classes(y)
        channels = self._transform_channels(series)
        vocab_sizes = tuple(len(v) for v in self.schema_.values())
        self.model_ = self._build_model(channels.shape[1], vocab_sizes, copy.deepcopy(backbone))
        self._train(channels, series.codes)
        err, nll = self._terms(channels, series.codes)
        self.error_center_, self.error_scale_ = _robust_stats(err)
        if nll is not None:
            self.nll_center_, self.nll_scale_ = _robust_stats(nll)
        self.decision_scores_ = self._combine(err, nll)
        self._process_decision_scores()
        return self

    def _train(self, channels: np.ndarray, codes: np.ndarray) -> None:
        params = self.model_.trainable_parameters()
        self.train_losses_: list[float] = []
        if self.n_steps == 0 or not params:
            return
        generator = torch.Generator().manual_seed(self.random_state)
        starts = self._training_starts(channels.shape[0])
        x = torch.from_numpy(np.ascontiguousarray(channels.T))
        s = torch.from_numpy(np.ascontiguousarray(codes.T))
        offsets = torch.arange(self.window)
        optimizer = torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0)
        self.model_.train()
        for _ in range(self.n_steps):
            pick = torch.from_numpy(starts)[
                torch.randint(0, len(starts), (self.batch_size,), generator=generator)
            ]
            idx = pick[:, None] + offsets  # (B, W)
            loss = self.model_.training_loss(
                x[:, idx].permute(1, 0, 2), s[:, idx].permute(1, 0, 2), self.mask_ratio, generator
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            self.train_losses_.append(loss.item())
        self.model_.eval()

    @torch.no_grad()
    def _terms(self, channels: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Per-step squared errors (n, C) and state NLLs (n, S) or None, from non-overlapping windows."""
        n = channels.shape[0]
        starts = _window_starts(n, self.window, self.window)
        idx = torch.from_numpy(starts)[:, None] + torch.arange(self.window)
        x = torch.from_numpy(np.ascontiguousarray(channels.T))[:, idx].permute(1, 0, 2)
        s = torch.from_numpy(np.ascontiguousarray(codes.T))[:, idx].permute(1, 0, 2)
        self.model_.eval()
        chunk = 128  # windows per forward pass: bounded memory, cost linear in the series length
        parts = [
            self.model_(x[i : i + chunk], s[i : i + chunk], self.mask_groups) for i in range(0, len(x), chunk)
        ]
        err_w = torch.cat([e for e, _ in parts])
        nll_w = None if parts[0][1] is None else torch.cat([q for _, q in parts])  # type: ignore[misc]
        err = np.empty((n, channels.shape[1]), dtype=np.float64)
        nll = None if nll_w is None else np.empty((n, codes.shape[1]), dtype=np.float64)
        # later windows overwrite earlier ones: only the last, end-aligned window overlaps
        flat_idx = idx.reshape(-1).numpy()
        err[flat_idx] = err_w.permute(0, 2, 1).reshape(-1, channels.shape[1]).double().numpy()
        if nll is not None:
            nll[flat_idx] = nll_w.permute(0, 2, 1).reshape(-1, codes.shape[1]).double().numpy()
        return err, nll

    def _combine(self, err: np.ndarray, nll: np.ndarray | None) -> np.ndarray:
        score = ((err - self.error_center_) / self.error_scale_).mean(1)
        if nll is not None and self.beta > 0:
            score = score + self.beta * ((nll - self.nll_center_) / self.nll_scale_).mean(1)
        return score

    def decision_function(self, X: Any) -> np.ndarray:
        """Anomaly score per step (n_steps,), higher is more anomalous."""
        if not hasattr(self, "model_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted: call fit(X) first")
        series = self._encode(X, fitting=False)
        self.last_unknown_ = series.unknown
        channels = self._transform_channels(series)
        return self._combine(*self._terms(channels, series.codes))


def _robust_stats(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column median and spread (99th percentile minus median; 1 where that is zero)."""
    center = np.median(values, axis=0)
    spread = np.quantile(values, 0.99, axis=0) - center
    return center, np.where(spread > _EPS, spread, 1.0)


class STARDetector(WindowedReconstructionDetector):
    """STAR (arXiv 2510.16014) as a pyod detector: a frozen TSFM with a state-aware adapter.

    Parameters
    ----------
    state_columns : {column: vocabulary} of the discrete channels (indices for arrays, names for frames);
        the vocabulary lists the integer codes a state may take. Other channels are numeric.
    backbone : a ``TSBackbone`` (None: the committed ``tiny-tsfm``); copied, never modified.
    config : ``STARConfig`` (None: its defaults); its ``beta`` weights the state term of the score.
    window, n_steps, batch_size, lr, mask_ratio, mask_groups, stride : windowing and fine-tuning
        (defaults: ``FINE_TUNING``, the experiment's; see ``FineTuningDefaults`` for their sources).
    contamination : pyod's expected outlier share, sets ``threshold_``.

    Attributes after ``fit``: ``model_`` (a ``STARModel``), ``threshold_``, ``decision_scores_``,
    ``schema_``; after scoring, ``last_unknown_`` (n, S) flags state values outside the vocabulary.
    """

    def __init__(
        self,
        state_columns: Mapping[Hashable, Sequence[Any]] | None = None,
        backbone: TSBackbone | None = None,
        config: STARConfig | None = None,
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
        self.config = config
        # sklearn convention: __init__ never validates (set_params passes anything); _check_params does
        beta = (config if isinstance(config, STARConfig) else STARConfig()).beta
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
            beta,
            contamination,
            random_state,
        )

    def _check_params(self) -> None:
        if self.config is not None and not isinstance(self.config, STARConfig):
            raise TypeError(f"config must be a STARConfig, got {type(self.config).__name__}")
        self.beta = (self.config or STARConfig()).beta
        super()._check_params()

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep=deep)
        params.pop("beta", None)
        return params

    def _build_model(
        self, n_numeric: int, vocab_sizes: tuple[int, ...], backbone: TSBackbone
    ) -> MaskedPatchReconstructor:
        return inject_star(
            backbone, self.config or STARConfig(), n_numeric=n_numeric, vocab_sizes=vocab_sizes
        )

    @torch.no_grad()
    def explain(self, X: Any) -> dict[str, np.ndarray]:
        """Attribute each step's score to numeric, state-conditional and state-inherent causes.

        Returns a dict of (n,) arrays: ``score`` (= ``decision_function``), ``numeric``,
        ``state_conditional``, ``state_inherent`` (the three add up to ``score``), ``label`` (0 numeric,
        1 state-conditional, 2 state-inherent: the largest part), plus ``channel`` (n, C) normalised
        errors, ``state`` (n, S) normalised NLLs and ``unknown`` (n, S) flags. The state-conditional
        part is how much worse the numerics are reconstructed under the observed states than under a
        state-agnostic context (the mean training context): flow through a closed valve is plausible in
        general, wrong for this state.
        """
        if not hasattr(self, "model_"):
            raise NotFittedError("STARDetector is not fitted: call fit(X) first")
        series = self._encode(X, fitting=False)
        err, nll = self._terms(series.numeric, series.codes)
        channel = (err - self.error_center_) / self.error_scale_
        original = self.model_.context
        mean_context = self._mean_context()
        try:
            self.model_.context = lambda codes: mean_context.expand(codes.shape[0], -1, -1)  # type: ignore[method-assign]
            agnostic, _ = self._terms(series.numeric, series.codes)
        finally:
            self.model_.context = original  # type: ignore[method-assign]
        agnostic_channel = (agnostic - self.error_center_) / self.error_scale_
        conditional = np.clip(channel - agnostic_channel, 0, None).mean(1)
        numeric_part = channel.mean(1) - conditional
        state = np.zeros((len(channel), 0)) if nll is None else (nll - self.nll_center_) / self.nll_scale_
        inherent = self.beta * state.mean(1) if state.shape[1] else np.zeros(len(channel))
        parts = np.stack([numeric_part, conditional, inherent], axis=1)
        return {
            "score": numeric_part + conditional + inherent,
            "numeric": numeric_part,
            "state_conditional": conditional,
            "state_inherent": inherent,
            "label": parts.argmax(1),
            "channel": channel,
            "state": state,
            "unknown": series.unknown,
        }

    def _mean_context(self) -> torch.Tensor:
        """The state context averaged over the training windows' patches: (1, N, context_dim)."""
        if not hasattr(self, "mean_context_"):
            raise RuntimeError("mean_context_ missing: refit the detector")
        return self.mean_context_

    def fit(self, X: Any, y: Any = None) -> STARDetector:
        super().fit(X, y)
        series = self._encode(X, fitting=False)
        n = series.codes.shape[0]
        starts = _window_starts(n, self.window, self.window)
        idx = torch.from_numpy(starts)[:, None] + torch.arange(self.window)
        codes = torch.from_numpy(np.ascontiguousarray(series.codes.T))[:, idx].permute(1, 0, 2)
        with torch.no_grad():
            context = self.model_.context(codes)
        n_patches = self.window // self.model_.backbone.patch_len
        mean = context.mean(dim=(0, 1), keepdim=True) if context is not None else torch.zeros(1, 1, 1)
        self.mean_context_ = mean.expand(1, n_patches, -1).contiguous()
        return self


def n_trainable(detector: WindowedReconstructionDetector) -> int:
    """Trainable parameter count of a fitted detector's model."""
    return sum(p.numel() for p in detector.model_.trainable_parameters())


def parameter_ratio(detector: WindowedReconstructionDetector) -> float:
    """Trainable parameters over the frozen backbone's parameters."""
    backbone = sum(p.numel() for p in detector.model_.backbone.parameters() if not p.requires_grad)
    return n_trainable(detector) / max(backbone, 1)
