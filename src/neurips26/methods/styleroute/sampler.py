"""DDIM sampling pieces on any diffusers-style denoiser: prediction-type handling, SDEdit, DDIM inversion.

A *denoiser* is any module called as ``unet(sample, timestep, **unet_kwargs).sample`` (diffusers
``UNet2DModel``, ``UNet2DConditionModel`` with ``encoder_hidden_states``, or our ``SingleImagePrior``), paired
with a ``DDIMScheduler``. All tensors are ``(B, C, H, W)`` in the denoiser's sample space.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from diffusers import DDIMInverseScheduler, DDIMScheduler


@dataclass
class Denoiser:
    """A denoiser and its DDIM scheduler, with the conversions between its outputs and (x0, eps)."""

    unet: torch.nn.Module
    scheduler: DDIMScheduler
    unet_kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self, x: torch.Tensor, t: torch.Tensor | int) -> torch.Tensor:
        return self.unet(x, t, **self.unet_kwargs).sample

    @property
    def prediction_type(self) -> str:
        return str(self.scheduler.config.prediction_type)

    def alpha_bar(self, t: torch.Tensor | int) -> torch.Tensor:
        t = int(t)
        return self.scheduler.alphas_cumprod[t] if t >= 0 else self.scheduler.final_alpha_cumprod

    def split(
        self, output: torch.Tensor, x: torch.Tensor, t: torch.Tensor | int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x0-hat, eps-hat) from the denoiser's output (DDIM, Song et al. 2021, Eq. 12)."""
        a = self.alpha_bar(t)
        if self.prediction_type == "epsilon":
            return (x - (1 - a).sqrt() * output) / a.sqrt(), output
        if self.prediction_type == "sample":
            return output, (x - a.sqrt() * output) / (1 - a).sqrt()
        if self.prediction_type == "v_prediction":
            x0 = a.sqrt() * x - (1 - a).sqrt() * output
            return x0, a.sqrt() * output + (1 - a).sqrt() * x
        raise ValueError(f"unsupported prediction_type {self.prediction_type!r}")

    def compose(self, x0: torch.Tensor, x: torch.Tensor, t: torch.Tensor | int) -> torch.Tensor:
        """The denoiser output that corresponds to a (modified) x0-hat at ``x``, ``t``."""
        a = self.alpha_bar(t)
        eps = (x - a.sqrt() * x0) / (1 - a).sqrt()
        if self.prediction_type == "epsilon":
            return eps
        if self.prediction_type == "sample":
            return x0
        return a.sqrt() * eps - (1 - a).sqrt() * x0  # v = sqrt(a) eps - sqrt(1 - a) x0

    def timesteps(self, steps: int) -> torch.Tensor:
        """Descending DDIM timesteps for ``steps`` steps over the whole schedule."""
        self.scheduler.set_timesteps(steps)
        return self.scheduler.timesteps.clone()

    def start_timesteps(self, steps: int, t_start: float) -> torch.Tensor:
        """The descending timesteps at or below ``t_start`` (a fraction of the training schedule)."""
        ts = self.timesteps(steps)
        return ts[ts <= t_start * self.scheduler.config.num_train_timesteps]


def sdedit(
    den: Denoiser,
    content: torch.Tensor,
    strength: float,
    steps: int,
    noise: torch.Tensor,
    on_step: Callable[[int, torch.Tensor], None] | None = None,
) -> torch.Tensor:
    """Global SDEdit (Meng et al., ICLR 2022): noise the content to ``strength`` T, denoise with DDIM.

    Re-implemented baseline: one uniform start time for every pixel.
    """
    ts = den.start_timesteps(steps, strength)
    if len(ts) == 0:
        return content.clone()
    x = den.scheduler.add_noise(content, noise, ts[:1])
    for t in ts:
        if on_step is not None:
            on_step(int(t), x)
        x = den.scheduler.step(den(x, t), t, x).prev_sample
    return x


@torch.no_grad()
def ddim_invert(
    den: Denoiser,
    x0: torch.Tensor,
    t_target: float,
    steps: int,
    on_step: Callable[[int], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic DDIM inversion (diffusers ``DDIMInverseScheduler``) of ``x0`` up to ``t_target`` T.

    Returns the latent and the descending timesteps that denoise it back (same grid as :meth:`timesteps`).
    """
    forward = den.start_timesteps(steps, t_target)
    inverse = DDIMInverseScheduler.from_config(den.scheduler.config)
    inverse.set_timesteps(steps)
    x = x0
    for t in inverse.timesteps[inverse.timesteps <= (forward[0] if len(forward) else -1)]:
        if on_step is not None:
            on_step(int(t))
        x = inverse.step(den(x, t), t, x).prev_sample
    return x, forward


@torch.no_grad()
def ddim_denoise(
    den: Denoiser,
    x: torch.Tensor,
    timesteps: torch.Tensor,
    on_step: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """Plain DDIM from ``x`` over ``timesteps`` (descending)."""
    for t in timesteps:
        if on_step is not None:
            on_step(int(t))
        x = den.scheduler.step(den(x, t), t, x).prev_sample
    return x
