"""Six shifted target domains for CLIP self-training (the offline analogue of FRAMED, issue #27).

Each target is a zero-shot classification task with its own class names and prompt templates (not the
pretraining captions of :mod:`neurips26.methods.sast.glyph_world`):

1. ``digits``: the real sklearn handwritten digits (1,797 8 x 8 scans; FRAMED's MNIST), upsampled;
2. ``digits_on_photos``: font digits over crops of skimage's real brick/grass/gravel/Hubble photos;
3. ``heldout_fonts``: digits in fonts never seen in pretraining, elastically distorted, thick strokes;
4. ``shapes_clutter``: outlined or filled shapes among random clutter strokes;
5. ``colours_tinted``: colour names of objects under a tinted illuminant;
6. ``textures_real``: crops of skimage's real brick, grass, gravel and printed-text images.

``difficulty`` (one knob per target, in [0, 1]) was calibrated once on the committed MiniCLIP before any
SAST tuning so that zero-shot top-1 lies in 25-70 %, then frozen in the committed
``methods/sast/checkpoints/mini-clip/calibration.json`` (``benchmarks/sast/sast_calibrate.py`` wrote it; the
table is in
the method README).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from neurips26.methods.sast.glyph_world import (
    COLOURS,
    HELD_OUT_FONTS,
    IMAGE_SIZE,
    SHAPES,
    draw_shape,
    render_glyph,
    train_fonts,
)

__all__ = ["CALIBRATION_FILE", "TARGETS", "TargetData", "TargetSpec", "calibrated_levels", "make_target"]


@dataclass(frozen=True)
class TargetSpec:
    """A target: class names, zero-shot templates and what the difficulty knob does."""

    name: str
    class_names: tuple[str, ...]
    templates: tuple[str, ...]
    knob: str


@dataclass
class TargetData:
    """Images (N, 3, 32, 32) float32 in [0, 1] and labels (N,) int64 of one target draw."""

    spec: TargetSpec
    images: np.ndarray
    labels: np.ndarray
    difficulty: float


_DIGITS = tuple(str(d) for d in range(10))
_DIGIT_TEMPLATES = ('a photo of the number: "{}".', "an image of the digit {}.")
TARGET_COLOURS = ("red", "green", "blue", "yellow", "orange", "purple")
TEXTURE_CLASSES = ("a brick wall", "grass", "gravel", "printed text")

TARGETS: dict[str, TargetSpec] = {
    spec.name: spec
    for spec in (
        TargetSpec("digits", _DIGITS, _DIGIT_TEMPLATES, "Gaussian pixel noise std 0.4 * difficulty"),
        TargetSpec(
            "digits_on_photos",
            _DIGITS,
            _DIGIT_TEMPLATES,
            "digit contrast 1 - 0.9 * difficulty over the photo",
        ),
        TargetSpec(
            "heldout_fonts",
            _DIGITS,
            _DIGIT_TEMPLATES,
            "elastic displacement 10 px and pixel noise 0.3 x difficulty",
        ),
        TargetSpec(
            "shapes_clutter", SHAPES, ("a photo of a {}.", "a {} shape."), "clutter strokes 24 * difficulty"
        ),
        TargetSpec(
            "colours_tinted",
            TARGET_COLOURS,
            ("a photo of something {}.", "an object coloured {}."),
            "illuminant log-tint std 1.5 x difficulty",
        ),
        TargetSpec(
            "textures_real",
            TEXTURE_CLASSES,
            ("a photo of {}.", "a close-up texture of {}."),
            "zoom: crop side 400 - 300 x difficulty px",
        ),
    )
}

CALIBRATION_FILE = Path(__file__).resolve().parent / "checkpoints" / "mini-clip" / "calibration.json"


def calibrated_levels() -> dict[str, float]:
    """The frozen difficulty per target: the ``chosen`` levels of the one calibration pass on the committed
    MiniCLIP (``benchmarks/sast/sast_calibrate.py``), 0.5 for a target the file does not list."""
    levels = {name: 0.5 for name in TARGETS}
    if CALIBRATION_FILE.is_file():
        table = json.loads(CALIBRATION_FILE.read_text())
        levels.update({name: float(row["chosen"]) for name, row in table.items() if name in levels})
    return levels


@cache
def _photos() -> dict[str, np.ndarray]:
    from skimage import data

    gray = {k: getattr(data, k)().astype(np.float32) / 255.0 for k in ("brick", "grass", "gravel")}
    hubble = data.hubble_deep_field().astype(np.float32).mean(axis=2) / 255.0
    text = data.text().astype(np.float32) / 255.0
    return {**gray, "hubble": hubble, "text": text}


def _crop(image: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """A random ``size`` x ``size`` crop resized to 32 x 32 (bilinear), gray (32, 32)."""
    from PIL import Image

    h, w = image.shape
    size = min(size, h, w)
    y, x = int(rng.integers(0, h - size + 1)), int(rng.integers(0, w - size + 1))
    patch = Image.fromarray((image[y : y + size, x : x + size] * 255).astype(np.uint8))
    return np.asarray(patch.resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR), dtype=np.float32) / 255.0


def _elastic(image: np.ndarray, strength: float, rng: np.random.Generator) -> np.ndarray:
    """Elastic distortion (Simard et al. 2003): smooth random displacements of ``strength`` pixels."""
    from scipy.ndimage import gaussian_filter, map_coordinates

    if strength <= 0:
        return image
    shape = image.shape[1:]
    dx = gaussian_filter(rng.uniform(-1, 1, shape), 3.0)
    dy = gaussian_filter(rng.uniform(-1, 1, shape), 3.0)
    scale = strength / max(float(np.abs(np.stack([dx, dy])).max()), 1e-6)
    yy, xx = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    coords = [yy + dy * scale, xx + dx * scale]
    return np.stack([map_coordinates(c, coords, order=1, mode="nearest") for c in image]).astype(np.float32)


def _digits(n_per_class: int, difficulty: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image
    from sklearn.datasets import load_digits

    bunch = load_digits()
    index = np.concatenate(
        [rng.choice(np.flatnonzero(bunch.target == c), n_per_class, replace=False) for c in range(10)]
    )
    images = []
    for i in index:
        small = Image.fromarray((bunch.images[i] / 16.0 * 255).astype(np.uint8))
        size = int(rng.integers(20, 27))
        big = np.asarray(small.resize((size, size), Image.BILINEAR), dtype=np.float32) / 255.0
        canvas = np.zeros((IMAGE_SIZE, IMAGE_SIZE), np.float32)
        y, x = (int(rng.integers(0, IMAGE_SIZE - size + 1)) for _ in range(2))
        canvas[y : y + size, x : x + size] = big
        canvas = canvas + rng.normal(0, 0.4 * difficulty, canvas.shape).astype(np.float32)
        images.append(np.repeat(np.clip(canvas, 0, 1)[None], 3, axis=0))
    return np.stack(images), bunch.target[index]


def _glyph_digits(
    n_per_class: int, difficulty: float, rng: np.random.Generator, *, on_photos: bool
) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image, ImageFilter

    photos = _photos()
    fonts = train_fonts() if on_photos else HELD_OUT_FONTS
    labels = np.repeat(np.arange(10), n_per_class)
    images = []
    for label in labels:
        font = fonts[int(rng.integers(len(fonts)))]
        mask = render_glyph(str(label), font, rng, fg=(255, 255, 255), bg=(0, 0, 0))[0]
        if on_photos:
            key = ("brick", "grass", "gravel", "hubble")[int(rng.integers(4))]
            bg = _crop(photos[key], int(rng.integers(40, 120)), rng)
            ink = 1.0 if bg.mean() < 0.5 else 0.0
            contrast = 1.0 - 0.9 * difficulty
            gray = bg + contrast * mask * (ink - bg)
            if rng.random() < 0.5:
                gray = 1.0 - gray
            image = np.repeat(gray[None], 3, axis=0)
        else:
            thick = Image.fromarray((mask * 255).astype(np.uint8)).filter(ImageFilter.MaxFilter(3))
            mask = np.asarray(thick, dtype=np.float32) / 255.0
            fg, bg = (0.1, 0.9) if rng.random() < 0.5 else (0.9, 0.1)
            gray = bg + mask * (fg - bg)
            image = _elastic(np.repeat(gray[None], 3, axis=0), 10.0 * difficulty, rng)
            image = image + rng.normal(0, 0.3 * difficulty, image.shape).astype(np.float32)
        images.append(np.clip(image, 0, 1))
    return np.stack(images).astype(np.float32), labels


def _shapes(n_per_class: int, difficulty: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image, ImageDraw

    labels = np.repeat(np.arange(len(SHAPES)), n_per_class)
    images = []
    for label in labels:
        clutter = Image.new("RGB", (IMAGE_SIZE, IMAGE_SIZE), tuple(int(v) for v in rng.integers(0, 256, 3)))
        draw = ImageDraw.Draw(clutter)
        for _ in range(round(24 * difficulty)):
            x0, y0, x1, y1 = (float(v) for v in rng.uniform(0, IMAGE_SIZE, 4))
            draw.line((x0, y0, x1, y1), fill=tuple(int(v) for v in rng.integers(0, 256, 3)), width=1)
        bg = np.asarray(clutter, dtype=np.float32).transpose(2, 0, 1) / 255.0
        mask = draw_shape(SHAPES[label], rng, outline=bool(rng.random() < 0.5))
        colour = rng.integers(0, 256, 3).astype(np.float32).reshape(3, 1, 1) / 255.0
        images.append(mask[None] * colour + (1 - mask[None]) * bg)
    return np.stack(images).astype(np.float32), labels


def _colours(n_per_class: int, difficulty: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = np.repeat(np.arange(len(TARGET_COLOURS)), n_per_class)
    images = []
    for label in labels:
        mask = draw_shape(SHAPES[int(rng.integers(len(SHAPES)))], rng)
        colour = np.clip(np.asarray(COLOURS[TARGET_COLOURS[label]]) + rng.integers(-25, 26, 3), 0, 255)
        bg = rng.uniform(0.3, 0.8)
        image = mask[None] * (colour.reshape(3, 1, 1) / 255.0) + (1 - mask[None]) * bg
        tint = np.exp(rng.normal(0, 1.5 * difficulty + 1e-9, 3)).reshape(3, 1, 1)  # illuminant (von Kries)
        images.append(np.clip(image * tint / tint.mean(), 0, 1))
    return np.stack(images).astype(np.float32), labels


def _textures(n_per_class: int, difficulty: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    photos = _photos()
    sources = ("brick", "grass", "gravel", "text")
    labels = np.repeat(np.arange(len(sources)), n_per_class)
    images = []
    for label in labels:
        side = 400 - 300 * difficulty
        gray = _crop(photos[sources[label]], int(rng.uniform(0.8, 1.2) * side), rng)
        images.append(np.repeat(np.clip(gray, 0, 1)[None], 3, axis=0))
    return np.stack(images).astype(np.float32), labels


_MAKERS = {
    "digits": _digits,
    "digits_on_photos": lambda n, d, rng: _glyph_digits(n, d, rng, on_photos=True),
    "heldout_fonts": lambda n, d, rng: _glyph_digits(n, d, rng, on_photos=False),
    "shapes_clutter": _shapes,
    "colours_tinted": _colours,
    "textures_real": _textures,
}


def make_target(name: str, n_per_class: int, seed: int, difficulty: float | None = None) -> TargetData:
    """Draw ``n_per_class`` images per class of target ``name`` (difficulty: the calibrated value)."""
    if name not in TARGETS:
        raise ValueError(f"target={name!r} is not allowed; choose one of {sorted(TARGETS)}")
    if isinstance(n_per_class, bool) or not isinstance(n_per_class, int) or n_per_class < 1:
        raise ValueError(f"n_per_class must be a positive integer, got {n_per_class!r}")
    difficulty = calibrated_levels()[name] if difficulty is None else float(difficulty)
    if not 0.0 <= difficulty <= 1.0:
        raise ValueError(f"difficulty must lie in [0, 1], got {difficulty}")
    rng = np.random.default_rng([seed, sorted(TARGETS).index(name)])
    images, labels = _MAKERS[name](n_per_class, difficulty, rng)
    order = rng.permutation(len(labels))
    return TargetData(
        TARGETS[name], images[order].astype(np.float32), labels[order].astype(np.int64), difficulty
    )
