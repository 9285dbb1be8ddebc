"""Input checks shared by the router, the pipeline and the baselines (errors name the argument)."""

from __future__ import annotations

import numpy as np
import torch

MIN_SIZE = 32


def check_image(image: object, name: str) -> np.ndarray:
    """A float ``(H, W, 3)`` image in [0, 1], at least 32 px per side, finite; else a clear error."""
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{name} must be a numpy array or torch tensor (H, W, 3), got {type(image).__name__}")
    if not np.issubdtype(image.dtype, np.floating):
        raise TypeError(
            f"{name} must be a float image in [0, 1], got dtype {image.dtype} (divide uint8 images by 255)"
        )
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{name} must have shape (H, W, 3), got {image.shape}")
    if min(image.shape[:2]) < MIN_SIZE:
        raise ValueError(f"{name} must be at least {MIN_SIZE} px per side, got {image.shape[:2]}")
    if not np.isfinite(image).all():
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    if image.min() < 0.0 or image.max() > 1.0:
        raise ValueError(f"{name} values must lie in [0, 1], got [{image.min():.3g}, {image.max():.3g}]")
    return image.astype(np.float64)


def check_budget(budget: object) -> float:
    """A stylisation budget in [0, 1]."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0.0 <= float(budget) <= 1.0:
        raise ValueError(f"budget must be a number in [0, 1], got {budget!r}")
    return float(budget)


def check_mask(mask: object, shape: tuple[int, ...]) -> np.ndarray:
    """A user routing mask of ``shape`` with values in [0, 1] or NaN (NaN = route automatically)."""
    mask = np.asarray(mask, dtype=np.float64)
    if mask.shape != tuple(shape):
        raise ValueError(f"mask must have the content's shape {tuple(shape)}, got {mask.shape}")
    finite = mask[np.isfinite(mask)]
    if finite.size and (finite.min() < 0 or finite.max() > 1):
        raise ValueError("mask values must lie in [0, 1] (or NaN to keep the automatic route)")
    return mask
