"""Tiny in-code VLM backbones and targets for the SAST tests (no MiniLM, no checkpoint, milliseconds)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ToyBackbone(nn.Module):
    """A VLMBackbone whose image tower is LayerNorm + a fixed linear map on flattened (3, 2, 2) images and
    whose text tower looks captions up in a table: the class name's anchor, rotated towards a confusable
    neighbour by ``anchor_shift`` (text anchors that mismatch the visual clusters)."""

    def __init__(self, class_means: torch.Tensor, anchor_shift: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        n_classes, dim = class_means.shape
        self.norm = nn.LayerNorm(12)
        generator = torch.Generator().manual_seed(seed)
        self.proj = nn.Linear(12, dim, bias=False)
        with torch.no_grad():
            self.proj.weight.copy_(torch.linalg.qr(torch.randn(12, dim, generator=generator))[0].T)
        self.names = [f"class{c}" for c in range(n_classes)]
        neighbour = torch.roll(class_means, 1, dims=0)
        self.register_buffer("anchors", F.normalize(class_means + anchor_shift * neighbour, dim=1))

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(images.flatten(1)))

    def encode_text(self, texts: list[str]) -> torch.Tensor:
        rows = []
        for text in texts:
            hits = [
                c
                for c, name in enumerate(self.names)
                if f"{name} " in f"{text} " or text.endswith(name + ".")
            ]
            rows.append(self.anchors[hits[0]])
        return torch.stack(rows)

    def trainable_parameters(self, kind: str) -> list[nn.Parameter]:
        if kind == "norm":
            return list(self.norm.parameters())
        if kind == "image":
            return [*self.norm.parameters(), *self.proj.parameters()]
        if kind == "none":
            return []
        raise ValueError(f"kind must be one of ('norm', 'image', 'none'), got {kind!r}")

    def logit_scale(self) -> float:
        return 20.0

    def preprocessing(self) -> dict:
        return {"input": "toy (3, 2, 2) in [0, 1]"}


def toy_task(
    n_classes: int = 4, per_class: int = 40, spread: float = 0.35, anchor_shift: float = 0.9, seed: int = 0
):
    """(backbone, images (N, 3, 2, 2) in [0, 1], labels, class names): Gaussian clusters in image space whose
    embedded means are the visual class centres; text anchors shifted towards the next class."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.rand(n_classes, 12, generator=generator)
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    images = (centres[labels] + spread * 0.25 * torch.randn(len(labels), 12, generator=generator)).clamp(0, 1)
    probe = ToyBackbone(torch.eye(n_classes, 6) if n_classes <= 6 else torch.randn(n_classes, 6), 0.0, seed)
    with torch.no_grad():
        means = F.normalize(probe.encode_image(centres.view(n_classes, 3, 2, 2)), dim=1)
    backbone = ToyBackbone(means, anchor_shift, seed)
    return backbone, images.view(-1, 3, 2, 2), labels, backbone.names
