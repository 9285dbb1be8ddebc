"""Baselines of the StyleRoute experiment, all on the same prior and step count (all re-implemented).

- :func:`global_sdedit` -- SDEdit (Meng et al., ICLR 2022): one start time t0 for every pixel.
- :func:`styleid_like` -- StyleID (Chung et al., CVPR 2024) re-implemented on our prior: DDIM-invert
  content and style, swap the self-attention keys/values for the style's with query preservation gamma and
  temperature T, and start from the AdaIN of the content latent toward the style latent.
- :func:`region_adain_lab` -- regional statistics transfer: every content superpixel takes the Lab mean/std
  of its best-matching style superpixel (nearest in mean Lab).
- :func:`global_adain_lab` -- whole-image Lab AdaIN (a colour transfer; the naive control).
- :func:`gatys_random` -- Gatys et al. (CVPR 2016) optimisation with a fixed random conv bank in place of
  VGG (no pretrained weights offline), seeded differently from both the guidance and the evaluation banks.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.methods.styleroute.attention import InjectionController
from neurips26.methods.styleroute.guidance import GuidanceBank, adain, gram_matrices
from neurips26.methods.styleroute.pipeline import _crop_like, to_images, to_tensor
from neurips26.methods.styleroute.sampler import Denoiser, ddim_invert, sdedit

GATYS_BANK_SEED = 4_242


def global_sdedit(
    den: Denoiser, contents: np.ndarray, strength: float, steps: int, generator: torch.Generator
) -> np.ndarray:
    """SDEdit of a batch ``(B, H, W, 3)`` at start time ``strength`` (fraction of T): ``(B, H, W, 3)``."""
    c = to_tensor(contents)
    noise = torch.randn(c.shape, generator=generator)
    with torch.no_grad():
        return to_images(sdedit(den, c, strength, steps, noise))


@torch.no_grad()
def styleid_like(
    den: Denoiser,
    contents: np.ndarray,
    style: np.ndarray,
    gamma: float = 0.75,
    temperature: float = 1.5,
    t_start: float = 0.45,
    steps: int = 20,
) -> np.ndarray:
    """StyleID-like stylisation (re-implemented): KV injection + query preservation + init AdaIN.

    Deterministic (DDIM inversion, eta = 0); needs a denoiser with diffusers ``Attention`` modules.
    """
    c = to_tensor(contents)
    s = _crop_like(to_tensor(style[None]), c).expand_as(c)
    with InjectionController(den.unet, gamma, temperature) as ctl:
        latents = {}
        for role, image in (("style", s), ("content", c)):
            ctl.set(mode="record", role=role)
            latents[role], ts = ddim_invert(den, image, t_start, steps, on_step=lambda t: ctl.set(timestep=t))
        x = adain(latents["content"], latents["style"])  # StyleID's initial-latent AdaIN
        ctl.set(mode="inject", weights=None)
        for t in ts:
            ctl.set(timestep=int(t))
            x = den.scheduler.step(den(x, t), t, x).prev_sample
    return to_images(x)


def _lab(images: np.ndarray) -> np.ndarray:
    from skimage.color import rgb2lab

    return rgb2lab(np.clip(images, 0, 1))


def _rgb(lab: np.ndarray) -> np.ndarray:
    from skimage.color import lab2rgb

    return np.clip(lab2rgb(lab), 0, 1)


def _blend(stylised_lab: np.ndarray, content_lab: np.ndarray, alpha: float) -> np.ndarray:
    """AdaIN's content-style trade-off (Huang & Belongie, Sec. 7): ``alpha`` of the stylised statistics,
    the rest the content's, blended in Lab (the space the statistics are transferred in)."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    return _rgb(alpha * stylised_lab + (1 - alpha) * content_lab).astype(np.float32)


def global_adain_lab(content: np.ndarray, style: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """Whole-image AdaIN in Lab (per-channel mean/std of the content set to the style's); ``alpha`` < 1
    keeps part of the content's statistics (the strength knob swept like the other systems')."""
    cl, sl = _lab(content), _lab(style)
    out = (cl - cl.mean((0, 1))) / (cl.std((0, 1)) + 1e-6) * sl.std((0, 1)) + sl.mean((0, 1))
    return _blend(out, cl, alpha)


def region_adain_lab(
    content: np.ndarray,
    style: np.ndarray,
    n_segments: int = 48,
    compactness: float = 10.0,
    alpha: float = 1.0,
) -> np.ndarray:
    """Region-matching AdaIN in Lab over superpixels (re-implemented regional statistics transfer);
    ``alpha`` < 1 keeps part of the content's statistics (see ``global_adain_lab``)."""
    from skimage.segmentation import slic

    cl, sl = _lab(content), _lab(style)
    cseg = slic(content, n_segments=n_segments, compactness=compactness, start_label=0, channel_axis=2)
    sseg = slic(style, n_segments=n_segments, compactness=compactness, start_label=0, channel_axis=2)

    def stats(lab: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = seg.max() + 1
        flat, counts = seg.reshape(-1), np.maximum(np.bincount(seg.reshape(-1), minlength=n), 1)[:, None]
        x = lab.reshape(-1, 3)
        mean = np.stack([np.bincount(flat, x[:, k], minlength=n) for k in range(3)], 1) / counts
        sq = np.stack([np.bincount(flat, x[:, k] ** 2, minlength=n) for k in range(3)], 1) / counts
        return mean, np.sqrt(np.maximum(sq - mean**2, 1e-6))

    cm, cs = stats(cl, cseg)
    sm, ss = stats(sl, sseg)
    # best-matching style region: nearest mean in Lab after global standardisation of both sets
    z = lambda m: (m - m.mean(0)) / (m.std(0) + 1e-6)  # noqa: E731
    match = ((z(cm)[:, None] - z(sm)[None]) ** 2).sum(2).argmin(1)
    out = (cl - cm[cseg]) / cs[cseg] * ss[match][cseg] + sm[match][cseg]
    return _blend(out, cl, alpha)


def gatys_random(
    content: np.ndarray,
    style: np.ndarray,
    style_weight: float = 10.0,
    steps: int = 60,
    lr: float = 0.03,
    seed: int = 0,
) -> np.ndarray:
    """Gatys-style optimisation of the pixels with random conv features (re-implemented, see module doc)."""
    bank = GuidanceBank(seed=GATYS_BANK_SEED + seed)
    c, s = to_tensor(content[None]), to_tensor(style[None])
    with torch.no_grad():
        c_feats = bank.features(c)
        s_grams = [gram_matrices(f) for f in bank.features(s)]
    x = c.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=lr)
    for _ in range(steps):
        feats = bank.features(x)
        content_term = F.mse_loss(feats[1], c_feats[1])
        style_term = sum(
            ((gram_matrices(f) - g) ** 2).sum() / (g**2).sum() for f, g in zip(feats, s_grams, strict=True)
        )
        loss = content_term + style_weight * style_term
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            x.clamp_(-1, 1)
    return to_images(x)[0]
