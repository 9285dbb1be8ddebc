"""Shared builders and naive oracles for the StyleRoute tests (tiny shapes, random weights, no files)."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.methods.styleroute import (
    SingleImagePrior,
    StyleRouteConfig,
    StyleRoutePipeline,
    make_scheduler,
)


def tiny_prior(seed: int = 0) -> SingleImagePrior:
    """A ~2k-parameter prior with a random (non-zero) output layer so its outputs depend on the input."""
    torch.manual_seed(seed)
    model = SingleImagePrior(channels=8, dilations=(1, 2), attention_heads=2, temb_dim=16)
    with torch.no_grad():
        model.conv_out.weight.normal_(0, 0.05)
    return model.eval()


def tiny_pipeline(**changes: object) -> StyleRoutePipeline:
    config = StyleRouteConfig(**{"num_inference_steps": 10, "n_segments": 12, **changes})
    return StyleRoutePipeline(tiny_prior(), make_scheduler(), config)


def images(seed: int = 0, size: int = 32, batch: int = 1) -> np.ndarray:
    """Smooth random images (B, size, size, 3) in [0, 1] with some edges."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = []
    for _ in range(batch):
        base = 0.5 + 0.3 * np.sin(2 * np.pi * (xx * rng.uniform(1, 3) + yy * rng.uniform(1, 3)))[..., None]
        block = (xx > rng.uniform(0.3, 0.7))[..., None] * rng.uniform(-0.3, 0.3, 3)
        out.append(np.clip(base * rng.uniform(0.6, 1.0, 3) + block, 0, 1))
    return np.stack(out).astype(np.float64)


def half_structure_half_texture(size: int = 48, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Left: a few strong straight edges (structure); right: fine random texture. Returns (image, right)."""
    rng = np.random.default_rng(seed)
    image = np.full((size, size, 3), 0.5)
    half = size // 2
    image[: size // 3, :half] = 0.9
    image[2 * size // 3 :, :half] = 0.1
    image[:, half // 2 : half // 2 + 2, :] = 0.0
    image[:, half:] = np.clip(0.5 + 0.25 * rng.standard_normal((size, size - half, 3)), 0, 1)
    right = np.zeros((size, size), bool)
    right[:, half:] = True
    return image, right


def naive_region_means(values: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    return np.array([values[labels == k].mean() if (labels == k).any() else 0.0 for k in range(n)])


def naive_projection(gs, gc, labels, region_r, threshold):
    out = gs.clone()
    for b in range(gs.shape[0]):
        for k in range(region_r.shape[1]):
            m = labels[b] == k
            if not m.any():
                continue
            s, c = gs[b][:, m], gc[b][:, m]
            dot, norm = (s * c).sum(), (c * c).sum()
            if dot < 0 and region_r[b, k] < threshold and norm > 0:
                out[b][:, m] = s - dot / norm * c
    return out


def naive_hypervolume(d: np.ndarray, s: np.ndarray, grid: int = 400) -> float:
    xs = (np.arange(grid) + 0.5) / grid
    dominated = (np.clip(d, 0, 1)[:, None, None] <= xs[None, :, None]) & (
        np.clip(s, 0, 1)[:, None, None] >= xs[None, None, :]
    )
    return float(dominated.any(0).mean())
