"""Evaluation metrics that share no signal with routing (no pretrained network anywhere).

Structure (against the content): luminance SSIM inside hand-drawn object masks, edge-F1 of Canny edges at
sigma 3 (the router works at 1-px gradients and SLIC regions), and a self-similarity distance (STROTSS-like,
Kolkin et al. 2019). Style (against the style image): sliced Wasserstein distance between 7x7 Lab patch
distributions (POT's ``ot.sliced_wasserstein_distance``), the Gram distance of an *evaluation* random conv
bank with another seed and architecture than the guidance bank, and HistoGAN's RGB-uv histogram Hellinger
distance (Afifi et al., CVPR 2021). Images are float ``(H, W, 3)`` in [0, 1].
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

EVAL_BANK_SEED = 9_173


def _lab_patches(image: np.ndarray, patch: int, mask: np.ndarray | None) -> np.ndarray:
    from skimage.color import rgb2lab

    lab = rgb2lab(np.clip(image, 0, 1)).astype(np.float32) / np.array([100.0, 128.0, 128.0], np.float32)
    tensor = torch.from_numpy(lab).permute(2, 0, 1)[None]
    cols = F.unfold(tensor, patch)[0].T.numpy()  # (num_patches, 3 * patch^2)
    if mask is not None:
        half = patch // 2
        centre = mask[half : mask.shape[0] - half, half : mask.shape[1] - half].reshape(-1)
        cols = cols[centre]
    return cols


class StyleReference:
    """A style image's evaluation statistics, computed once: Lab patches, evaluation-bank Grams, histogram.

    Every style metric accepts either the style image or this (the experiment scores many outputs
    against one style).
    """

    def __init__(self, style: np.ndarray, patch: int = 7, max_patches: int = 1_000, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        patches = _lab_patches(style, patch, None)
        self.patch = patch
        self.patches = patches[rng.choice(len(patches), min(len(patches), max_patches), replace=False)]
        self.image = style
        with torch.no_grad():
            self.grams = [gram(f) for f in _eval_bank().features(_to_tensor(style))]
        self.hist = rgb_uv_histogram(style)


def _reference(style: np.ndarray | StyleReference) -> StyleReference:
    return style if isinstance(style, StyleReference) else StyleReference(style)


def _to_tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float()


def patch_swd(
    image: np.ndarray,
    style: np.ndarray | StyleReference,
    patch: int = 7,
    mask: np.ndarray | None = None,
    projections: int = 64,
    max_patches: int = 1_000,
    seed: int = 0,
) -> float:
    """Sliced Wasserstein distance between 7x7 Lab patches of ``image`` (inside ``mask``) and ``style``."""
    import ot

    rng = np.random.default_rng(seed)
    a = _lab_patches(image, patch, mask)
    b = _reference(style).patches
    if len(a) == 0:
        return float("nan")
    a = a[rng.choice(len(a), min(len(a), max_patches), replace=False)]
    return float(ot.sliced_wasserstein_distance(a, b, n_projections=projections, seed=seed))


class EvaluationBank(nn.Module):
    """A fixed random conv bank used only for evaluation: strided 4x4 convs, widths 24/48/96, ReLU.

    The guidance bank (``guidance.GuidanceBank``) has 3x3/5x5 convs, avg pooling, tanh and another seed,
    so the evaluation Gram never measures what guidance optimised.
    """

    def __init__(self, seed: int = EVAL_BANK_SEED) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        widths = (3, 24, 48, 96)
        self.weights = [
            torch.randn((o, i, 4, 4), generator=generator) * (2.0 / (i * 16)) ** 0.5
            for i, o in itertools.pairwise(widths)
        ]

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        feats = []
        h = x * 2 - 1
        for w in self.weights:
            h = F.relu(F.conv2d(h, w, stride=2, padding=1))
            feats.append(h)
        return feats


def gram(features: torch.Tensor) -> torch.Tensor:
    """Gram matrices ``(B, C, H, W) -> (B, C, C)`` normalised by the number of positions."""
    b, c, h, w = features.shape
    flat = features.reshape(b, c, h * w)
    return flat @ flat.transpose(1, 2) / (h * w)


_EVAL_BANK: list[EvaluationBank] = []


def _eval_bank() -> EvaluationBank:
    if not _EVAL_BANK:
        _EVAL_BANK.append(EvaluationBank())
    return _EVAL_BANK[0]


def eval_gram_distance(image: np.ndarray, style: np.ndarray | StyleReference) -> float:
    """Relative Frobenius Gram distance in the evaluation bank, averaged over its layers."""
    with torch.no_grad():
        feats = _eval_bank().features(_to_tensor(image))
    targets = _reference(style).grams
    return float(
        np.mean(
            [(gram(a) - b).norm() / b.norm().clamp_min(1e-8) for a, b in zip(feats, targets, strict=True)]
        )
    )


def rgb_uv_histogram(image: np.ndarray, bins: int = 32, eps: float = 6.0 / 256) -> np.ndarray:
    """HistoGAN's RGB-uv histogram ``(3, bins, bins)``, intensity-weighted and normalised to sum 1."""
    rgb = np.clip(image.reshape(-1, 3).astype(np.float64), 0, 1) + eps
    weight = np.sqrt((rgb**2).sum(1))
    hist = []
    for c in range(3):
        others = [k for k in range(3) if k != c]
        u = np.log(rgb[:, c] / rgb[:, others[0]])
        v = np.log(rgb[:, c] / rgb[:, others[1]])
        h, _, _ = np.histogram2d(u, v, bins=bins, range=[[-3, 3], [-3, 3]], weights=weight)
        hist.append(h)
    out = np.stack(hist)
    return out / max(out.sum(), 1e-12)


def histogram_hellinger(image: np.ndarray, style: np.ndarray | StyleReference) -> float:
    """Hellinger distance between the RGB-uv histograms of ``image`` and ``style`` (0 = identical)."""
    p, q = rgb_uv_histogram(image), _reference(style).hist
    return float(np.sqrt(max(0.0, 1.0 - np.sqrt(p * q).sum())))


def masked_ssim(image: np.ndarray, content: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Luminance SSIM of ``image`` against ``content``, averaged inside ``mask`` (everywhere when None)."""
    from skimage.metrics import structural_similarity

    _, full = structural_similarity(content.mean(2), image.mean(2), data_range=1.0, full=True, win_size=7)
    return float(full[mask].mean() if mask is not None and mask.any() else full.mean())


def edge_f1(image: np.ndarray, content: np.ndarray, sigma: float = 3.0, tolerance: int = 1) -> float:
    """F1 of Canny edges (``sigma`` 3: a scale routing does not use) with a ``tolerance``-px match."""
    from scipy.ndimage import binary_dilation
    from skimage.feature import canny

    ours, ref = canny(image.mean(2), sigma=sigma), canny(content.mean(2), sigma=sigma)
    if not ref.any():
        return float("nan")
    structure = np.ones((2 * tolerance + 1,) * 2, bool)
    precision = (ours & binary_dilation(ref, structure)).sum() / max(ours.sum(), 1)
    recall = (ref & binary_dilation(ours, structure)).sum() / ref.sum()
    return float(0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall))


def self_similarity_distance(image: np.ndarray, content: np.ndarray, size: int = 16) -> float:
    """Mean |difference| of cosine self-similarity matrices of 3x3 Lab neighbourhoods at ``size`` px."""
    from skimage.color import rgb2lab

    def matrix(x: np.ndarray) -> torch.Tensor:
        lab = torch.from_numpy(rgb2lab(np.clip(x, 0, 1)).astype(np.float32)).permute(2, 0, 1)[None]
        small = F.adaptive_avg_pool2d(lab, size)
        feats = F.unfold(small, 3, padding=1)[0].T  # (size^2, 27)
        feats = feats - feats.mean(0, keepdim=True)
        feats = F.normalize(feats, dim=1)
        return feats @ feats.T

    return float((matrix(image) - matrix(content)).abs().mean() / 2)


def structure_score(image: np.ndarray, content: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """SSIM in the object mask, edge-F1 at sigma 3, 1 - self-similarity distance, and their mean."""
    parts = {
        "ssim_object": masked_ssim(image, content, mask),
        "edge_f1": edge_f1(image, content),
        "self_similarity": 1.0 - self_similarity_distance(image, content),
    }
    parts["structure"] = float(np.mean(list(parts.values())))
    return parts


def hypervolume_2d(distance: np.ndarray, score: np.ndarray, ref_distance: float = 1.0) -> float:
    """Area dominated by points (minimise ``distance``, maximise ``score``) inside [0, ref] x [0, 1].

    Each point (d, s) dominates the rectangle [d, ref] x [0, s]; the union's area is returned.
    """
    d = np.clip(np.asarray(distance, float), 0, ref_distance)
    s = np.clip(np.asarray(score, float), 0, 1)
    if not (np.isfinite(d).all() and np.isfinite(s).all()):
        return float("nan")
    order = np.argsort(d)
    area, best = 0.0, 0.0
    edges = np.append(d[order], ref_distance)
    for i, k in enumerate(order):
        best = max(best, s[k])
        area += best * (edges[i + 1] - edges[i])
    return float(area)
