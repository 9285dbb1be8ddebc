"""SpRePE: Spherical Reflection Position Embedding -- a small ViT on equiangular spherical images.

The backbone is the same for every position embedding; only the embedding's hooks differ (additive
tokens, q/k transform, or attention bias), so the experiment compares position embeddings alone.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurips26.methods.sprepe.integration import PositionalSelfAttention, SphericalPositionEmbedding
from neurips26.methods.sprepe.spherical import equiangular_grid

__all__ = ["Block", "PatchEmbedding", "SphericalViT", "grid_patch_centres", "patch_centres"]


def patch_centres(height: int, width: int, patch_height: int, patch_width: int) -> Tensor:
    """Unit vectors of the centres of non-overlapping patches of an equiangular grid, row-major ``(T, 3)``."""
    if height % patch_height or width % patch_width:
        raise ValueError(
            f"patch size ({patch_height}, {patch_width}) must divide the grid ({height}, {width})"
        )
    lat, lon = equiangular_grid(height // patch_height, width // patch_width)
    phi, lam = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    xyz = np.stack((np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)), axis=-1)
    return torch.from_numpy(xyz.reshape(-1, 3)).float()


def grid_patch_centres(
    lat_deg: np.ndarray, lon_deg: np.ndarray, patch_height: int, patch_width: int
) -> Tensor:
    """Unit vectors ``(T, 3)`` of the patch centres of any (lat, lon) product grid, row-major.

    A patch's centre is the normalised mean of its points' unit vectors, so grids that include the poles
    or are not equally spaced (Gauss-Legendre) get sensible token positions.
    """
    height, width = len(lat_deg), len(lon_deg)
    if height % patch_height or width % patch_width:
        raise ValueError(
            f"patch size ({patch_height}, {patch_width}) must divide the grid ({height}, {width})"
        )
    phi, lam = np.meshgrid(np.deg2rad(lat_deg), np.deg2rad(lon_deg), indexing="ij")
    xyz = np.stack((np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)), axis=-1)
    blocks = xyz.reshape(height // patch_height, patch_height, width // patch_width, patch_width, 3)
    centres = blocks.mean(axis=(1, 3)).reshape(-1, 3)
    return torch.from_numpy(centres / np.linalg.norm(centres, axis=-1, keepdims=True)).float()


class Block(nn.Module):
    """Pre-norm transformer block: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, pe: SphericalPositionEmbedding) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = PositionalSelfAttention(dim, num_heads, pe)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: Tensor, xyz: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x), xyz)
        return x + self.mlp(self.norm2(x))


class PatchEmbedding(nn.Module):
    """A 3x3 convolutional stem (circular in longitude, zero-padded at the poles), then strided patches.

    The small stem lets a tiny ViT learn strokes from ~1,000 digits in a few epochs; with longitude wrapped
    it is itself seam-consistent, so the seam stratum tests the position embedding, not the stem.
    """

    def __init__(
        self, dim: int, patch_height: int, patch_width: int, stem_channels: int, in_channels: int = 1
    ) -> None:
        super().__init__()
        self.stem = nn.Conv2d(in_channels, stem_channels, kernel_size=3)
        self.act = nn.GELU()
        self.patches = nn.Conv2d(
            stem_channels, dim, kernel_size=(patch_height, patch_width), stride=(patch_height, patch_width)
        )

    def forward(self, images: Tensor) -> Tensor:
        padded = F.pad(F.pad(images, (1, 1, 0, 0), mode="circular"), (0, 0, 1, 1))
        return self.patches(self.act(self.stem(padded)))


class SphericalViT(nn.Module):
    """A small ViT classifier for ``(B, 1, H, W)`` equiangular images with a pluggable position embedding.

    Patches are embedded by :class:`PatchEmbedding`; tokens sit at the patch centres. The one position
    embedding module is shared by all layers (as RoPE usually is). Max-pooled tokens feed a linear head
    (ours: most tokens are empty background; in a short check mean pooling trained no better).
    """

    def __init__(
        self,
        position_embedding: SphericalPositionEmbedding,
        *,
        height: int,
        width: int,
        patch_height: int,
        patch_width: int,
        dim: int,
        depth: int,
        num_heads: int,
        num_classes: int,
        mlp_ratio: float = 2.0,
        stem_channels: int = 8,
    ) -> None:
        super().__init__()
        self.register_buffer("token_xyz", patch_centres(height, width, patch_height, patch_width))
        self.patch_embed = PatchEmbedding(dim, patch_height, patch_width, stem_channels)
        self.position_embedding = position_embedding
        self.blocks = nn.ModuleList(
            Block(dim, num_heads, mlp_ratio, position_embedding) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images: Tensor) -> Tensor:
        tokens = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, T, dim), row-major patches
        xyz = self.token_xyz
        tokens = self.position_embedding.embed_tokens(tokens, xyz)
        for block in self.blocks:
            tokens = block(tokens, xyz)
        return self.head(self.norm(tokens).amax(dim=1))
