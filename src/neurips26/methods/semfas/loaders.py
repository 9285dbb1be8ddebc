"""Loaders for the on-disk layouts of CASIA-SURF, CASIA-CeFA, WMCA and PADISI-Face (image exports).

All four sets need a signed licence, so these loaders are tested only on synthetic files written in
the same layouts (``tests/methods/semfas/test_semfas_loaders.py``); they are untested on the real sets. Each
returns a ``torch.utils.data.Dataset`` whose items are ``({"rgb": [3,S,S], "depth": [1,S,S], "ir": [1,S,S]},
label)`` with label 0 = bona fide, 1 = attack; a missing file gives ``None`` for that modality (collate with
:func:`collate_modalities`, which turns it into a presence mask for :class:`SEMFAS`).

Layouts read (our reading of the released protocol files):

- CASIA-SURF: a list file of lines ``<rgb path> <depth path> <ir path> <label>`` (``train_list.txt``),
  paths relative to the root, label 1 = real; we flip it to 0 = bona fide.
- CASIA-CeFA: a protocol file of lines ``<video dir>/profile/<frame>.jpg <label>`` (label 1 = real);
  the depth and IR frames sit in the sibling folders ``depth/`` and ``ir/``.
- WMCA and PADISI-Face (frames exported from their HDF5 files): ``<root>/<split>/<sample>/`` with
  ``color.png``, ``depth.png`` and ``infrared.png`` (WMCA) or ``nir.png`` (PADISI) and a CSV
  ``<split>.csv`` of ``sample,label`` rows with label ``bonafide`` / ``attack``.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

MODALITIES = ("rgb", "depth", "ir")


def _read_image(path: Path, channels: int, size: int) -> torch.Tensor | None:
    from PIL import Image

    if not path.is_file():
        return None
    with Image.open(path) as image:
        image = image.convert("RGB" if channels == 3 else "L").resize((size, size), Image.BILINEAR)
        array = np.asarray(image, dtype=np.float32) / 255.0
    return torch.from_numpy(array.transpose(2, 0, 1).copy() if channels == 3 else array[None].copy())


class MultiModalFASDataset(Dataset):
    """Samples given as (rgb path, depth path, ir path, label) with label 0 bona fide, 1 attack.

    Parameters
    ----------
    samples : sequence of (Path | None, Path | None, Path | None, int)
    size : int, default 32
        Every image is resized to ``size`` x ``size``.
    """

    def __init__(self, samples: Sequence[tuple[Path | None, Path | None, Path | None, int]], size: int = 32):
        if not samples:
            raise ValueError("samples is empty: the list or protocol file named no sample")
        if isinstance(size, bool) or not isinstance(size, int) or size < 4:
            raise ValueError(f"size must be an integer >= 4, got {size!r}")
        for sample in samples:
            if sample[3] not in (0, 1):
                raise ValueError(f"labels must lie in {{0, 1}}, got {sample[3]!r} for {sample[0]}")
        self.samples, self.size = list(samples), size

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[dict[str, torch.Tensor | None], int]:
        rgb, depth, ir, label = self.samples[index]
        images = {
            "rgb": _read_image(rgb, 3, self.size) if rgb else None,
            "depth": _read_image(depth, 1, self.size) if depth else None,
            "ir": _read_image(ir, 1, self.size) if ir else None,
        }
        if all(v is None for v in images.values()):
            raise FileNotFoundError(f"sample {index}: none of {rgb}, {depth}, {ir} exists")
        return images, label


def _lines(path: Path) -> list[list[str]]:
    if not Path(path).is_file():
        raise FileNotFoundError(f"list file {path} does not exist")
    return [line.split() for line in Path(path).read_text().splitlines() if line.strip()]


def casia_surf(root: str | Path, list_file: str | Path, size: int = 32) -> MultiModalFASDataset:
    """CASIA-SURF from its list file (``<rgb> <depth> <ir> <label>``, label 1 = real)."""
    root = Path(root)
    samples = []
    for fields in _lines(Path(list_file)):
        if len(fields) != 4:
            raise ValueError(f"{list_file}: expected '<rgb> <depth> <ir> <label>', got {' '.join(fields)!r}")
        samples.append((root / fields[0], root / fields[1], root / fields[2], 1 - int(fields[3])))
    return MultiModalFASDataset(samples, size)


def casia_cefa(root: str | Path, protocol_file: str | Path, size: int = 32) -> MultiModalFASDataset:
    """CASIA-CeFA from a protocol file (``<dir>/profile/<frame> <label>``, label 1 = real)."""
    root = Path(root)
    samples = []
    for fields in _lines(Path(protocol_file)):
        if len(fields) != 2 or "/profile/" not in fields[0]:
            raise ValueError(
                f"{protocol_file}: expected '<dir>/profile/<frame> <label>', got {' '.join(fields)!r}"
            )
        rgb = root / fields[0]
        depth = root / fields[0].replace("/profile/", "/depth/")
        ir = root / fields[0].replace("/profile/", "/ir/")
        samples.append((rgb, depth, ir, 1 - int(fields[1])))
    return MultiModalFASDataset(samples, size)


def _exported(root: Path, split: str, ir_name: str, size: int) -> MultiModalFASDataset:
    table = root / f"{split}.csv"
    if not table.is_file():
        raise FileNotFoundError(f"split file {table} does not exist")
    samples = []
    with table.open() as handle:
        for row in csv.DictReader(handle):
            if row.get("label") not in ("bonafide", "attack"):
                raise ValueError(f"{table}: label must be 'bonafide' or 'attack', got {row.get('label')!r}")
            folder = root / split / row["sample"]
            label = int(row["label"] == "attack")
            samples.append((folder / "color.png", folder / "depth.png", folder / ir_name, label))
    return MultiModalFASDataset(samples, size)


def wmca(root: str | Path, split: str = "train", size: int = 32) -> MultiModalFASDataset:
    """WMCA frames exported per sample (``color.png``, ``depth.png``, ``infrared.png``) + ``<split>.csv``."""
    return _exported(Path(root), split, "infrared.png", size)


def padisi(root: str | Path, split: str = "train", size: int = 32) -> MultiModalFASDataset:
    """PADISI-Face frames exported per sample (``color.png``, ``depth.png``, ``nir.png``), ``<split>.csv``."""
    return _exported(Path(root), split, "nir.png", size)


def collate_modalities(
    batch: list[tuple[dict[str, torch.Tensor | None], int]],
) -> tuple[dict[str, torch.Tensor | None], torch.Tensor, torch.Tensor]:
    """Stack a batch: zero-fill missing images and return (inputs, presence mask [B, M], labels)."""
    present = torch.tensor([[item[0][m] is not None for m in MODALITIES] for item in batch])
    inputs: dict[str, torch.Tensor | None] = {}
    for i, name in enumerate(MODALITIES):
        example = next((item[0][name] for item in batch if item[0][name] is not None), None)
        if example is None:
            inputs[name] = None
            continue
        zeros = torch.zeros_like(example)
        inputs[name] = torch.stack(
            [item[0][name] if present[b, i] else zeros for b, item in enumerate(batch)]
        )
    return inputs, present, torch.tensor([item[1] for item in batch])
