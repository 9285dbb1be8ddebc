"""Tiny instances for the conformance matrix (``neurips26.testing.conformance``)."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.methods.styleroute.config import StyleRouteConfig
from neurips26.methods.styleroute.pipeline import StyleRoutePipeline
from neurips26.methods.styleroute.prior import SingleImagePrior
from neurips26.methods.styleroute.training import make_scheduler
from neurips26.testing.conformance.pipeline import PipelineCase


def _tiny_pipeline() -> StyleRoutePipeline:
    torch.manual_seed(0)
    prior = SingleImagePrior(channels=8, dilations=(1, 2), attention_heads=2, temb_dim=16)
    with torch.no_grad():  # a non-zero output layer: the images depend on the denoiser
        prior.conv_out.weight.normal_(0, 0.05)
    # non-default settings, so a round trip that falls back to the defaults is caught
    config = StyleRouteConfig(num_inference_steps=4, n_segments=7)
    return StyleRoutePipeline(prior.eval(), make_scheduler(), config, unet_kwargs={})


def tiny_pipeline() -> PipelineCase:
    """The StyleRoute pipeline on a 32x32 content image and a 32x32 style image."""
    rng = np.random.default_rng(0)
    content, style = rng.uniform(0, 1, (2, 32, 32, 3))
    return PipelineCase(_tiny_pipeline, {"content": content, "style": style, "budget": 0.5})
