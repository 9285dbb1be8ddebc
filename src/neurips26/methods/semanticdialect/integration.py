"""``fake_quantize_dit_(model, SemanticDialectConfig(...))``: W4A4 fake quantization of a video DiT, in place.

Not torchao's ``quantize_`` (whose per-module handlers see one layer at a time): the quantized layers share
one model-wide token state, and the attention processors and SeDA hooks need the model's blocks. The old
name ``quantize_`` remains as a deprecated alias (it returned the model; ``fake_quantize_dit_`` returns None).

Every ``nn.Linear`` (or those ``filter_fn(module, name)`` accepts) is swapped for a
:class:`FakeQuantLinear`: its weight is fake-quantized once (blocks along ``in_features``), its input
activations online at every call. Every diffusers ``Attention`` gets a :class:`QuantAttnProcessor` that
fake-quantizes both attention products: Q and K along the head dimension (QK^T), the softmax P along the
keys and V along the tokens (PV), and records each token's received attention mass, which picks the
salient tokens of the decomposition in the same transformer block (for Q/K/V, the previous sampling
step's mass: the block's attention runs after them).

A model-wide :class:`QuantState` carries the token context (SeDA clusters, saliency) and, when
``record`` is on, the temporal report (:func:`temporal_report`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.core.deprecation import warn_renamed
from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.semantic import (
    SemanticDialectQuantizer,
    TokenContext,
    patch_clusters,
    salient_tokens,
)

__all__ = [
    "FORMATS",
    "FakeQuantLinear",
    "FormatConfig",
    "QuantAttnProcessor",
    "QuantState",
    "fake_quantize_dit_",
    "quantize_",
    "temporal_report",
]

FORMATS = ("int4", "mxfp4", "nvfp4", "blockdialect")
_BLOCK_INDEX = re.compile(r"(?:^|\.)(?:transformer_blocks|blocks)\.(\d+)(?:\.|$)")


@dataclass
class FormatConfig:
    """A baseline format for ``fake_quantize_dit_``: one of ``FORMATS``, same W/A/attention switches."""

    name: str = "mxfp4"
    quantize_weights: bool = True
    quantize_activations: bool = True
    quantize_attention: bool = True
    tokens_per_frame: int = 64

    def __post_init__(self) -> None:
        if self.name not in FORMATS:
            raise ValueError(f"name={self.name!r} is not allowed; choose one of {list(FORMATS)}")

    def make_quantizer(self) -> Callable[..., torch.Tensor]:
        from neurips26.methods.semanticdialect import baselines

        if self.name == "blockdialect":
            return baselines.block_dialect()
        return {
            "int4": baselines.INT4Quantizer,
            "mxfp4": baselines.MXFP4Quantizer,
            "nvfp4": baselines.NVFP4Quantizer,
        }[self.name]()


def _make_quantizer(config: SemanticDialectConfig | FormatConfig) -> Callable[..., torch.Tensor]:
    if isinstance(config, FormatConfig):
        return config.make_quantizer()
    return SemanticDialectQuantizer(config)


@dataclass
class _LayerRecord:
    frame_error: torch.Tensor | None = None  # sums over calls, (F,)
    disagreement: torch.Tensor | None = None  # (F - 1,)
    calls: int = 0


@dataclass
class QuantState:
    """Shared, per-model state: token context per transformer block and the temporal records."""

    config: SemanticDialectConfig | FormatConfig
    saliency: dict[int, torch.Tensor] = field(default_factory=dict)
    kmeans: dict[int, tuple[torch.Tensor, int]] = field(default_factory=dict)
    record: bool = False
    records: dict[str, _LayerRecord] = field(default_factory=dict)
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))
    # the last quantized linear input: to_q, to_k and to_v share one input, quantize it once
    cached_input: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)

    def reset(self) -> None:
        """Forget the saliency of previous calls (start of a new sampling run)."""
        self.saliency.clear()
        self.kmeans.clear()
        self.cached_input = None

    def context(self, block: int | None, batch: int, tokens: int) -> TokenContext | None:
        """SeDA clusters and salient rows for activations (batch, tokens, K) of ``block``."""
        c = self.config
        if block is None or not isinstance(c, SemanticDialectConfig) or tokens % c.tokens_per_frame:
            return None
        context = TokenContext()
        if c.seda:
            if c.seda_clustering == "patch":
                context.row_clusters, context.n_clusters = patch_clusters(batch, tokens, c.tokens_per_frame)
            elif c.seda_clustering == "random":  # negative control: clusters that ignore semantics
                n = c.tokens_per_frame
                ids = torch.randint(n, (batch, tokens), generator=self.generator)
                context.row_clusters = (ids + torch.arange(batch)[:, None] * n).reshape(-1)
                context.n_clusters = batch * n
            elif block in self.kmeans and self.kmeans[block][0].numel() == batch * tokens:
                context.row_clusters, context.n_clusters = self.kmeans[block]
        if c.decomposition_ratio > 0:
            mass = self.saliency.get(block)
            if c.salient_selection == "random":
                mass = torch.rand(batch, tokens, generator=self.generator)
            if mass is not None and mass.shape == (batch, tokens):
                context.salient = salient_tokens(mass, c.decomposition_ratio).reshape(-1)
        return context

    def observe(self, name: str, x: torch.Tensor, xq: torch.Tensor, quantizer: Any) -> None:
        """Record per-frame relative error and cross-frame dialect disagreement of one activation."""
        tpf = self.config.tokens_per_frame
        if x.ndim != 3 or x.shape[1] % tpf:
            return
        b, n, k = x.shape
        frames = n // tpf
        err = ((x - xq) ** 2).reshape(b, frames, tpf * k).sum(-1)
        ref = (x**2).reshape(b, frames, tpf * k).sum(-1).clamp_min(1e-30)
        record = self.records.setdefault(name, _LayerRecord())
        frame_error = (err / ref).mean(0)
        record.frame_error = frame_error if record.frame_error is None else record.frame_error + frame_error
        dialects = getattr(getattr(quantizer, "stats", None), "last_dialects", None)
        if dialects is not None and dialects.shape[0] == b * n and frames > 1:
            d = dialects.reshape(b, frames, tpf, -1)
            dis = (d[:, 1:] != d[:, :-1]).float().mean(dim=(0, 2, 3))
            record.disagreement = dis if record.disagreement is None else record.disagreement + dis
        record.calls += 1


class FakeQuantLinear(nn.Module):
    """``nn.Linear`` with a fake-quantized weight (once) and fake-quantized inputs (every call)."""

    def __init__(self, linear: nn.Linear, state: QuantState, name: str) -> None:
        super().__init__()
        c = state.config
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.name, self.state = name, state
        match = _BLOCK_INDEX.search(name)
        self.block = int(match.group(1)) if match else None
        with torch.no_grad():
            weight = _make_quantizer(c)(linear.weight) if c.quantize_weights else linear.weight
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = linear.bias
        self.act_quantizer = _make_quantizer(c) if c.quantize_activations else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cached = self.state.cached_input
        if self.act_quantizer is not None and cached is not None and cached[0] is x:
            x = cached[1]
        elif self.act_quantizer is not None:
            context = None
            if x.ndim == 3:
                context = self.state.context(self.block, x.shape[0], x.shape[1])
            xq = self.act_quantizer(x, context)
            if self.state.record:
                self.state.observe(self.name, x, xq, self.act_quantizer)
            self.state.cached_input = (x, xq)
            x = xq
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, block={self.block}"


class QuantAttnProcessor:
    """diffusers attention processor fake-quantizing QK^T and PV; records attention mass received."""

    def __init__(self, state: QuantState, block: int | None, name: str) -> None:
        self.state, self.block, self.name = state, block, name
        c = state.config
        on = c.quantize_attention
        self.q_quantizer = _make_quantizer(c) if on else None
        self.k_quantizer = _make_quantizer(c) if on else None
        self.p_quantizer = _make_quantizer(c) if on else None
        self.v_quantizer = _make_quantizer(c) if on else None

    def _quantize(self, quantizer: Any, x: torch.Tensor, context: TokenContext | None) -> torch.Tensor:
        return x if quantizer is None else quantizer(x, context)

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: Any = None,
        attention_mask: Any = None,
        temb: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        if encoder_hidden_states is not None or attention_mask is not None:
            raise NotImplementedError("QuantAttnProcessor handles unmasked self-attention only")
        b, n, _ = hidden_states.shape
        q, k, v = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)
        heads = attn.heads
        q, k, v = (t.view(b, n, heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, h, N, hd)
        context = self.state.context(self.block, b, n)
        row_context = None
        if context is not None and context.row_clusters is not None:
            ids = context.row_clusters.reshape(b, 1, n).expand(b, heads, n).reshape(-1)
            row_context = TokenContext(ids, context.n_clusters)
        q = self._quantize(self.q_quantizer, q, row_context)
        k = self._quantize(self.k_quantizer, k, row_context)
        scores = (q @ k.transpose(-1, -2)) * attn.scale
        probs = scores.softmax(dim=-1)
        self.state.saliency[self.block] = probs.sum(dim=-2).mean(dim=1)  # (B, N): mass each token receives
        probs = self._quantize(self.p_quantizer, probs, row_context)
        v = self._quantize(self.v_quantizer, v.transpose(-1, -2), None).transpose(-1, -2)
        out = (probs @ v).transpose(1, 2).reshape(b, n, -1)
        out = attn.to_out[0](out)
        return attn.to_out[1](out)


def _kmeans_hook(state: QuantState, block: int, config: SemanticDialectConfig) -> Callable[..., None]:
    def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
        hidden = args[0] if args else kwargs["hidden_states"]
        from sklearn.cluster import KMeans

        b = hidden.shape[0]
        ids = []
        for video in range(b):
            labels = KMeans(
                config.seda_clusters, n_init=1, max_iter=20, random_state=config.seed
            ).fit_predict(hidden[video].detach().float().numpy())
            ids.append(torch.from_numpy(labels).long() + video * config.seda_clusters)
        state.kmeans[block] = (torch.cat(ids), b * config.seda_clusters)

    return hook


def fake_quantize_dit_(
    model: nn.Module,
    config: SemanticDialectConfig | FormatConfig,
    filter_fn: Callable[[nn.Module, str], bool] | None = None,
) -> None:
    """Fake-quantize ``model`` in place (returns None, like every in-place ``..._`` verb here).

    Parameters
    ----------
    model : nn.Module
        A DiT whose linear layers (and diffusers ``Attention`` modules, if any) are quantized.
    config : SemanticDialectConfig or FormatConfig
        Ours, or a baseline format (INT4 / MXFP4 / NVFP4 / BlockDialect).
    filter_fn : callable, optional
        ``filter_fn(module, fully_qualified_name) -> bool``; default: every ``nn.Linear``.
    """
    if not isinstance(config, (SemanticDialectConfig, FormatConfig)):
        raise TypeError(
            f"config must be a SemanticDialectConfig or FormatConfig, got {type(config).__name__}"
        )
    state = QuantState(config)
    if isinstance(config, SemanticDialectConfig):
        state.generator.manual_seed(config.seed)
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and (filter_fn is None or filter_fn(module, name))
    ]
    if not targets:
        raise ValueError("model has no nn.Linear layer accepted by filter_fn: nothing to quantize")
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, FakeQuantLinear(module, state, name))
    needs_saliency = isinstance(config, SemanticDialectConfig) and config.decomposition_ratio > 0
    install = config.quantize_attention or needs_saliency
    for name, module in model.named_modules():
        if install and hasattr(module, "set_processor") and hasattr(module, "to_q"):
            match = _BLOCK_INDEX.search(name)
            module.set_processor(QuantAttnProcessor(state, int(match.group(1)) if match else None, name))
    if isinstance(config, SemanticDialectConfig) and config.seda and config.seda_clustering == "kmeans":
        blocks = getattr(model, "transformer_blocks", None)
        if blocks is None:
            raise ValueError("seda_clustering='kmeans' needs model.transformer_blocks (block inputs)")
        for index, block in enumerate(blocks):
            block.register_forward_pre_hook(_kmeans_hook(state, index, config), with_kwargs=True)
    model._semanticdialect_state = state  # type: ignore[attr-defined]


def quantize_(
    model: nn.Module,
    config: SemanticDialectConfig | FormatConfig,
    filter_fn: Callable[[nn.Module, str], bool] | None = None,
) -> nn.Module:
    """Deprecated alias of :func:`fake_quantize_dit_` that returns ``model`` (it looked like torchao's
    ``quantize_``, which returns None and rejects this config)."""
    warn_renamed("semanticdialect.quantize_", "fake_quantize_dit_", "torchao's quantize_ is a different verb")
    fake_quantize_dit_(model, config, filter_fn)
    return model


def temporal_report(model: nn.Module) -> dict[str, dict[str, list[float]]]:
    """Per recorded layer: mean relative error per frame and dialect disagreement per frame pair.

    Turn recording on with ``model._semanticdialect_state.record = True`` before the forward passes.
    """
    state = getattr(model, "_semanticdialect_state", None)
    if state is None:
        raise ValueError("model was not quantized with fake_quantize_dit_ (no _semanticdialect_state)")
    report: dict[str, dict[str, list[float]]] = {}
    for name, record in state.records.items():
        entry = {"frame_error": (record.frame_error / record.calls).tolist()}
        if record.disagreement is not None:
            entry["format_disagreement"] = (record.disagreement / record.calls).tolist()
        report[name] = entry
    return report
