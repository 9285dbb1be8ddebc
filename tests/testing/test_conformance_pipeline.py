"""The pipeline tester passes diffusers' own DDPMPipeline and fails each deliberately broken pipeline."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("diffusers")

from diffusers import DDPMPipeline, DDPMScheduler, DiffusionPipeline, UNet2DModel

from neurips26.testing.conformance import TESTERS
from neurips26.testing.conformance.pipeline import PipelineCase

check_pipeline = TESTERS["pipeline"]


def _unet() -> UNet2DModel:
    torch.manual_seed(0)
    return UNet2DModel(
        sample_size=8,
        in_channels=1,
        out_channels=1,
        block_out_channels=(8, 8),
        layers_per_block=1,
        norm_num_groups=4,
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
    )


def _scheduler() -> DDPMScheduler:
    return DDPMScheduler(num_train_timesteps=10)


class _NoisePipeline(DiffusionPipeline):
    """One denoiser call on seeded noise, scaled by ``strength``."""

    def __init__(self, unet: UNet2DModel, scheduler: DDPMScheduler, strength: float = 1.0) -> None:
        super().__init__()
        self.register_modules(unet=unet, scheduler=scheduler)
        self.strength = strength
        self.register_to_config(strength=strength)

    def _noise(self, generator):
        return torch.randn(1, 1, 8, 8, generator=generator)

    def __call__(self, generator=None):
        x = self._noise(generator)
        return (self.strength * self.unet(x, 5).sample,)


class _DropsItsSetting(_NoisePipeline):
    """Keeps ``strength`` as an attribute but never writes it to the config: reloads with the default."""

    def __init__(self, unet, scheduler, strength: float = 1.0) -> None:
        DiffusionPipeline.__init__(self)
        self.register_modules(unet=unet, scheduler=scheduler)
        self.strength = strength


class _IgnoresTheGenerator(_NoisePipeline):
    def _noise(self, generator):
        return torch.randn(1, 1, 8, 8)


class _NoArrays(_NoisePipeline):
    def __call__(self, generator=None):
        return "an image"


def test_diffusers_ddpm_pipeline_conforms():
    def build():
        return DDPMPipeline(unet=_unet(), scheduler=_scheduler())

    check_pipeline(
        lambda: PipelineCase(build, {"batch_size": 1, "num_inference_steps": 2, "output_type": "np"})
    )


def test_a_pipeline_with_a_registered_setting_conforms():
    check_pipeline(lambda: PipelineCase(lambda: _NoisePipeline(_unet(), _scheduler(), strength=0.5)))


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_DropsItsSetting, "'strength' did not survive"),
        (_IgnoresTheGenerator, "same generator seed"),
        (_NoArrays, "holds no tensor"),
    ],
)
def test_broken_pipelines_fail(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_pipeline(lambda: PipelineCase(lambda: broken(_unet(), _scheduler(), strength=0.5)))
