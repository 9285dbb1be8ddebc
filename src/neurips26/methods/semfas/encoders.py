"""The shared per-modality encoders of the experiment: fixed image descriptors + a trainable MLP.

Every system of the experiment (SEM-FAS, its ablations and all baselines) gets the *same* encoders:
a fixed, generic descriptor of each modality's image (pooled intensity, local contrast, a radial
power spectrum; no attack-specific feature) followed by a trainable two-layer MLP. Fixed descriptors
keep the whole default profile within a few CPU minutes (see the README); SEM-FAS itself accepts any
``nn.Module`` encoder, e.g. a CNN on raw images.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from torch import nn

SPECTRUM_BANDS = 6


def _pool(images: np.ndarray, cells: int) -> np.ndarray:
    n, size, _ = images.shape
    step = size // cells
    return (
        images[:, : cells * step, : cells * step]
        .reshape(n, cells, step, cells, step)
        .mean((2, 4))
        .reshape(n, -1)
    )


def _radial_spectrum(images: np.ndarray) -> np.ndarray:
    size = images.shape[-1]
    power = np.abs(np.fft.rfft2(images - images.mean((1, 2), keepdims=True))) ** 2
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    radius = np.sqrt(fx**2 + fy**2)
    edges = np.geomspace(1.0 / size, 0.75, SPECTRUM_BANDS + 1)
    bands = [power[:, (radius >= lo) & (radius < hi)].mean(1) for lo, hi in itertools.pairwise(edges)]
    return np.log1p(np.stack(bands, 1) * 1e-2)


def image_descriptor(images: np.ndarray) -> np.ndarray:
    """A generic descriptor of single-channel images [N, S, S] -> [N, 88].

    8x8 pooled intensity (64), 4x4 pooled local contrast |I - blur(I)| (16), radial log power in
    ``SPECTRUM_BANDS`` bands (6), global mean and std (2).
    """
    if images.ndim != 3:
        raise ValueError(f"images must have shape [N, S, S], got {images.shape}")
    padded = np.pad(images, ((0, 0), (1, 1), (1, 1)), mode="edge")
    blurred = (
        sum(padded[:, i : i + images.shape[1], j : j + images.shape[2]] for i in range(3) for j in range(3))
        / 9
    )
    contrast = np.abs(images - blurred)
    return np.concatenate(
        [
            _pool(images, 8),
            _pool(contrast, 4) * 4.0,
            _radial_spectrum(images),
            images.mean((1, 2))[:, None],
            images.std((1, 2))[:, None],
        ],
        1,
    ).astype(np.float32)


def sensor_descriptors(rgb: np.ndarray, depth: np.ndarray, ir: np.ndarray) -> dict[str, np.ndarray]:
    """Descriptors of each modality: rgb [N, 3, S, S] -> [N, 120], depth and ir [N, 1, S, S] -> [N, 88].

    RGB: the luminance descriptor plus 4x4 pooled chroma (r - g, b - g).
    """
    luminance = rgb.mean(1)
    chroma = np.concatenate([_pool(rgb[:, 0] - rgb[:, 1], 4), _pool(rgb[:, 2] - rgb[:, 1], 4)], 1) * 4.0
    return {
        "rgb": np.concatenate([image_descriptor(luminance), chroma.astype(np.float32)], 1),
        "depth": image_descriptor(depth[:, 0]),
        "ir": image_descriptor(ir[:, 0]),
    }


class MLPEncoder(nn.Module):
    """A two-layer MLP encoder ``[B, F_in] -> [B, hidden]`` (GELU, dropout).

    Parameters
    ----------
    in_features : int
    hidden : int, default 32
    dropout : float, default 0.1
    """

    def __init__(self, in_features: int, hidden: int = 32, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.GELU(),
        )
        self.out_features = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_encoders(
    in_features: dict[str, int], hidden: int = 32, dropout: float = 0.1
) -> dict[str, nn.Module]:
    """One :class:`MLPEncoder` per modality."""
    return {name: MLPEncoder(size, hidden, dropout) for name, size in in_features.items()}
