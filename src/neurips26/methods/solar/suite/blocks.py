"""Level 2: fused blocks (KernelBench form), each with its hand MAC formula."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LinearGELU(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x))


class SwiGLU(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w3 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class GQAttention(nn.Module):
    """Grouped-query causal attention: 8 query heads share 2 key/value heads."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


class ConvBNReLU(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class ResidualNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.fc(x))


class RoPE(nn.Module):
    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        rotated = torch.cat((-x2, x1), dim=-1)
        return x * cos + rotated * sin


def _taps(size: int, k: int = 3, pad: int = 1) -> int:
    return sum(1 for p in range(size) for r in range(k) if 0 <= p + r - pad < size)


PROGRAMS = [
    dict(
        name="linear_gelu",
        model=LinearGELU,
        init=(512, 2048),
        inputs=lambda: [torch.randn(256, 512)],
        macs=256 * 512 * 2048,
    ),
    dict(
        name="swiglu_mlp",
        model=SwiGLU,
        init=(512, 1376),
        inputs=lambda: [torch.randn(256, 512)],
        macs=3 * 256 * 512 * 1376,
    ),
    dict(
        name="causal_attention_block",
        model=CausalSelfAttention,
        init=(256, 4),
        inputs=lambda: [torch.randn(4, 128, 256)],
        macs=4 * 128 * 256 * 768 + 4 * 4 * (128 * 129 // 2) * 2 * 64 + 4 * 128 * 256 * 256,
    ),
    dict(
        name="gqa_causal",
        model=GQAttention,
        inputs=lambda: [torch.randn(2, 8, 128, 64), torch.randn(2, 2, 128, 64), torch.randn(2, 2, 128, 64)],
        macs=2 * 8 * (128 * 129 // 2) * 2 * 64,
    ),
    dict(
        name="conv_bn_relu",
        model=ConvBNReLU,
        init=(16, 32),
        inputs=lambda: [torch.randn(8, 16, 32, 32)],
        macs=8 * 32 * 16 * _taps(32) ** 2,
    ),
    dict(
        name="residual_norm",
        model=ResidualNorm,
        init=(512,),
        inputs=lambda: [torch.randn(512, 512)],
        macs=512 * 512 * 512,
    ),
    dict(
        name="rope",
        model=RoPE,
        inputs=lambda: [torch.randn(4, 8, 128, 64), torch.randn(128, 64), torch.randn(128, 64)],
        macs=0,
    ),
]
