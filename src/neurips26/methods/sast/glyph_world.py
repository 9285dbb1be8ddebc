"""A captioned synthetic image world for pretraining a small CLIP offline (MiniCLIP, issue #27).

Four concept families, each drawn at 32 x 32 RGB with Pillow and Debian's DejaVu fonts:

- ``digit``: the ten digits in a training font, with size, position, rotation and colour jitter;
- ``letter``: the 26 capital letters (distractor concepts that share strokes with digits);
- ``shape``: six shapes x eight colours on plain backgrounds;
- ``texture``: seven procedural textures (brick wall, grass, gravel, printed text, stripes, dots,
  checkerboard).

Each image comes with a templated caption ("a photo of the number seven", "a red triangle", "a brick
texture"). Fonts are split: :func:`train_fonts` render the pretraining corpus; the ``HELD_OUT_FONTS``
(DejaVu Sans Mono, the TeX Gyre math face, DejaVu Sans ExtraLight) are reserved for the shifted targets.
Images are float32 arrays in [0, 1] of shape (3, 32, 32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

__all__ = [
    "COLOURS",
    "DIGIT_WORDS",
    "FONT_DIR",
    "HELD_OUT_FONTS",
    "IMAGE_SIZE",
    "SHAPES",
    "TEXTURES",
    "Concept",
    "all_concepts",
    "draw_shape",
    "fonts_available",
    "render_concept",
    "render_corpus",
    "render_glyph",
    "render_texture",
    "train_fonts",
]

IMAGE_SIZE = 32
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
HELD_OUT_FONTS = (
    "DejaVuSansMono.ttf",
    "DejaVuSansMono-Bold.ttf",
    "DejaVuMathTeXGyre.ttf",
    "DejaVuSans-ExtraLight.ttf",
)
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 40),
    "blue": (30, 60, 220),
    "yellow": (240, 220, 30),
    "orange": (245, 140, 20),
    "purple": (140, 40, 180),
    "black": (15, 15, 15),
    "white": (245, 245, 245),
}
SHAPES = ("circle", "square", "triangle", "star", "cross", "hexagon")
TEXTURES = ("brick", "grass", "gravel", "text", "stripes", "dots", "checkerboard")

# captions of the pretraining corpus; the targets use other templates (see
# neurips26.methods.sast.clip_targets)
_TEMPLATES = {
    "digit": (
        "a photo of the number {word}",
        "the digit {char}",
        "the number {char}",
        "a drawing of the digit {word}",
        "{word}",
    ),
    "letter": ("the letter {char}", "a capital {char}", "a photo of the letter {char}"),
    "shape": ("a {colour} {shape}", "a photo of a {colour} {shape}", "a {shape} coloured {colour}"),
    "texture": ("a {name} texture", "a photo of {name}", "a close-up of {name}"),
}
_TEXTURE_WORDS = {
    "brick": "a brick wall",
    "grass": "grass",
    "gravel": "gravel",
    "text": "printed text",
    "stripes": "stripes",
    "dots": "dots",
    "checkerboard": "a checkerboard",
}


@dataclass(frozen=True)
class Concept:
    """One pretraining concept: its family, key (the contrastive positive set) and caption fields."""

    family: str
    key: str
    fields: tuple[tuple[str, str], ...]

    def captions(self) -> list[str]:
        values = dict(self.fields)
        return [t.format(**values) for t in _TEMPLATES[self.family]]


def all_concepts() -> list[Concept]:
    """Every pretraining concept (10 digits, 26 letters, 48 coloured shapes, 7 textures)."""
    concepts = [
        Concept("digit", f"digit:{d}", (("char", str(d)), ("word", DIGIT_WORDS[d]))) for d in range(10)
    ]
    concepts += [Concept("letter", f"letter:{c}", (("char", c),)) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    concepts += [
        Concept("shape", f"shape:{colour}:{shape}", (("colour", colour), ("shape", shape)))
        for shape in SHAPES
        for colour in COLOURS
    ]
    concepts += [
        Concept("texture", f"texture:{t}", (("name", _TEXTURE_WORDS[t]), ("kind", t))) for t in TEXTURES
    ]
    return concepts


def fonts_available() -> bool:
    """Whether Debian's DejaVu fonts (package ``fonts-dejavu-core``/``-extra``) are installed."""
    return all((FONT_DIR / name).is_file() for name in ("DejaVuSans.ttf", "DejaVuSerif.ttf"))


@cache
def train_fonts() -> tuple[str, ...]:
    """The DejaVu faces used for pretraining: every installed face but the held-out ones."""
    if not fonts_available():
        raise FileNotFoundError(
            f"DejaVu fonts not found in {FONT_DIR}: install Debian's fonts-dejavu-core and fonts-dejavu-extra"
        )
    return tuple(sorted(p.name for p in FONT_DIR.glob("*.ttf") if p.name not in HELD_OUT_FONTS))


@cache
def _font(name: str, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(str(FONT_DIR / name), size)


def _contrast_pair(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A foreground/background colour pair with clear luminance contrast (either polarity)."""
    fg = rng.integers(0, 90, 3)
    bg = rng.integers(165, 256, 3)
    if rng.random() < 0.5:
        fg, bg = bg, fg
    return tuple(int(v) for v in fg), tuple(int(v) for v in bg)


def render_glyph(
    char: str,
    font: str,
    rng: np.random.Generator,
    *,
    fg: tuple[int, ...] | None = None,
    bg: tuple[int, ...] | None = None,
    size_range: tuple[int, int] = (18, 28),
    max_rotation: float = 15.0,
) -> np.ndarray:
    """One character in ``font`` with random size, offset and rotation; returns (3, 32, 32) in [0, 1]."""
    from PIL import Image, ImageDraw

    if fg is None or bg is None:
        fg, bg = _contrast_pair(rng)
    scale = 2  # draw at 2x and downsample: anti-aliased strokes
    canvas = IMAGE_SIZE * scale
    size = int(rng.integers(size_range[0], size_range[1] + 1)) * scale
    mask = Image.new("L", (canvas, canvas), 0)
    draw = ImageDraw.Draw(mask)
    box = draw.textbbox((0, 0), char, font=_font(font, size), anchor="lt")
    width, height = box[2] - box[0], box[3] - box[1]
    x = (canvas - width) / 2 + rng.uniform(-3, 3) * scale - box[0]
    y = (canvas - height) / 2 + rng.uniform(-3, 3) * scale - box[1]
    draw.text((x, y), char, fill=255, font=_font(font, size), anchor="lt")
    mask = mask.rotate(rng.uniform(-max_rotation, max_rotation), resample=Image.BILINEAR)
    mask = mask.resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
    return _composite(np.asarray(mask, dtype=np.float32) / 255.0, fg, bg)


def _composite(alpha: np.ndarray, fg: tuple[int, ...], bg: tuple[int, ...] | np.ndarray) -> np.ndarray:
    """Blend a foreground colour over a background colour or (3, H, W) image with mask ``alpha``."""
    fg_arr = np.asarray(fg, dtype=np.float32).reshape(3, 1, 1) / 255.0
    bg_arr = np.asarray(bg, dtype=np.float32)
    bg_arr = bg_arr.reshape(3, 1, 1) / 255.0 if bg_arr.ndim == 1 else bg_arr
    return (alpha[None] * fg_arr + (1.0 - alpha[None]) * bg_arr).astype(np.float32)


def _polygon(shape: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    if shape == "square":
        n, radii = 4, [r] * 4
        angle += math.pi / 4
    elif shape == "triangle":
        n, radii = 3, [r] * 3
        angle -= math.pi / 2
    elif shape == "hexagon":
        n, radii = 6, [r] * 6
    elif shape == "star":
        n, radii = 10, [r if i % 2 == 0 else 0.45 * r for i in range(10)]
        angle -= math.pi / 2
    else:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    return [
        (
            cx + radii[i] * math.cos(angle + 2 * math.pi * i / n),
            cy + radii[i] * math.sin(angle + 2 * math.pi * i / n),
        )
        for i in range(n)
    ]


def draw_shape(
    shape: str, rng: np.random.Generator, *, outline: bool = False, canvas: int = IMAGE_SIZE * 2
) -> np.ndarray:
    """An anti-aliased mask (32, 32) in [0, 1] of ``shape`` with random size, position and rotation."""
    from PIL import Image, ImageDraw

    mask = Image.new("L", (canvas, canvas), 0)
    draw = ImageDraw.Draw(mask)
    r = rng.uniform(0.25, 0.4) * canvas
    cx, cy = (canvas / 2 + rng.uniform(-0.08, 0.08) * canvas for _ in range(2))
    angle = rng.uniform(-0.3, 0.3)
    width = int(canvas * 0.07)
    if shape == "circle":
        bbox = (cx - r, cy - r, cx + r, cy + r)
        draw.ellipse(bbox, fill=None if outline else 255, outline=255, width=width if outline else 0)
    elif shape == "cross":
        arm = r * 0.35
        for box in ((cx - r, cy - arm, cx + r, cy + arm), (cx - arm, cy - r, cx + arm, cy + r)):
            draw.rectangle(box, fill=255)
    else:
        points = _polygon(shape, cx, cy, r, angle)
        if outline:
            draw.line([*points, points[0]], fill=255, width=width, joint="curve")
        else:
            draw.polygon(points, fill=255)
    mask = mask.resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
    return np.asarray(mask, dtype=np.float32) / 255.0


def render_texture(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A procedural texture tile (3, 32, 32) in [0, 1]; tinted grey with a little colour jitter."""
    from PIL import Image, ImageDraw

    s = IMAGE_SIZE * 2
    image = Image.new("L", (s, s), int(rng.integers(90, 170)))
    draw = ImageDraw.Draw(image)
    if kind == "brick":
        h = int(rng.integers(8, 14))
        w = 2 * h + int(rng.integers(0, 8))
        image.paste(int(rng.integers(40, 80)), (0, 0, s, s))
        for row, y in enumerate(range(0, s, h)):
            offset = (w // 2) * (row % 2)
            for x in range(-offset, s, w):
                draw.rectangle((x + 1, y + 1, x + w - 2, y + h - 2), fill=int(rng.integers(140, 200)))
    elif kind == "grass":
        image.paste(int(rng.integers(20, 70)), (0, 0, s, s))
        for _ in range(160):
            x, y = rng.uniform(0, s, 2)
            draw.line(
                (x, y, x + rng.uniform(-4, 4), y - rng.uniform(8, 18)),
                fill=int(rng.integers(110, 230)),
                width=1,
            )
    elif kind == "gravel":
        for _ in range(70):
            x, y = rng.uniform(-4, s, 2)
            rx, ry = rng.uniform(3, 8, 2)
            draw.ellipse((x, y, x + rx, y + ry), fill=int(rng.integers(30, 240)))
    elif kind == "text":
        image.paste(int(rng.integers(200, 250)), (0, 0, s, s))
        letters = "abcdefghijklmnopqrstuvwxyz    "
        for y in range(2, s, 9):
            line = "".join(rng.choice(list(letters), 14))
            draw.text((1, y), line, fill=int(rng.integers(0, 60)), font=_font("DejaVuSans.ttf", 8))
    elif kind == "stripes":
        period = int(rng.integers(6, 14))
        for x in range(-s, 2 * s, period):
            draw.line(
                (x, 0, x + s * rng.uniform(-0.3, 0.3), s), fill=int(rng.integers(0, 50)), width=period // 2
            )
    elif kind == "dots":
        period = int(rng.integers(8, 14))
        r = period / 4
        for y in range(0, s, period):
            for x in range(0, s, period):
                draw.ellipse((x, y, x + 2 * r, y + 2 * r), fill=int(rng.integers(0, 50)))
    elif kind == "checkerboard":
        period = int(rng.integers(6, 12))
        for y in range(0, s, period):
            for x in range(0, s, period):
                if (x // period + y // period) % 2 == 0:
                    draw.rectangle((x, y, x + period - 1, y + period - 1), fill=int(rng.integers(0, 40)))
    else:
        raise ValueError(f"kind must be one of {TEXTURES}, got {kind!r}")
    gray = np.asarray(image.resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR), dtype=np.float32) / 255.0
    tint = rng.uniform(0.85, 1.15, 3).astype(np.float32).reshape(3, 1, 1)
    return np.clip(gray[None] * tint, 0.0, 1.0)


def render_concept(
    concept: Concept, rng: np.random.Generator, fonts: tuple[str, ...] | None = None
) -> np.ndarray:
    """One image of ``concept`` (3, 32, 32) in [0, 1]; glyphs use ``fonts`` (default :func:`train_fonts`)."""
    fonts = fonts or train_fonts()
    values = dict(concept.fields)
    if concept.family in ("digit", "letter"):
        return render_glyph(values["char"], fonts[int(rng.integers(len(fonts)))], rng)
    if concept.family == "shape":
        mask = draw_shape(values["shape"], rng, outline=bool(rng.random() < 0.25))
        bg = tuple(int(v) for v in rng.integers(0, 256, 3))
        fg = np.clip(np.asarray(COLOURS[values["colour"]]) + rng.integers(-20, 21, 3), 0, 255)
        return _composite(mask, tuple(int(v) for v in fg), bg)
    return render_texture(values["kind"], rng)


def render_corpus(n: int, seed: int) -> tuple[np.ndarray, list[Concept], np.ndarray]:
    """``n`` captioned pretraining images: (images (n, 3, 32, 32), concepts, concept index per image).

    Concept families are drawn with probabilities digits 0.35, letters 0.2, shapes 0.3, textures 0.15.
    """
    rng = np.random.default_rng(seed)
    concepts = all_concepts()
    families = np.array([c.family for c in concepts])
    weights = {"digit": 0.35, "letter": 0.2, "shape": 0.3, "texture": 0.15}
    p = np.array([weights[f] / (families == f).sum() for f in families])
    index = rng.choice(len(concepts), size=n, p=p / p.sum())
    images = np.stack([render_concept(concepts[i], rng) for i in index])
    return images, concepts, index
