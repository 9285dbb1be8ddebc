"""The single-image diffusion prior: a SinDDM-like dilated-conv epsilon-predictor trained on one style.

StyleRoute runs on any diffusers-style denoiser. Offline there are no pretrained diffusion weights, so
the backbone of the experiment is one small prior per style image, trained here on random crops of that
image (SinDDM, Kulikov et al., ICML 2023, trains a single-image model the same way; the architecture is
ours). It is a diffusers ``ModelMixin``/``ConfigMixin``: ``save_pretrained``/``from_pretrained`` work and
its one self-attention block is a diffusers ``Attention`` whose processor can be swapped (the
StyleID-like key/value injection needs that).

Shapes: ``forward(sample (B, 3, H, W), timestep () or (B,)) -> PriorOutput(sample (B, 3, H, W))``,
H and W multiples of 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.attention_processor import Attention, AttnProcessor
from diffusers.models.modeling_utils import ModelMixin
from diffusers.utils import BaseOutput
from torch import nn


@dataclass
class PriorOutput(BaseOutput):
    """The predicted noise, shaped like the input sample."""

    sample: torch.Tensor


def timestep_embedding(timesteps: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of integer timesteps (Ho et al. 2020): ``(B,) -> (B, dim)``."""
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=torch.float32) / half)
    args = timesteps.float()[:, None] * freqs[None].to(timesteps.device)
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class _DilatedBlock(nn.Module):
    """GroupNorm -> SiLU -> dilated 3x3 conv, time scale/shift, residual."""

    def __init__(self, channels: int, dilation: int, temb_dim: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(8, channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)
        self.time = nn.Linear(temb_dim, 2 * channels)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        scale, shift = self.time(temb)[:, :, None, None].chunk(2, dim=1)
        h = self.norm(x) * (1 + scale) + shift
        return x + self.conv(F.silu(h))


class SingleImagePrior(ModelMixin, ConfigMixin):
    """SinDDM-like single-image epsilon-predictor (dilated convs + one attention block at 1/4 scale).

    Parameters
    ----------
    channels: int, default 32
        Feature width (ours: ~60k parameters in all, as the issue asks).
    dilations: tuple of int, default (1, 2, 4, 2, 1)
        Dilation of each residual block; receptive field ~41 px, so the prior models texture, not layout.
    attention_heads: int, default 2
        Heads of the attention block at 1/4 resolution (the StyleID-like injection point).
    temb_dim: int, default 32
        Width of the timestep embedding.
    num_train_timesteps: int, default 1000
        Length of the noise schedule it was trained on (stored so a scheduler can be rebuilt).
    """

    @register_to_config
    def __init__(
        self,
        channels: int = 32,
        dilations: tuple[int, ...] = (1, 2, 4, 2, 1),
        attention_heads: int = 2,
        temb_dim: int = 32,
        num_train_timesteps: int = 1000,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        if channels % 8 or channels % attention_heads:
            raise ValueError(f"channels must be a multiple of 8 and of attention_heads, got {channels}")
        self.temb = nn.Sequential(nn.Linear(temb_dim, temb_dim), nn.SiLU(), nn.Linear(temb_dim, temb_dim))
        self.conv_in = nn.Conv2d(in_channels, channels, 3, padding=1)
        half = len(dilations) // 2
        self.down_blocks = nn.ModuleList(_DilatedBlock(channels, d, temb_dim) for d in dilations[:half])
        self.up_blocks = nn.ModuleList(_DilatedBlock(channels, d, temb_dim) for d in dilations[half:])
        self.attn_norm = nn.GroupNorm(8, channels)
        self.attention = Attention(
            channels,
            heads=attention_heads,
            dim_head=channels // attention_heads,
            bias=True,
            processor=AttnProcessor(),
        )
        self.norm_out = nn.GroupNorm(8, channels)
        self.conv_out = nn.Conv2d(channels, in_channels, 3, padding=1)
        nn.init.zeros_(self.conv_out.weight)
        nn.init.zeros_(self.conv_out.bias)

    @property
    def in_channels(self) -> int:
        return int(self.config.in_channels)

    def forward(
        self, sample: torch.Tensor, timestep: torch.Tensor | int, return_dict: bool = True
    ) -> PriorOutput | tuple[torch.Tensor]:
        """Predict the noise in ``sample`` at ``timestep``: ``(B, 3, H, W) -> (B, 3, H, W)``."""
        if sample.ndim != 4 or sample.shape[-1] % 4 or sample.shape[-2] % 4:
            raise ValueError(
                f"sample must be (B, C, H, W) with H, W multiples of 4, got {tuple(sample.shape)}"
            )
        t = torch.as_tensor(timestep, device=sample.device).reshape(-1)
        t = t.expand(sample.shape[0]) if t.numel() == 1 else t
        temb = self.temb(timestep_embedding(t, self.config.temb_dim).to(sample.dtype))
        h = self.conv_in(sample)
        for block in self.down_blocks:
            h = block(h, temb)
        # one self-attention at 1/4 scale: global context for the texture statistics
        low = F.avg_pool2d(self.attn_norm(h), 4)
        attended = self.attention(low)
        h = h + F.interpolate(attended - low, scale_factor=4, mode="nearest")
        for block in self.up_blocks:
            h = block(h, temb)
        out = self.conv_out(F.silu(self.norm_out(h)))
        return PriorOutput(sample=out) if return_dict else (out,)
