"""``StyleRouteAttnProcessor``: StyleID's key/value injection (Chung et al., CVPR 2024) with per-token r.

A diffusers attention processor. In ``record`` mode it stores the (query, key, value) of the pass it sees
under ``(role, timestep)``; in ``inject`` mode, at token i with weight r_i,

    q_i <- r_i (gamma q_i^content + (1 - gamma) q_i) + (1 - r_i) q_i
    k_i <- r_i k_i^style + (1 - r_i) k_i,       v_i <- r_i v_i^style + (1 - r_i) v_i
    logits_ij <- logits_ij * (1 + r_i (T - 1))

so r = 0 reduces exactly to diffusers' ``AttnProcessor`` and r = 1 is StyleID's swap with query
preservation gamma and temperature T.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


class StyleRouteAttnProcessor:
    """Record-or-inject attention processor for self-attention of 4-D or token inputs.

    Attributes
    ----------
    mode: ``"off" | "record" | "inject"``.
    role: the name a ``record`` pass stores under (``"style"`` or ``"content"``).
    timestep: set by the caller before each denoiser call.
    weights: ``(B, H, W)`` or ``(B, N)`` per-token injection weights r (resized to the layer's tokens).
    """

    def __init__(self, gamma: float = 0.75, temperature: float = 1.5) -> None:
        self.gamma = float(gamma)
        self.temperature = float(temperature)
        self.mode = "off"
        self.role = "content"
        self.timestep = 0
        self.weights: torch.Tensor | None = None
        self.store: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def _lookup(self, role: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        keys = [t for (r, t) in self.store if r == role]
        if not keys:
            raise RuntimeError(f"StyleRouteAttnProcessor: nothing recorded for role {role!r}")
        nearest = min(keys, key=lambda t: abs(t - self.timestep))
        return self.store[(role, nearest)]

    def _token_weights(self, batch: int, tokens: int, grid: tuple[int, int] | None) -> torch.Tensor:
        if self.weights is None:
            return torch.ones(batch, tokens, 1)
        w = self.weights
        if w.ndim == 3 and grid is not None:
            w = F.interpolate(w[:, None].float(), size=grid, mode="area")[:, 0].reshape(w.shape[0], -1)
        if w.shape[-1] != tokens:
            raise ValueError(f"injection weights have {w.shape[-1]} tokens, the layer has {tokens}")
        return w.reshape(-1, tokens, 1).expand(batch, tokens, 1)

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        temb: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        grid = None
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            batch, channel, height, width = hidden_states.shape
            grid = (height, width)
            hidden_states = hidden_states.view(batch, channel, height * width).transpose(1, 2)
        batch, tokens, _ = hidden_states.shape
        attention_mask = attn.prepare_attention_mask(attention_mask, tokens, batch)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        query, key, value = attn.to_q(hidden_states), attn.to_k(context), attn.to_v(context)
        scale_logits = None
        if self.mode == "record":
            self.store[(self.role, int(self.timestep))] = (query.detach(), key.detach(), value.detach())
        elif self.mode == "inject":
            q_content, _, _ = self._lookup("content")
            _, k_style, v_style = self._lookup("style")
            w = self._token_weights(batch, tokens, grid).to(query.dtype)
            query = query + w * self.gamma * (q_content - query)
            key = key + w * (k_style - key)
            value = value + w * (v_style - value)
            scale_logits = 1.0 + w * (self.temperature - 1.0)  # (B, N, 1) per query token
        query, key, value = (attn.head_to_batch_dim(t) for t in (query, key, value))
        if scale_logits is None:
            probs = attn.get_attention_scores(query, key, attention_mask)
        else:
            heads = attn.heads
            logits = torch.bmm(query, key.transpose(1, 2)) * attn.scale
            logits = logits * scale_logits.repeat_interleave(heads, dim=0)
            if attention_mask is not None:
                logits = logits + attention_mask
            probs = logits.softmax(dim=-1).to(query.dtype)
        hidden_states = attn.batch_to_head_dim(torch.bmm(probs, value))
        hidden_states = attn.to_out[1](attn.to_out[0](hidden_states))
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch, channel, height, width)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states / attn.rescale_output_factor


def attention_modules(model: torch.nn.Module) -> list[Any]:
    """Every diffusers ``Attention`` module in ``model`` (those with a swappable processor)."""
    from diffusers.models.attention_processor import Attention

    return [m for m in model.modules() if isinstance(m, Attention)]


class InjectionController:
    """One :class:`StyleRouteAttnProcessor` per attention module of a denoiser, driven together.

    Use as a context manager: the processors are installed on entry and the originals restored on exit.
    """

    def __init__(self, model: torch.nn.Module, gamma: float = 0.75, temperature: float = 1.5) -> None:
        self.modules = attention_modules(model)
        if not self.modules:
            raise ValueError("the denoiser has no diffusers Attention module to inject into")
        self.processors = [StyleRouteAttnProcessor(gamma, temperature) for _ in self.modules]
        self.saved: list[Any] = []

    def set(self, **values: Any) -> None:
        """Set ``mode``, ``role``, ``timestep`` or ``weights`` on every processor."""
        for processor in self.processors:
            for name, value in values.items():
                setattr(processor, name, value)

    def __enter__(self) -> InjectionController:
        self.saved = [m.processor for m in self.modules]
        for m, p in zip(self.modules, self.processors, strict=True):
            m.set_processor(p)
        return self

    def __exit__(self, *exc: object) -> None:
        for m, p in zip(self.modules, self.saved, strict=True):
            m.set_processor(p)
