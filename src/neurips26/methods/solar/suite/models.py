"""Level 3: small models (KernelBench form), each with its hand MAC formula."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.methods.solar.suite.blocks import CausalSelfAttention


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, ctx: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(ctx, d))
        self.blocks = nn.ModuleList([GPTBlock(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class TinyViT(nn.Module):
    def __init__(self, d: int, heads: int, layers: int, patch: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, stride=patch)
        self.blocks = nn.ModuleList([GPTBlock(d, heads) for _ in range(layers)])
        self.head = nn.Linear(d, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.embed(img).flatten(2).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


class ResBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class TinyResNet(nn.Module):
    def __init__(self, c: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.block1, self.block2 = ResBlock(c), ResBlock(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(F.max_pool2d(self.block1(F.relu(self.stem(x))), 2))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, d: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok1, self.tok2 = nn.Linear(tokens, 2 * tokens), nn.Linear(2 * tokens, tokens)
        self.ch1, self.ch2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x).transpose(1, 2)
        x = x + self.tok2(F.gelu(self.tok1(y))).transpose(1, 2)
        return x + self.ch2(F.gelu(self.ch1(self.ln2(x))))


def _gpt_block_macs(b: int, t: int, d: int, heads: int) -> int:
    return (
        b * t * d * 3 * d
        + b * heads * (t * (t + 1) // 2) * 2 * (d // heads)
        + b * t * d * d
        + 2 * b * t * d * 4 * d
    )


def _taps(size: int) -> int:
    return sum(1 for p in range(size) for r in range(3) if 0 <= p + r - 1 < size)


PROGRAMS = [
    dict(
        name="tiny_gpt",
        model=TinyGPT,
        init=(512, 128, 4, 2, 128),
        inputs=lambda: [torch.randint(0, 512, (2, 128))],
        macs=2 * _gpt_block_macs(2, 128, 128, 4) + 2 * 128 * 128 * 512,
    ),
    dict(
        name="tiny_vit",
        model=TinyViT,
        init=(128, 4, 2, 8, 10),
        inputs=lambda: [torch.randn(2, 3, 64, 64)],
        macs=2 * 128 * 3 * 64 * 64 + 2 * _gpt_block_macs(2, 64, 128, 4) + 2 * 128 * 10,
    ),
    dict(
        name="tiny_resnet",
        model=TinyResNet,
        init=(32, 10),
        inputs=lambda: [torch.randn(4, 3, 32, 32)],
        macs=4 * 32 * 3 * _taps(32) ** 2
        + 2 * 4 * 32 * 32 * _taps(32) ** 2
        + 2 * 4 * 32 * 32 * _taps(16) ** 2
        + 4 * 32 * 10,
    ),
    dict(
        name="mlp_mixer_block",
        model=MixerBlock,
        init=(64, 128),
        inputs=lambda: [torch.randn(4, 64, 128)],
        macs=2 * 4 * 128 * 64 * 128 + 2 * 4 * 64 * 128 * 512,
    ),
]
