"""SpectralKV as a kvpress press for Hugging Face models.

SpectralKV: entropy-guided layer budgets and spectral-coreset KV-cache compression (NeurIPS 2026).

``SpectralKVPress`` subclasses kvpress's ``BasePress``: it is used exactly like kvpress's own presses
(``with press(model): model(ids, past_key_values=cache)`` or the ``kv-press-text-generation`` pipeline)
and compresses the cache once, during prefill.

Budget modes:

* ``"entropy"`` (the paper's dynamic criterion) -- every layer's observation-window attention is analysed
  during the prefill; when the last layer has run, the global budget is water-filled over layers by
  concentration and all layers are compressed. The full cache of every layer exists until then (like any
  cross-layer allocator).
* ``"static"`` -- a :class:`~neurips26.methods.spectralkv.ledger.BudgetProfile` calibrated offline gives
  the layer weights, so each layer is compressed right after its own attention: the full cache of all
  layers never coexists (the paper's peak-prefill-memory claim).
* ``"uniform"`` -- every layer keeps the same number (the usual recipe; an ablation).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from neurips26.core.config import param
from neurips26.methods.spectralkv.budgets import allocate_layer_budgets, attention_concentration
from neurips26.methods.spectralkv.config import BUDGET_MODES, SELECTORS, SpectralKVPressConfig
from neurips26.methods.spectralkv.core import select_from_candidates, select_topk
from neurips26.methods.spectralkv.features import (
    Candidates,
    forced_token_mask,
    metric_candidates,
    metric_candidates_of_layers,
)
from neurips26.methods.spectralkv.ledger import BudgetLedger, BudgetProfile, LayerRecord, nominal_kept
from neurips26.methods.spectralkv.press_eval import decoder_layers

try:  # kvpress is the llm extra; the press is unusable without it, the core is not
    from kvpress.presses.base_press import BasePress
    from kvpress.utils import extract_keys_and_values
    from transformers.models.phi3.modeling_phi3 import Phi3Attention
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ImportError("SpectralKVPress needs kvpress: pip install 'neurips26[llm]'") from _err

__all__ = [
    "BUDGET_MODES",
    "SELECTORS",
    "SpectralKVPress",
    "calibrate_budget_profile",
    "check_supported_model",
    "check_unpadded",
    "fit_masks_to_layer_lengths",
]


@dataclass
class _LayerAnalysis:
    keys: torch.Tensor
    values: torch.Tensor
    scores: torch.Tensor  # (B, H, n) SnapKV-style observed attention, window padded with max + 1
    queries: torch.Tensor  # (B, H, g*w, d) post-RoPE window queries grouped by KV head
    logits: torch.Tensor  # (B, H_q, w, n) their pre-softmax logits, the key part of the features
    concentration: float


@dataclass
class SpectralKVPress(BasePress, SpectralKVPressConfig):
    """Entropy-guided layer budgets + spectral-coreset token selection, as a kvpress press.

    Parameters
    ----------
    compression_ratio:
        Fraction of the KV cache removed, in ``[0, 1)`` (kvpress's convention). The global budget is
        ``n_layers * n_kv_heads * max(1, int(n * (1 - ratio)))`` tokens; the ledger checks it exactly.
    budget_mode:
        ``"entropy"``, ``"static"`` (needs ``profile``) or ``"uniform"``.
    selector:
        ``"coreset"`` (residual pivoting in the metric-aligned joint space) or ``"topk"`` (SnapKV's rule).
    profile:
        The offline layer profile of ``budget_mode="static"``.

    Every other keyword is a field of :class:`~neurips26.methods.spectralkv.config.SpectralKVPressConfig`
    (its defaults and their sources are there); :meth:`from_config` builds a press from one.

    After each prefill ``press.ledger`` holds the kept tokens per layer and head.

    Examples
    --------
    >>> press = SpectralKVPress(compression_ratio=0.75)
    >>> with press(model):  # doctest: +SKIP
    ...     model(input_ids, past_key_values=DynamicCache())
    >>> press.ledger.check()  # doctest: +SKIP
    """

    compression_ratio: float = param(0.0, "kvpress convention: fraction of the cache removed")
    profile: BudgetProfile | None = param(None, "static mode: an offline-calibrated layer profile")
    ledger: BudgetLedger = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.compression_ratio, bool) or not 0 <= self.compression_ratio < 1:
            raise ValueError(f"compression_ratio must be in [0, 1), got {self.compression_ratio!r}")
        SpectralKVPressConfig.__post_init__(self)
        if self.budget_mode == "static" and self.profile is None:
            raise ValueError(
                "budget_mode='static' needs profile=BudgetProfile (see calibrate_budget_profile)"
            )
        self.ledger = BudgetLedger(self.compression_ratio)
        self._pending: dict[int, _LayerAnalysis] = {}
        self._num_layers = 0
        self._compressible: list[int] = []  # layers the press compresses (Gemma 3: the global ones)
        self._pending_sizes: tuple[int, int, int] | None = None
        self._layer_budgets: torch.Tensor | None = None
        self._forced_mask: torch.Tensor | None = None
        self._observe_only = False
        self.concentrations: dict[int, float] = {}

    @classmethod
    def from_config(
        cls, config: SpectralKVPressConfig, compression_ratio: float, profile: BudgetProfile | None = None
    ) -> SpectralKVPress:
        """The press with ``config``'s hyper-parameters at ``compression_ratio`` (and ``profile``)."""
        if not isinstance(config, SpectralKVPressConfig):
            raise TypeError(f"config must be a SpectralKVPressConfig, got {type(config).__name__}")
        settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(SpectralKVPressConfig)}
        return cls(compression_ratio=compression_ratio, profile=profile, **settings)

    # -- model checks -------------------------------------------------------------------------------
    def post_init_from_model(self, model: Any) -> None:
        check_supported_model(model)
        self._num_layers = model.config.num_hidden_layers
        layers = decoder_layers(model)
        self._compressible = [idx for idx, layer in enumerate(layers) if not _is_sliding(layer.self_attn)]
        for layer in layers:  # compressed layers need masks of their own length (see the function)
            fit_masks_to_layer_lengths(layer.self_attn)
        if self.profile is not None and self.profile.num_layers != self._num_layers:
            raise ValueError(
                f"profile has {self.profile.num_layers} layer weights, "
                f"the model has {self._num_layers} layers"
            )

    # -- the hook -----------------------------------------------------------------------------------
    def forward_hook(self, module: nn.Module, input: Any, kwargs: dict, output: Any) -> Any:
        hidden_states = kwargs["hidden_states"]
        q_len = hidden_states.shape[1]
        if not _is_prefilling(kwargs["cache_position"], q_len):
            return output
        idx = module.layer_idx
        if idx == 0:
            self._start_prefill()
        self._prefill_layer(module, hidden_states, kwargs)
        if self._pending and idx == self._num_layers - 1:  # entropy mode: every layer has been analysed
            self._compress_pending(kwargs["past_key_values"], *self._pending_sizes)
        return output

    def _prefill_layer(self, module: nn.Module, hidden_states: torch.Tensor, kwargs: dict) -> None:
        """Analyse (and, unless the entropy mode waits for all layers, compress) one layer's prefill cache."""
        cache, idx = kwargs["past_key_values"], module.layer_idx
        keys, values = extract_keys_and_values(cache, idx)
        n = keys.shape[2]
        nominal = nominal_kept(n, self.compression_ratio)
        floor = min(n, self.n_sink + self.window_size)
        if self._observe_only:  # calibration: concentration only, whatever the ratio would keep
            if n > floor:
                self.concentrations[idx] = self._analyse(
                    module, hidden_states, keys, values, kwargs
                ).concentration
            return
        if idx not in self._compressible or _holds_window_only(cache.layers[idx]):
            # bounded by its window already; compressing it breaks transformers' window bookkeeping
            self._record(idx, n, n, [n] * keys.shape[1], floor, "sliding-window layer: kept its window")
            return
        if self.compression_ratio == 0 or n <= floor:
            note = "" if self.compression_ratio == 0 else f"context {n} <= sinks + window {floor}: kept all"
            self._record(idx, n, n, [n] * keys.shape[1], floor, note)
            return
        check_unpadded(kwargs.get("attention_mask"), n)
        if nominal < floor:
            raise ValueError(
                f"compression_ratio={self.compression_ratio} keeps {nominal} of {n} tokens per layer, below "
                f"n_sink + window_size = {floor}; lower compression_ratio or shrink n_sink/window_size"
            )
        analysis = self._analyse(module, hidden_states, keys, values, kwargs)
        self.concentrations[idx] = analysis.concentration
        if self.budget_mode == "entropy":
            self._pending[idx] = analysis
            self._pending_sizes = (n, nominal, floor)
        else:
            budget = int(self._budgets_for(n, nominal, floor)[idx])
            self._compress_layer(cache, idx, analysis, budget, n, nominal, floor)

    def _start_prefill(self) -> None:
        self.ledger = BudgetLedger(self.compression_ratio)
        self._pending = {}
        self._pending_sizes = None
        self._layer_budgets = None
        self._forced_mask = None
        self.concentrations = {}

    def _analyse(
        self,
        module: nn.Module,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        kwargs: dict,
    ) -> _LayerAnalysis:
        """Observation-window attention, SnapKV scores, window queries and the layer's concentration."""
        queries, logits, attention = _window_attention(module, hidden_states, keys, self.window_size, kwargs)
        n, w = keys.shape[2], self.window_size
        heads_kv = keys.shape[1]
        group = attention.shape[1] // heads_kv
        # SnapKV's score, operation for operation (kvpress SnapKVPress.score), so "uniform + topk" equals it
        scores = attention[..., :-w].mean(dim=-2)
        scores = F.avg_pool1d(scores, kernel_size=self.kernel_size, padding=self.kernel_size // 2, stride=1)
        scores = scores.view(scores.shape[0], heads_kv, group, n - w).mean(2)
        scores = F.pad(scores, (0, w), value=scores.max().item() + 1)
        candidates = slice(min(self.n_sink, n), n - w)  # the keys between the sinks and the window
        concentration = attention_concentration(attention, candidates, logits=logits)
        b, _, _, d = queries.shape
        grouped = queries.reshape(b, heads_kv, group * w, d)
        return _LayerAnalysis(keys, values, scores, grouped, logits, concentration)

    def _forced(self, n: int, device: torch.device) -> torch.Tensor:
        """The sinks + window mask of an ``n``-token context, built once per prefill (layers share it)."""
        mask = self._forced_mask
        if mask is None or mask.shape[0] != n or mask.device != device:
            mask = self._forced_mask = forced_token_mask(n, self.n_sink, self.window_size, device=device)
        return mask

    def _budgets_for(self, n: int, nominal: int, floor: int) -> torch.Tensor:
        """Per-layer budgets of the uniform and static modes (fixed before the layers run)."""
        if self._layer_budgets is None:
            budgets = torch.full((self._num_layers,), nominal)
            if self.budget_mode == "static":  # water-filled over the layers the press compresses
                assert self.profile is not None
                weights = [self.profile.weights[i] for i in self._compressible]
                budgets[self._compressible] = self._water_fill(weights, n, nominal, floor)
            self._layer_budgets = budgets
        return self._layer_budgets

    def _water_fill(self, weights: list[float], n: int, nominal: int, floor: int) -> torch.Tensor:
        cap = max(floor, min(n, math.floor(self.layer_cap * n)))
        layers = len(weights)
        total = min(layers * nominal, layers * cap)
        return allocate_layer_budgets(weights, total, [floor] * layers, [cap] * layers)

    def _compress_pending(self, cache: Any, n: int, nominal: int, floor: int) -> None:
        order = sorted(self._pending)
        # a floor keeps c ** gamma finite for gamma < 0 (the opposite direction: more slots to diffuse layers)
        weights = [max(self._pending[i].concentration, 1e-6) ** self.gamma for i in order]
        budgets = self._water_fill(weights, n, nominal, floor).tolist()
        if self.selector == "topk":
            selections = [self.select(self._pending[i], b) for i, b in zip(order, budgets, strict=True)]
        else:  # one batched pivoting pass over all layers: layers are stacked on the batch dim
            chosen = select_from_candidates(
                self._layers_candidates(order, budgets), **self._pivoting_options()
            )
            rows = self._pending[order[0]].keys.shape[0]
            selections = [chosen[k * rows : (k + 1) * rows, :, :b] for k, b in enumerate(budgets)]
        for idx, budget, indices in zip(order, budgets, selections, strict=True):
            self._write_selection(cache, idx, self._pending[idx], indices, n, nominal, floor, budget)
        self._pending = {}

    def _compress_layer(
        self, cache: Any, idx: int, analysis: _LayerAnalysis, budget: int, n: int, nominal: int, floor: int
    ) -> None:
        self._write_selection(cache, idx, analysis, self.select(analysis, budget), n, nominal, floor, budget)

    def _write_selection(
        self,
        cache: Any,
        idx: int,
        analysis: _LayerAnalysis,
        indices: torch.Tensor,
        n: int,
        nominal: int,
        floor: int,
        budget: int,
    ) -> None:
        rows = _token_rows(analysis.keys, indices)
        keys, values = _take_rows(analysis.keys, rows), _take_rows(analysis.values, rows)
        _write_layer(cache, idx, keys, values)
        self._record(idx, n, nominal, [budget] * keys.shape[1], min(floor, budget), "")

    def select(self, analysis: _LayerAnalysis, budget: int) -> torch.Tensor:
        """``(B, H, budget)`` sorted indices of the tokens one layer keeps."""
        n = analysis.keys.shape[2]
        forced = self._forced(n, analysis.keys.device)
        if self.selector == "topk":
            return select_topk(analysis.scores, budget, forced)
        if budget == n:
            return torch.arange(n, device=analysis.keys.device).expand(*analysis.scores.shape).contiguous()
        return select_from_candidates(self._candidates(analysis, budget), **self._pivoting_options())

    def _candidates(self, analysis: _LayerAnalysis, budget: int) -> Candidates:
        """The layer's candidate pool in the metric-aligned, score-weighted joint feature space."""
        forced = self._forced(analysis.keys.shape[2], analysis.keys.device)
        return metric_candidates(
            analysis.keys,
            analysis.values,
            analysis.queries,
            analysis.scores,
            budget,
            forced,
            feature_scores=_feature_scores(analysis.scores, forced),
            window_logits=analysis.logits,
            **self._pool_options(),
        )

    def _layers_candidates(self, layers: list[int], budgets: list[int]) -> Candidates:
        """:meth:`_candidates` of the pending ``layers``, stacked on the batch dim, in one pass."""
        analyses = [self._pending[i] for i in layers]
        forced = self._forced(analyses[0].keys.shape[2], analyses[0].keys.device)
        scores = torch.stack([a.scores for a in analyses])
        return metric_candidates_of_layers(
            [a.keys for a in analyses],
            [a.values for a in analyses],
            [a.queries for a in analyses],
            scores,
            budgets,
            forced,
            feature_scores=_feature_scores(scores, forced),
            window_logits=[a.logits for a in analyses],
            **self._pool_options(),
        )

    def _pool_options(self) -> dict[str, Any]:
        return {
            "pool_factor": self.pool_factor,
            "value_weight": self.value_weight,
            "score_power": self.score_power,
        }

    def _pivoting_options(self) -> dict[str, Any]:
        return {
            "strategy": self.rank_strategy,
            "duplicate_cosine": self.duplicate_cosine,
            "block_size": self.block_size,
            "energy_tol": self.energy_tol,
            "segment_budget": self.segment_budget,
        }

    def _record(self, idx: int, n: int, nominal: int, kept: list[int], forced: int, note: str) -> None:
        self.ledger.add(LayerRecord(idx, n, nominal, kept, forced, note))

    @contextlib.contextmanager
    def observing(self, model: Any) -> Iterator[SpectralKVPress]:
        """Hook the model but only measure each layer's concentration (no compression)."""
        self._observe_only = True
        try:
            with self(model):
                yield self
        finally:
            self._observe_only = False


SUPPORTED_FAMILIES = "Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 3"


def check_supported_model(model: Any) -> None:
    """Raise ``ValueError`` naming the model family unless every decoder layer has standard multi-head/GQA
    attention: separate ``q_proj``/``k_proj`` (Llama, Mistral, Qwen2/3, Gemma 3) or Phi-3's fused
    ``qkv_proj``.

    SpectralKV (like kvpress's presses) works on per-head keys and values; latent attention (DeepSeek
    MLA) caches a compressed latent instead and is not supported.
    """
    inner = getattr(model, "model", None)
    layers = getattr(getattr(inner, "language_model", inner), "layers", None)
    family = getattr(getattr(model, "config", None), "model_type", "?")
    if layers is None or len(layers) == 0:
        raise ValueError(
            f"{type(model).__name__} (model_type {family!r}) has no decoder layers (model.model.layers) "
            "to hook"
        )
    attention = getattr(layers[0], "self_attn", None)
    per_head = hasattr(attention, "q_proj") and hasattr(attention, "k_proj")
    fused = isinstance(attention, Phi3Attention)  # the fused layout kvpress knows how to split
    if not (per_head or fused):
        raise ValueError(
            f"{type(model).__name__} (model_type {family!r}) has no supported attention "
            f"({type(attention).__name__}): SpectralKV needs per-head keys and values from q_proj/k_proj or "
            f"a fused qkv_proj ({SUPPORTED_FAMILIES}); latent attention (DeepSeek MLA) is not supported"
        )


def check_unpadded(attention_mask: torch.Tensor | None, n_keys: int) -> None:
    """Raise ValueError when the layer's attention mask hides some of its ``n_keys`` prompt keys from the
    last query: a padded batch (left or right).

    After compression transformers keeps masking a row's first ``p`` cache slots (its ``p`` pads in the
    uncompressed prompt), so a compressed padded row would hide kept tokens and show kept pads: the press
    refuses instead of decoding garbage. ``attention_mask`` is what the model passes its attention modules:
    None (no padding), a 4D boolean or additive mask, or a 2D padding mask (flash attention).
    """
    if attention_mask is None:
        return
    if attention_mask.ndim == 2:
        visible = attention_mask[:, -n_keys:].bool()
    else:
        last_row = attention_mask[:, 0, -1, :n_keys]
        visible = last_row if last_row.dtype == torch.bool else last_row == 0
    hidden = (~visible).sum(-1)
    if bool((hidden > 0).any()):
        rows = [int(r) for r in torch.nonzero(hidden).flatten()]
        raise ValueError(
            f"SpectralKVPress compresses unpadded batches only: rows {rows} of this batch have "
            f"{hidden[rows].tolist()} padding positions. Compress equal-length prompts (one prompt per "
            "batch, or bucket by length), or use compression_ratio=0"
        )


def fit_masks_to_layer_lengths(attention: nn.Module) -> None:
    """Give ``attention`` a correct mask over a cache layer the press compressed.

    transformers 5.2 builds one mask per forward from one layer's cache length and positions, so after a
    prefill whose layers kept different numbers of tokens (``entropy``/``static`` budgets, or Gemma 3's
    compressed global layer next to its full local ones) a multi-token forward (the kvpress pipeline's
    question) or eager attention fails with a shape error, or hides the wrong columns. The persistent pre-hook
    installed here (once per module) replaces the 4D mask of a compressed layer by the exact one for the
    unpadded batches the press compresses: every cached token visible to every new query, causal among the new
    queries. Layers the press did not compress, and masks transformers skips (None), are left alone.
    """
    if getattr(attention, "_spectralkv_fits_masks", False):
        return
    attention.register_forward_pre_hook(_fit_mask_to_layer, with_kwargs=True)
    attention._spectralkv_fits_masks = True


def _fit_mask_to_layer(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    mask, cache = kwargs.get("attention_mask"), kwargs.get("past_key_values")
    cache_position = kwargs.get("cache_position")
    if not isinstance(mask, torch.Tensor) or mask.ndim != 4 or cache is None or cache_position is None:
        return None
    layer_idx = getattr(module, "layer_idx", None)
    if layer_idx is None or layer_idx >= len(getattr(cache, "layers", ())):
        return None
    layer = cache.layers[layer_idx]
    if not getattr(layer, _COMPRESSED, False):
        return None
    queries = mask.shape[-2]
    width = layer.get_mask_sizes(cache_position)[0]  # cached tokens + the new ones
    allowed = torch.ones(queries, width, dtype=torch.bool, device=mask.device)
    allowed[:, width - queries :] = torch.ones(queries, queries, dtype=torch.bool, device=mask.device).tril()
    allowed = allowed.expand(mask.shape[0], mask.shape[1], queries, width)
    if mask.dtype != torch.bool:
        allowed = torch.zeros(allowed.shape, dtype=mask.dtype, device=mask.device).masked_fill(
            ~allowed, torch.finfo(mask.dtype).min
        )
    return args, {**kwargs, "attention_mask": allowed}


_COMPRESSED = "_spectralkv_compressed"  # cache-layer flag set by _write_layer


def _feature_scores(scores: torch.Tensor, forced: torch.Tensor) -> torch.Tensor:
    """The observed attention that weights the features: the window's padded score is not attention
    (zero), and a floor of 1e-3 of the row's largest keeps every token pickable."""
    observed = scores.masked_fill(forced, 0.0)
    return observed + observed.amax(-1, keepdim=True) * 1e-3


def _is_sliding(attention: Any) -> bool:
    """Whether a layer's attention is a sliding-window one by its architecture (Gemma 3's local layers)."""
    return bool(getattr(attention, "is_sliding", False))


def _holds_window_only(cache_layer: Any) -> bool:
    """A sliding-window cache layer that has already dropped tokens beyond its window (Mistral with a
    window shorter than the prompt): its window bounds it and its bookkeeping must not change."""
    seen = getattr(cache_layer, "cumulative_length", None)
    keys = getattr(cache_layer, "keys", None)
    return (
        bool(getattr(cache_layer, "is_sliding", False))
        and seen is not None
        and keys is not None
        and (int(seen) > keys.shape[-2])
    )


def _is_prefilling(cache_position: torch.Tensor, q_len: int) -> bool:
    return int(cache_position[-1]) + 1 == q_len


def _window_attention(
    module: nn.Module, hidden_states: torch.Tensor, keys: torch.Tensor, window: int, kwargs: dict
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Post-RoPE window queries ``(B, H_q, w, d)``, their logits over all keys (unmasked) and their causal
    softmax ``(B, H_q, w, n)``; kvpress ``SnapKVPress.compute_window_attention``'s arithmetic, so scores
    match it exactly."""
    batch, heads_kv, n, d = keys.shape
    cos, sin = kwargs["position_embeddings"]
    queries = post_rope_queries(module, hidden_states[:, -window:], (cos[:, -window:], sin[:, -window:]))
    heads_q, w = queries.shape[1], queries.shape[2]
    # each KV head's query group in one matmul: kvpress repeats the keys per query head instead (a copy)
    grouped = queries.reshape(batch, heads_kv, heads_q // heads_kv * w, d)
    logits = (grouped @ keys.transpose(2, 3)).reshape(batch, heads_q, w, n)
    logits.div_(math.sqrt(module.head_dim))  # in place: kvpress's division without a second full tensor
    # mask the future in the last w columns, restored after the softmax: the features read them too
    future = _future_mask(w, keys.device)
    window_block = logits[..., n - w :].clone()
    logits[..., n - w :].masked_fill_(future, float("-inf"))
    attention = F.softmax(logits, dim=-1, dtype=torch.float32)
    logits[..., n - w :] = window_block
    return queries, logits, attention.to(queries.dtype)


def _token_rows(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Rows of the flattened ``(B*H*n, d)`` cache ``tensor`` holding the tokens ``indices`` ``(B, H, k)``."""
    batch, heads, n, _ = tensor.shape
    offsets = n * torch.arange(batch * heads, device=indices.device).view(batch, heads, 1)
    return (indices + offsets).reshape(-1)


def _take_rows(tensor: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``(B, H, k, d)`` ``rows`` (:func:`_token_rows`) of ``tensor`` ``(B, H, n, d)``: one ``index_select``
    of whole rows (2-6x faster than ``gather`` with an index expanded over ``d``, element by element)."""
    batch, heads, n, dim = tensor.shape
    return tensor.reshape(batch * heads * n, dim).index_select(0, rows).reshape(batch, heads, -1, dim)


@functools.lru_cache(maxsize=8)
def _future_mask(window: int, device: torch.device) -> torch.Tensor:
    """``(w, w)`` bool, True above the diagonal: what each window query must not see (built once)."""
    return torch.ones(window, window, dtype=torch.bool, device=device).triu(1)


def _write_layer(cache: Any, idx: int, keys: torch.Tensor, values: torch.Tensor) -> None:
    """Replace layer ``idx`` of a (possibly quantized) transformers cache, as kvpress's BasePress does,
    and mark it compressed (its later masks are rebuilt, :func:`fit_masks_to_layer_lengths`)."""
    from transformers import QuantizedCache

    layer = cache.layers[idx]
    setattr(layer, _COMPRESSED, True)
    if isinstance(cache, QuantizedCache):
        layer._quantized_keys = layer._quantize(keys, axis=layer.axis_key)
        layer._quantized_values = layer._quantize(values, axis=layer.axis_value)
        layer.keys = torch.zeros(0, dtype=keys.dtype, device=keys.device)
        layer.values = torch.zeros(0, dtype=keys.dtype, device=keys.device)
        layer.cumulative_length = keys.shape[2]
    else:
        layer.keys = keys
        layer.values = values
        if getattr(layer, "is_sliding", False):  # Mistral's window (longer than the prompt): kept tokens
            layer.cumulative_length = keys.shape[2]


def calibrate_budget_profile(
    model: Any, prompts: list[torch.Tensor], *, gamma: float = 1.0, window_size: int = 32, n_sink: int = 4
) -> BudgetProfile:
    """Average the per-layer concentration ``c_l ** gamma`` over calibration prompts into a profile.

    Each prompt is a ``(1, n)`` id tensor with ``n > n_sink + window_size``; the weights have mean 1.
    """
    from transformers import DynamicCache

    if not prompts:
        raise ValueError("calibrate_budget_profile needs at least one prompt")
    observer = SpectralKVPress(compression_ratio=0.5, window_size=window_size, n_sink=n_sink, gamma=gamma)
    sums = torch.zeros(model.config.num_hidden_layers, dtype=torch.float64)
    for ids in prompts:
        if ids.ndim != 2 or ids.shape[1] <= n_sink + window_size:
            raise ValueError(
                f"each prompt must be (1, n) with n > {n_sink + window_size}, got {tuple(ids.shape)}"
            )
        with torch.no_grad(), observer.observing(model):
            model(ids, past_key_values=DynamicCache())
        sums += torch.tensor(
            [max(observer.concentrations[i], 1e-6) ** gamma for i in range(len(sums))], dtype=torch.float64
        )
    weights = sums / len(prompts)
    weights = weights / weights.mean() if float(weights.sum()) > 0 else torch.ones_like(weights)
    return BudgetProfile(
        weights=[round(float(w), 6) for w in weights],
        model_type=str(getattr(model.config, "model_type", "")),
        calibration={"n_prompts": len(prompts), "gamma": gamma, "tokens": [int(p.shape[1]) for p in prompts]},
    )


def post_rope_queries(module: Any, hidden_states: torch.Tensor, position_embeddings: Any) -> torch.Tensor:
    """``(B, H_q, q, d)`` queries of an attention module after RoPE, as its forward computes them."""
    from kvpress.utils import get_prerope_query_states
    from transformers.models.llama.modeling_llama import rotate_half

    queries = get_prerope_query_states(module, hidden_states)
    cos, sin = position_embeddings
    rotary = cos.shape[-1]  # Phi-3 style partial rotary rotates the first dims only
    rotated, passed = queries[..., :rotary], queries[..., rotary:]
    rotated = (rotated * cos.unsqueeze(1)) + (rotate_half(rotated) * sin.unsqueeze(1))
    return torch.cat([rotated, passed], dim=-1) if passed.shape[-1] else rotated
