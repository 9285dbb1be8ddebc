"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from neurips26.methods.sast.backbone import MiniCLIPBackbone
from neurips26.methods.sast.config import SASTConfig
from neurips26.methods.sast.miniclip import MiniCLIP, MiniCLIPConfig
from neurips26.methods.sast.trainer import ResidualAdapter, SASTClassifier
from neurips26.testing.conformance import ModuleExample

_EMBED = 16


def _backbone() -> MiniCLIPBackbone:
    """An untrained MiniCLIP image tower a few channels wide (its text tower is never loaded here)."""
    torch.manual_seed(0)
    config = MiniCLIPConfig(widths=(4, 8, 8, 8, 8), embed_dim=_EMBED, image_size=16)
    return MiniCLIPBackbone(MiniCLIP(config))


def _images() -> torch.Tensor:
    return torch.rand(2, 3, 20, 20, generator=torch.Generator().manual_seed(1))  # resized to 16 px


def tiny_backbone() -> ModuleExample:
    """The MiniCLIP backbone adapter's image embedding (with its resize)."""
    return ModuleExample(_backbone(), (_images(),), method="encode_image")


def tiny_classifier() -> ModuleExample:
    """SAST's classifier with an adapter and SWIP prototypes, so the adaptive fusion path runs."""
    generator = torch.Generator().manual_seed(2)
    anchors = F.normalize(torch.randn(3, _EMBED, generator=generator), dim=-1)
    classifier = SASTClassifier(_backbone(), anchors, 10.0, SASTConfig(), adapter=ResidualAdapter(_EMBED, 8))
    with torch.no_grad():
        classifier.prototypes.copy_(F.normalize(torch.randn(3, _EMBED, generator=generator), dim=-1))
        classifier.has_prototypes.fill_(True)
        classifier.delta.normal_(0.0, 0.1, generator=generator)
    return ModuleExample(classifier, (_images(),))
