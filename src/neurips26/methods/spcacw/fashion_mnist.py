"""Fashion-MNIST (Xiao et al. 2017, MIT) from Debian's ``dataset-fashion-mnist``, as a skewed federation.

- :func:`read_idx`: a vectorised parser of the idx format (plain or gzipped) the MNIST family ships in.
- :func:`load_fashion_mnist`: the 60,000 training and 10,000 test images (28x28 uint8) and labels.
- :func:`fmnist_federation`: the standard personalised-FL benchmark: Dirichlet(alpha) label skew over
  20-50 clients, with a scarce target (client 0) as in the digits federation, scored on the official test
  set under each client's own label distribution.

The data is not downloaded: ``apt-get install dataset-fashion-mnist`` puts the idx files under
:data:`DEBIAN_ROOT`; ``root`` points the loader elsewhere.
"""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neurips26.core.validation import check_int, check_positive
from neurips26.methods.spcacw.federated import ClientData, target_and_peers

DEBIAN_ROOT = "/usr/share/datasets/fashion-mnist"
SPLITS = {"train": "train", "test": "t10k"}
# idx type codes (the third magic byte) -> big-endian numpy dtypes
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
N_CLASSES = 10
PIXELS = 28 * 28


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an idx file (``.gz`` read transparently), in its native shape and dtype."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path} is not an idx file (its magic number must start with two zero bytes)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown idx type code 0x{code:02x}")
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    data = np.frombuffer(raw, _IDX_DTYPES[code], offset=header)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but the file holds {data.size} values")
    return data.reshape(shape).astype(np.dtype(_IDX_DTYPES[code]).newbyteorder("="))


def _idx_path(root: Path, stem: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (root / name).exists():
            return root / name
    raise FileNotFoundError(
        f"Fashion-MNIST file {stem}(.gz) not found under root={str(root)!r}; install the data with "
        "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu) or pass root= a folder holding the idx files"
    )


@functools.lru_cache(maxsize=2)
def load_fashion_mnist(root: str = DEBIAN_ROOT, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """``(images (n, 28, 28) uint8, labels (n,) int64)`` of ``split`` ("train" or "test") under ``root``.

    Cached per (root, split): decompressing the 26 MB training file takes ~0.5 s.
    """
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not allowed; choose one of {list(SPLITS)}")
    stem = SPLITS[split]
    images = read_idx(_idx_path(Path(root), f"{stem}-images-idx3-ubyte"))
    labels = read_idx(_idx_path(Path(root), f"{stem}-labels-idx1-ubyte")).astype(np.int64)
    if images.ndim != 3 or len(images) != len(labels):
        raise ValueError(f"{root}: {split} images {images.shape} do not match labels {labels.shape}")
    images.flags.writeable = False  # cached: callers must not change the shared arrays
    labels.flags.writeable = False
    return images, labels


@dataclass(frozen=True)
class ByteClientData(ClientData):
    """:class:`ClientData` whose training images stay uint8 (a quarter of float32's memory: Dirichlet(0.1)
    pads every client to the largest one's ~10k images); minibatches come out as float32 in [0, 1]."""

    def sample_batch(self, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = super().sample_batch(batch, generator)
        return x.float().div_(255.0), y


def fmnist_federation(
    n_clients: int = 30,
    dirichlet: float = 0.5,
    target_samples: int = 40,
    seed: int = 0,
    root: str = DEBIAN_ROOT,
    n_test: int | None = None,
) -> ByteClientData:
    """Fashion-MNIST split among ``n_clients`` with Dirichlet(``dirichlet``) label skew.

    Client 0 (the target) draws ``target_samples`` training images from its own Dirichlet label
    distribution; the other clients split the rest of the 60,000 per class with Dirichlet shares (as
    :func:`neurips26.methods.spcacw.federated.digits_federation` does, with no concept shift: one
    concept). Every
    client is scored on the official test set (the first ``n_test`` images if given) weighted by its label
    distribution. The test images are one shared tensor viewed once per client (no copy).
    """
    check_int("n_clients", n_clients, minimum=2)
    check_positive("dirichlet", dirichlet)
    check_int("target_samples", target_samples, minimum=2)
    images, labels = load_fashion_mnist(root, "train")
    test_images, test_labels = load_fashion_mnist(root, "test")
    if n_test is not None:
        check_int("n_test", n_test)
        test_images, test_labels = test_images[:n_test], test_labels[:n_test]
    rng = np.random.default_rng(seed)
    pool = np.arange(len(labels))
    target_dist, owned = target_and_peers(labels, pool, n_clients, dirichlet, target_samples, rng)
    counts = np.array([len(o) for o in owned])
    x = np.zeros((n_clients, int(counts.max()), PIXELS), np.uint8)
    y = np.zeros((n_clients, int(counts.max())), np.int64)
    label_weights = np.zeros((n_clients, N_CLASSES))
    label_weights[0] = target_dist
    for client, idx in enumerate(owned):
        x[client, : len(idx)] = images[idx].reshape(len(idx), PIXELS)
        y[client, : len(idx)] = labels[idx]
        if client:
            label_weights[client] = np.bincount(labels[idx], minlength=N_CLASSES) / len(idx)
    test_x = torch.from_numpy(test_images.reshape(-1, PIXELS).astype(np.float32) / 255.0)
    test_y = torch.from_numpy(np.array(test_labels))
    return ByteClientData(
        torch.from_numpy(x),
        torch.from_numpy(y),
        torch.from_numpy(counts),
        torch.zeros(n_clients, dtype=torch.int64),
        torch.from_numpy(label_weights).float(),
        test_x.expand(n_clients, *test_x.shape),
        test_y.expand(n_clients, *test_y.shape),
    )
