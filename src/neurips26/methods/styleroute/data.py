"""Offline images for StyleRoute: bundled photos as content, bundled textures plus procedural styles.

Content: skimage astronaut, chelsea, coffee, rocket, stereo_motorcycle (left), camera; sklearn china and
flower. Styles: skimage brick, grass, gravel, hubble_deep_field, immunohistochemistry, and two
procedural non-photorealistic styles built here: ``stained_glass`` (SLIC mean colours of skimage's
retina with dark lead lines) and ``halftone`` (a dot screen of skimage's coffee). Every image is returned
as float32 ``(H, W, 3)`` in [0, 1], centre-cropped to a square and resized.

Paintings (:data:`PAINTINGS`, the ``real`` profile only): Van Gogh's *The Starry Night* (1889, public
domain) as OpenCV ships it in its sample data, read from Debian's ``opencv-doc`` package
(``apt-get install opencv-doc`` puts it under :data:`OPENCV_DATA_ROOT`); ``root`` points the loader at
any folder holding the file. Nothing else here needs it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

CONTENTS: tuple[str, ...] = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "motorcycle",
    "camera",
    "china",
    "flower",
)
STYLES: tuple[str, ...] = (
    "brick",
    "grass",
    "gravel",
    "hubble_deep_field",
    "immunohistochemistry",
    "stained_glass",
    "halftone",
)
PAINTINGS: tuple[str, ...] = ("starry_night",)
OPENCV_DATA_ROOT = "/usr/share/doc/opencv-doc/examples/data"
MASKS_FILE = Path(__file__).with_name("object_masks.json")


def _square(image: np.ndarray, size: int) -> np.ndarray:
    from skimage.transform import resize

    image = np.asarray(image)
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    image = image[..., :3].astype(np.float32)
    if image.max() > 1.0:
        image = image / 255.0
    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    crop = image[top : top + side, left : left + side]
    out = resize(crop, (size, size), order=1, anti_aliasing=True, preserve_range=True)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


@cache
def _raw_content(name: str) -> np.ndarray:
    import skimage.data as skd

    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_image

        return load_sample_image(f"{name}.jpg")
    if name == "motorcycle":
        return skd.stereo_motorcycle()[0]
    return getattr(skd, name)()


def load_content(name: str, size: int = 64) -> np.ndarray:
    """Content image ``name`` (one of :data:`CONTENTS`) as float32 ``(size, size, 3)`` in [0, 1]."""
    if name not in CONTENTS:
        raise ValueError(f"content must be one of {CONTENTS}, got {name!r}")
    return _square(_raw_content(name), size)


def _stained_glass(size: int) -> np.ndarray:
    import skimage.data as skd
    from skimage.segmentation import find_boundaries, slic

    base = _square(skd.retina(), 256)
    labels = slic(base, n_segments=90, compactness=20, start_label=0)
    flat = labels.reshape(-1)
    means = np.stack([np.bincount(flat, base[..., c].reshape(-1)) for c in range(3)], 1)
    means /= np.bincount(flat)[:, None]
    # saturate the panes as glass is: stretch each pane's colour away from grey
    panes = np.clip(0.5 + 1.8 * (means - means.mean(1, keepdims=True)) + 0.25, 0, 1)[labels]
    lead = find_boundaries(labels, mode="thick")
    panes[lead] = 0.05
    return _square(panes, size)


def _halftone(size: int, cell: int = 6) -> np.ndarray:
    import skimage.data as skd

    gray = _square(skd.coffee(), 256).mean(2)
    h = gray.shape[0] // cell
    tone = gray[: h * cell, : h * cell].reshape(h, cell, h, cell).mean((1, 3))
    yy, xx = np.mgrid[0:cell, 0:cell] + 0.5 - cell / 2
    dist = np.sqrt(yy**2 + xx**2) / (cell / 2)
    # dot radius grows with darkness (classic amplitude-modulated screen)
    dots = dist[None, :, None, :] < np.sqrt(1.0 - tone)[:, None, :, None] * 1.1
    ink = dots.reshape(h * cell, h * cell)
    paper = np.array([0.96, 0.93, 0.85], np.float32)
    inkc = np.array([0.10, 0.15, 0.45], np.float32)
    return _square(np.where(ink[..., None], inkc, paper), size)


@cache
def _style_cached(name: str, size: int) -> np.ndarray:
    import skimage.data as skd

    if name == "stained_glass":
        return _stained_glass(size)
    if name == "halftone":
        return _halftone(size)
    return _square(getattr(skd, name)(), size)


def painting_path(name: str, root: str | Path | None = None) -> Path:
    """The JPEG of painting ``name`` under ``root`` (default :data:`OPENCV_DATA_ROOT`); raises if absent."""
    if name not in PAINTINGS:
        raise ValueError(f"painting must be one of {PAINTINGS}, got {name!r}")
    path = Path(root if root is not None else OPENCV_DATA_ROOT) / f"{name}.jpg"
    if not path.is_file():
        raise FileNotFoundError(
            f"painting {name!r} not found at {path}: install it with `apt-get install opencv-doc` "
            "(Debian/Ubuntu) or pass root= a folder holding OpenCV's sample data"
        )
    return path


@cache
def _painting_cached(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return _square(np.asarray(image.convert("RGB")), size)


def load_style(name: str, size: int = 96, root: str | Path | None = None) -> np.ndarray:
    """Style ``name`` (one of :data:`STYLES` or :data:`PAINTINGS`) as float32 ``(size, size, 3)`` in [0, 1].

    The default 96 px fixes the texture scale the priors are trained at (a 512-px texture shrunk 5x).
    ``root`` is the folder of the paintings (see :func:`painting_path`); the bundled styles ignore it.
    """
    if name in PAINTINGS:
        return _painting_cached(painting_path(name, root), size).copy()
    if name not in STYLES:
        raise ValueError(f"style must be one of {STYLES + PAINTINGS}, got {name!r}")
    return _style_cached(name, size).copy()


def object_mask(name: str, size: int = 64) -> np.ndarray:
    """Salient-object mask of content ``name`` from our hand-authored polygons (``object_masks.json``).

    The polygons are in normalised (x, y) coordinates of the square crop; they share no signal with the
    router (they are drawn by hand, not computed).
    """
    from skimage.draw import polygon

    polygons = json.loads(MASKS_FILE.read_text())[name]
    mask = np.zeros((size, size), dtype=bool)
    for poly in polygons:
        pts = np.asarray(poly, dtype=np.float64) * size
        rr, cc = polygon(pts[:, 1], pts[:, 0], (size, size))
        mask[rr, cc] = True
    return mask
