"""Moving-digits videos from scikit-learn's bundled 8x8 digits (offline, seeded).

Each video has ``n_frames`` frames of ``size`` x ``size`` pixels in [-1, 1]. One or two digits (upscaled
2x to 16x16) move with a constant velocity and bounce off the borders. The *primary* digit fixes the
conditioning label ``class * 4 + direction`` where ``direction`` is the quadrant of its initial velocity
(0: right-down, 1: right-up, 2: left-down, 3: left-up); a second digit, present with probability
``p_second``, moves independently. The per-frame masks of each digit are returned too, so "semantic"
token clusters (same digit across frames) can be checked against ground truth.

Shapes: ``videos`` (n, frames, size, size) float32; ``labels`` (n,) int64 in [0, 40);
``masks`` (n, 2, frames, size, size) bool (second channel all False without a second digit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from neurips26.core.validation import check_in_range, check_int

__all__ = ["N_DIRECTIONS", "N_LABELS", "MovingDigits", "digit_bank", "make_moving_digits"]

N_DIRECTIONS = 4
N_LABELS = 10 * N_DIRECTIONS
DIGIT_SIZE = 16


@dataclass(frozen=True)
class MovingDigits:
    """A batch of moving-digit videos with their labels and per-digit masks."""

    videos: torch.Tensor
    labels: torch.Tensor
    masks: torch.Tensor

    @property
    def classes(self) -> torch.Tensor:
        """The primary digit's class (label // 4)."""
        return self.labels // N_DIRECTIONS

    @property
    def directions(self) -> torch.Tensor:
        """The primary digit's direction quadrant (label % 4)."""
        return self.labels % N_DIRECTIONS


@cache
def digit_bank() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 sklearn digits upscaled to 16x16 in [0, 1] (nearest-neighbour), and their classes."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = bunch.images.astype(np.float32) / 16.0
    images = images.repeat(2, axis=1).repeat(2, axis=2)
    return images, bunch.target.astype(np.int64)


def _trajectory(rng: np.random.Generator, n_frames: int, span: int, direction: int) -> np.ndarray:
    """Top-left corners (frames, 2) of a digit bouncing inside [0, span] with direction quadrant."""
    position = rng.uniform(0, span, size=2)
    speed = rng.uniform(1.0, 3.0, size=2)
    # direction encodes (x sign, y sign): 0 right-down, 1 right-up, 2 left-down, 3 left-up
    sign = np.array([1.0 if direction < 2 else -1.0, 1.0 if direction % 2 == 0 else -1.0])
    velocity = speed * sign
    corners = np.empty((n_frames, 2))
    for frame in range(n_frames):
        corners[frame] = position
        position = position + velocity
        for axis in range(2):  # bounce: reflect the position and flip the velocity
            if position[axis] < 0:
                position[axis], velocity[axis] = -position[axis], -velocity[axis]
            elif position[axis] > span:
                position[axis], velocity[axis] = 2 * span - position[axis], -velocity[axis]
    return np.rint(corners).astype(np.int64)


def make_moving_digits(
    n: int, *, seed: int, n_frames: int = 8, size: int = 32, p_second: float = 0.5
) -> MovingDigits:
    """Generate ``n`` moving-digit videos deterministically from ``seed``.

    Parameters
    ----------
    n : int
        Number of videos.
    seed : int
        Seed of the generator (digit choice, positions, velocities, second digit).
    n_frames : int, default 8
        Frames per video (issue: 8).
    size : int, default 32
        Frame side in pixels (issue: 32); must be at least 16 (one digit).
    p_second : float, default 0.5
        Probability of a second digit (issue: 1-2 digits).
    """
    check_int("n", n)
    check_int("n_frames", n_frames)
    check_int("size", size, minimum=DIGIT_SIZE)
    check_in_range("p_second", p_second, 0.0, 1.0)
    images, targets = digit_bank()
    rng = np.random.default_rng(seed)
    span = size - DIGIT_SIZE
    canvas = np.zeros((n, n_frames, size, size), dtype=np.float32)
    masks = np.zeros((n, 2, n_frames, size, size), dtype=bool)
    labels = np.empty(n, dtype=np.int64)
    for i in range(n):
        n_digits = 1 + int(rng.random() < p_second)
        for slot in range(n_digits):
            index = int(rng.integers(len(images)))
            direction = int(rng.integers(N_DIRECTIONS))
            if slot == 0:
                labels[i] = targets[index] * N_DIRECTIONS + direction
            corners = _trajectory(rng, n_frames, span, direction)
            digit = images[index]
            for frame, (x, y) in enumerate(corners):
                window = canvas[i, frame, y : y + DIGIT_SIZE, x : x + DIGIT_SIZE]
                np.maximum(window, digit, out=window)
                masks[i, slot, frame, y : y + DIGIT_SIZE, x : x + DIGIT_SIZE] = digit > 0.25
    videos = torch.from_numpy(canvas * 2.0 - 1.0)
    return MovingDigits(videos, torch.from_numpy(labels), torch.from_numpy(masks))
