"""Train, save, load and sanity-check the single-image priors (``neurips26 styleroute train-prior``).

The priors are the experiment's backbone (no pretrained diffusion weights exist offline). Each is trained
on random crops (flips, 90-degree rotations) of one style image with the simple diffusion objective
(Ho et al. 2020, Eq. 14, in the v form of Salimans & Ho 2022) on diffusers' ``DDPMScheduler`` noise
schedule, and saved with ``save_pretrained`` plus a card holding its steps, loss, time and sanity-gate result.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from diffusers import DDIMScheduler, DDPMScheduler

from neurips26.methods.styleroute.data import PAINTINGS, STYLES, load_style, painting_path
from neurips26.methods.styleroute.prior import SingleImagePrior

PRIORS_DIR = Path(__file__).with_name("priors")
SCHEDULE = {"num_train_timesteps": 1000, "beta_schedule": "linear", "beta_start": 1e-4, "beta_end": 0.02}
# ours: the priors predict v (Salimans & Ho 2022). Measured at 250 steps: an epsilon-predictor sampled to
# noise (its x0 error grows as 1/sqrt(alpha_bar) at high t), an x0-predictor replaced even a lightly noised
# photo by pure texture (SDEdit at t0 = 0.03 erased the content); v behaves like eps at low noise and like
# x0 at high noise
PREDICTION_TYPE = "v_prediction"


def make_scheduler() -> DDIMScheduler:
    """The DDIM scheduler the priors are sampled with (the training schedule, eta = 0)."""
    return DDIMScheduler(
        **SCHEDULE, clip_sample=False, set_alpha_to_one=True, prediction_type=PREDICTION_TYPE
    )


def random_crops(image: torch.Tensor, batch: int, crop: int, generator: torch.Generator) -> torch.Tensor:
    """``batch`` random ``crop``-px crops of ``image (3, H, W)`` with flips and 90-degree rotations."""
    _, h, w = image.shape
    tops = torch.randint(0, h - crop + 1, (batch,), generator=generator)
    lefts = torch.randint(0, w - crop + 1, (batch,), generator=generator)
    rows = tops[:, None] + torch.arange(crop)[None]
    cols = lefts[:, None] + torch.arange(crop)[None]
    crops = image[:, rows[:, :, None], cols[:, None, :]].permute(1, 0, 2, 3)  # (B, 3, crop, crop)
    flip = torch.rand(batch, generator=generator) < 0.5
    crops = torch.where(flip[:, None, None, None], crops.flip(-1), crops)
    rotate = torch.rand(batch, generator=generator) < 0.5
    return torch.where(rotate[:, None, None, None], crops.transpose(-1, -2), crops)


def train_prior(
    style: np.ndarray,
    steps: int = 250,
    batch: int = 32,
    crop: int = 32,
    lr: float = 2e-3,
    seed: int = 0,
    model: SingleImagePrior | None = None,
) -> tuple[SingleImagePrior, dict[str, float]]:
    """Train a :class:`SingleImagePrior` on one style image.

    Parameters
    ----------
    style: float array ``(H, W, 3)`` in [0, 1], H and W >= ``crop``.
    steps, batch, crop, lr: optimisation settings (ours: 250 x 32 crops of 32 px, Adam 2e-3 with cosine
        decay; the issue's ~500 steps did not fit the session's CPU budget for 7 styles).
    seed: seeds the initialisation and the crops.

    Returns
    -------
    The trained model (eval mode) and ``{"final_loss", "seconds", "steps"}``.
    """
    style = np.asarray(style)
    if style.ndim != 3 or style.shape[2] != 3 or min(style.shape[:2]) < crop:
        raise ValueError(f"style must be (H, W, 3) with H, W >= crop={crop}, got {style.shape}")
    if steps < 1 or batch < 1:
        raise ValueError(f"steps and batch must be >= 1, got steps={steps}, batch={batch}")
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = model or SingleImagePrior()
    model.train()
    noise_schedule = DDPMScheduler(**SCHEDULE, prediction_type=PREDICTION_TYPE)
    image = torch.from_numpy(style).permute(2, 0, 1).float() * 2 - 1
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    start = time.perf_counter()
    losses: list[float] = []
    for _ in range(steps):
        x0 = random_crops(image, batch, crop, generator)
        noise = torch.randn(x0.shape, generator=generator)
        t = torch.randint(0, SCHEDULE["num_train_timesteps"], (batch,), generator=generator)
        noisy = noise_schedule.add_noise(x0, noise, t)
        target = noise_schedule.get_velocity(x0, noise, t) if PREDICTION_TYPE == "v_prediction" else noise
        loss = torch.nn.functional.mse_loss(model(noisy, t).sample, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        decay.step()
        losses.append(float(loss.detach()))
    model.eval()
    tail = losses[-max(1, steps // 10) :]
    return model, {"final_loss": float(np.mean(tail)), "seconds": time.perf_counter() - start, "steps": steps}


@torch.no_grad()
def sample_prior(
    model: SingleImagePrior, size: int = 64, num: int = 2, steps: int = 20, seed: int = 0
) -> np.ndarray:
    """Unconditional DDIM samples of a prior: ``(num, size, size, 3)`` in [0, 1]."""
    scheduler = make_scheduler()
    scheduler.set_timesteps(steps)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn((num, 3, size, size), generator=generator)
    for t in scheduler.timesteps:
        x = scheduler.step(model(x, t).sample, t, x).prev_sample
    return ((x.clamp(-1, 1) + 1) / 2).permute(0, 2, 3, 1).numpy()


def sanity_gate(
    model: SingleImagePrior, own: str, seed: int = 0, root: str | Path | None = None
) -> dict[str, object]:
    """The issue's gate: the prior's samples must be closer (patch SWD) to its own style than to every other.

    The others are the bundled :data:`STYLES` (a painting's gate adds itself, so a bundled prior's gate never
    needs the painting). Returns ``{"passed": bool, "swd": {style: distance}}``.
    """
    from neurips26.methods.styleroute.metrics import patch_swd

    samples = sample_prior(model, seed=seed)
    names = STYLES if own in STYLES else (*STYLES, own)
    swd = {
        name: float(np.mean([patch_swd(s, load_style(name, 64, root), seed=seed) for s in samples]))
        for name in names
    }
    passed = all(swd[own] < value for name, value in swd.items() if name != own)
    return {"passed": bool(passed), "swd": swd}


def prior_path(style: str, directory: Path | None = None) -> Path:
    return (directory or PRIORS_DIR) / style


def load_prior(style: str, directory: Path | None = None) -> SingleImagePrior:
    """The committed prior of ``style``; a missing one raises naming the command that trains it."""
    path = prior_path(style, directory)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"style {style!r} has no prior at {path}: "
            f"train it with `neurips26 styleroute train-prior {style}`"
        )
    return SingleImagePrior.from_pretrained(path).eval()


def source_digest(style: str, root: str | Path | None = None) -> str | None:
    """SHA-256 of a painting's source file (so a card names the exact bytes it was trained on); None else."""
    if style not in PAINTINGS:
        return None
    import hashlib

    return hashlib.sha256(painting_path(style, root).read_bytes()).hexdigest()


def train_and_save(
    style: str,
    steps: int = 250,
    seed: int = 0,
    directory: Path | None = None,
    root: str | Path | None = None,
) -> dict[str, object]:
    """Train the prior of ``style``, save it with a card (``card.json``) and return the card.

    ``root`` is the folder of the paintings (:func:`~neurips26.methods.styleroute.data.painting_path`).
    """
    if style not in STYLES + PAINTINGS:
        raise ValueError(f"style must be one of {STYLES + PAINTINGS}, got {style!r}")
    torch.set_num_threads(1)
    model, stats = train_prior(load_style(style, root=root), steps=steps, seed=seed)
    path = prior_path(style, directory)
    model.save_pretrained(path)
    card = {
        "style": style,
        "command": f"neurips26 styleroute train-prior {style} --steps {steps} --seed {seed}",
        "parameters": int(sum(p.numel() for p in model.parameters())),
        **stats,
        "torch_threads": 1,
        "gate": sanity_gate(model, style, seed=seed, root=root),
    }
    digest = source_digest(style, root)
    if digest is not None:
        card["source_sha256"] = digest
    (path / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return card
