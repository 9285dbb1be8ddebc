"""Level 1: single operators (KernelBench form), each with its hand MAC formula."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MatMul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class Linear(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Conv(nn.Module):
    def __init__(
        self, dims: int, c_in: int, c_out: int, k: int, stride: int = 1, padding: int = 0, groups: int = 1
    ) -> None:
        super().__init__()
        cls = {1: nn.Conv1d, 2: nn.Conv2d}[dims]
        self.conv = cls(c_in, c_out, k, stride=stride, padding=padding, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Unary(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        if kind == "layernorm":
            self.norm = nn.LayerNorm(1024)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "softmax":
            return torch.softmax(x, dim=-1)
        if self.kind == "layernorm":
            return self.norm(x)
        if self.kind == "rmsnorm":
            return F.rms_norm(x, (x.shape[-1],))
        if self.kind == "gelu":
            return F.gelu(x)
        if self.kind == "sum":
            return x.sum(dim=-1)
        if self.kind == "cumsum":
            return torch.cumsum(x, dim=-1)
        if self.kind == "maxpool":
            return F.max_pool2d(x, 2)
        raise ValueError(self.kind)


class Add(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class Embedding(nn.Module):
    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids)


class Attention(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def _valid_taps(size: int, k: int, stride: int, pad: int) -> int:
    """Number of (output position, kernel tap) pairs that read inside a padded 1-d input."""
    out = (size + 2 * pad - k) // stride + 1
    return sum(1 for p in range(out) for r in range(k) if 0 <= p * stride + r - pad < size)


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


B, H, T, D = 2, 8, 256, 64
PROGRAMS = [
    dict(name="gemm_square", model=MatMul, inputs=lambda: [_rand(512, 512), _rand(512, 512)], macs=512**3),
    dict(
        name="gemm_skinny",
        model=MatMul,
        inputs=lambda: [_rand(1024, 64), _rand(64, 1024)],
        macs=1024 * 64 * 1024,
    ),
    dict(name="gemv", model=MatMul, inputs=lambda: [_rand(2048, 2048), _rand(2048)], macs=2048 * 2048),
    dict(
        name="bmm",
        model=MatMul,
        inputs=lambda: [_rand(16, 128, 64), _rand(16, 64, 128)],
        macs=16 * 128 * 64 * 128,
    ),
    dict(
        name="linear",
        model=Linear,
        init=(1024, 1024),
        inputs=lambda: [_rand(256, 1024)],
        macs=256 * 1024 * 1024,
    ),
    dict(
        name="conv2d",
        model=Conv,
        init=(2, 16, 32, 3),
        inputs=lambda: [_rand(8, 16, 32, 32)],
        macs=8 * 32 * 16 * 9 * 30 * 30,
    ),
    dict(
        name="conv2d_padded",
        model=Conv,
        init=(2, 16, 32, 3, 1, 1),
        inputs=lambda: [_rand(8, 16, 32, 32)],
        macs=8 * 32 * 16 * _valid_taps(32, 3, 1, 1) ** 2,
    ),
    dict(
        name="conv2d_strided",
        model=Conv,
        init=(2, 8, 16, 5, 2, 0),
        inputs=lambda: [_rand(4, 8, 64, 64)],
        macs=4 * 16 * 8 * 25 * 30 * 30,
    ),
    dict(
        name="conv2d_depthwise",
        model=Conv,
        init=(2, 32, 32, 3, 1, 0, 32),
        inputs=lambda: [_rand(8, 32, 32, 32)],
        macs=8 * 32 * 9 * 30 * 30,
    ),
    dict(
        name="conv1d",
        model=Conv,
        init=(1, 32, 64, 5),
        inputs=lambda: [_rand(8, 32, 256)],
        macs=8 * 64 * 32 * 5 * 252,
    ),
    dict(name="softmax", model=Unary, init=("softmax",), inputs=lambda: [_rand(512, 1024)], macs=0),
    dict(name="layernorm", model=Unary, init=("layernorm",), inputs=lambda: [_rand(512, 1024)], macs=0),
    dict(name="rmsnorm", model=Unary, init=("rmsnorm",), inputs=lambda: [_rand(512, 1024)], macs=0),
    dict(name="gelu", model=Unary, init=("gelu",), inputs=lambda: [_rand(1024, 1024)], macs=0),
    dict(name="row_sum", model=Unary, init=("sum",), inputs=lambda: [_rand(1024, 1024)], macs=0),
    dict(name="cumsum", model=Unary, init=("cumsum",), inputs=lambda: [_rand(256, 1024)], macs=0),
    dict(name="maxpool2d", model=Unary, init=("maxpool",), inputs=lambda: [_rand(8, 16, 64, 64)], macs=0),
    dict(name="add", model=Add, inputs=lambda: [_rand(1024, 1024), _rand(1024, 1024)], macs=0),
    dict(
        name="embedding",
        model=Embedding,
        init=(8192, 256),
        inputs=lambda: [torch.randint(0, 8192, (64, 128))],
        macs=0,
    ),
    dict(
        name="sdpa_full",
        model=Attention,
        init=(False,),
        inputs=lambda: [_rand(B, H, T, D) for _ in range(3)],
        macs=B * H * T * T * 2 * D,
    ),
    dict(
        name="sdpa_causal",
        model=Attention,
        init=(True,),
        inputs=lambda: [_rand(B, H, T, D) for _ in range(3)],
        macs=B * H * (T * (T + 1) // 2) * 2 * D,
    ),
]
