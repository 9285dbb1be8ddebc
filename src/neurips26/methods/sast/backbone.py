"""The ``VLMBackbone`` protocol SAST adapts, with adapters for MiniCLIP and transformers' ``CLIPModel``.

A backbone maps images (B, 3, H, W) float in [0, 1] and caption strings into one joint space, reports
its CLIP temperature, and names the parameters self-training may touch (``trainable_parameters(kind)``:
``"norm"`` = the image tower's LayerNorm/GroupNorm affines, ``"image"`` = the whole image tower,
``"none"``). Real weights drop in: ``HFCLIPBackbone(CLIPModel.from_pretrained(...), tokenizer)``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "TRAINABLE_KINDS",
    "HFCLIPBackbone",
    "MiniCLIPBackbone",
    "VLMBackbone",
    "check_backbone",
    "check_images",
]

TRAINABLE_KINDS = ("norm", "image", "none")
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm2d)
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@runtime_checkable
class VLMBackbone(Protocol):
    """What SAST needs from a CLIP-like model."""

    def encode_image(self, images: torch.Tensor) -> torch.Tensor: ...

    def encode_text(self, texts: list[str]) -> torch.Tensor: ...

    def trainable_parameters(self, kind: str) -> list[nn.Parameter]: ...

    def logit_scale(self) -> float: ...

    def preprocessing(self) -> dict[str, Any]: ...


_REQUIRED = ("encode_image", "encode_text", "trainable_parameters", "logit_scale", "preprocessing")


def check_backbone(backbone: Any) -> None:
    """Raise ``TypeError`` naming the missing methods when ``backbone`` does not follow the protocol."""
    missing = [name for name in _REQUIRED if not callable(getattr(backbone, name, None))]
    if missing:
        raise TypeError(
            f"backbone must follow the VLMBackbone protocol ({', '.join(_REQUIRED)}); "
            f"{type(backbone).__name__} lacks {', '.join(missing)}. Wrap a model in MiniCLIPBackbone or "
            "HFCLIPBackbone"
        )
    if not isinstance(backbone, nn.Module):
        raise TypeError(f"backbone must be a torch.nn.Module (for state_dict), got {type(backbone).__name__}")


def check_images(name: str, images: Any, channels: int = 3) -> torch.Tensor:
    """Validate a float image batch (N, channels, H, W) with values in [0, 1]; returns it as a tensor."""
    if not isinstance(images, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of images (N, {channels}, H, W), got {type(images).__name__}"
        )
    if images.ndim != 4 or images.shape[1] != channels:
        raise ValueError(f"{name} must have shape (N, {channels}, H, W), got {tuple(images.shape)}")
    if images.shape[0] == 0:
        raise ValueError(f"{name} is empty (N = 0)")
    if not images.is_floating_point():
        raise TypeError(f"{name} must be floating point in [0, 1], got dtype {images.dtype}")
    low, high = float(images.min()), float(images.max())
    if not (low >= 0.0 and high <= 1.0):
        raise ValueError(
            f"{name} must lie in [0, 1] (scale uint8 images by 1/255), got range [{low:.3g}, {high:.3g}]"
        )
    return images


def _norm_affines(module: nn.Module) -> list[nn.Parameter]:
    return [p for m in module.modules() if isinstance(m, _NORMS) for p in m.parameters(recurse=False)]


def _select(kind: str, tower: nn.Module) -> list[nn.Parameter]:
    if kind == "norm":
        return _norm_affines(tower)
    if kind == "image":
        return list(tower.parameters())
    if kind == "none":
        return []
    raise ValueError(f"kind must be one of {TRAINABLE_KINDS}, got {kind!r}")


class MiniCLIPBackbone(nn.Module):
    """``VLMBackbone`` over :class:`neurips26.methods.sast.miniclip.MiniCLIP` (32 x 32 RGB in [0, 1])."""

    def __init__(self, model: nn.Module | None = None) -> None:
        super().__init__()
        if model is None:
            from neurips26.methods.sast.miniclip import load_miniclip

            model = load_miniclip()
        self.model = model

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        size = self.model.config.image_size
        if images.shape[-2:] != (size, size):
            images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
        return self.model.encode_image(images)

    def encode_text(self, texts: list[str]) -> torch.Tensor:
        return self.model.encode_text(list(texts))

    def trainable_parameters(self, kind: str) -> list[nn.Parameter]:
        return _select(kind, self.model.image_tower)

    def logit_scale(self) -> float:
        return float(self.model.logit_scale.detach().exp().clamp(max=100))

    def preprocessing(self) -> dict[str, Any]:
        from neurips26.methods.sast.miniclip import IMAGE_MEAN, IMAGE_STD

        return {
            "input": "float RGB in [0, 1]",
            "resize": f"bilinear to {self.model.config.image_size} px",
            "mean": list(IMAGE_MEAN),
            "std": list(IMAGE_STD),
        }


class HFCLIPBackbone(nn.Module):
    """``VLMBackbone`` over ``transformers.CLIPModel`` and its tokenizer.

    Images in [0, 1] are resized (bilinear) to the vision config's size and normalised with OpenAI's CLIP
    mean/std; texts go through ``tokenizer(texts, padding=True, truncation=True, return_tensors="pt")``.
    """

    def __init__(self, model: nn.Module, tokenizer: Any, max_length: int = 77) -> None:
        super().__init__()
        if not (hasattr(model, "get_image_features") and hasattr(model, "get_text_features")):
            raise TypeError(f"model must be a transformers CLIPModel, got {type(model).__name__}")
        if not callable(tokenizer):
            raise TypeError("tokenizer must be a callable Hugging Face tokenizer")
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.register_buffer("mean", torch.tensor(OPENAI_CLIP_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(OPENAI_CLIP_STD).view(1, 3, 1, 1), persistent=False)

    @staticmethod
    def _features(output: Any) -> torch.Tensor:
        return output if isinstance(output, torch.Tensor) else output.pooler_output

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        size = self.model.config.vision_config.image_size
        if images.shape[-2:] != (size, size):
            images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
        pixels = (images - self.mean) / self.std
        return self._features(self.model.get_image_features(pixel_values=pixels))

    def encode_text(self, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        device = self.model.logit_scale.device
        return self._features(
            self.model.get_text_features(
                input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device)
            )
        )

    def trainable_parameters(self, kind: str) -> list[nn.Parameter]:
        return _select(kind, self.model.vision_model)

    def logit_scale(self) -> float:
        return float(self.model.logit_scale.detach().exp().clamp(max=100))

    def preprocessing(self) -> dict[str, Any]:
        return {
            "input": "float RGB in [0, 1]",
            "resize": f"bilinear to {self.model.config.vision_config.image_size} px",
            "mean": list(OPENAI_CLIP_MEAN),
            "std": list(OPENAI_CLIP_STD),
        }
