"""Fashion-MNIST: the idx parser on files written here, the Dirichlet partition, and the real data (skips
without Debian's ``dataset-fashion-mnist``)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from neurips26.methods.spcacw.fashion_mnist import (
    DEBIAN_ROOT,
    ByteClientData,
    fmnist_federation,
    load_fashion_mnist,
    read_idx,
)
from neurips26.methods.spcacw.federated import dirichlet_split, target_and_peers

HAS_DEBIAN_DATA = (Path(DEBIAN_ROOT) / "train-labels-idx1-ubyte.gz").exists()


def _write_idx(path: Path, array: np.ndarray, code: int, compress: bool = False) -> None:
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    (gzip.open if compress else open)(path, "wb").write(payload)


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_returns_the_written_images(tmp_path, compress):
    images = np.random.default_rng(0).integers(0, 256, size=(5, 3, 4), dtype=np.uint8)
    path = tmp_path / ("images.gz" if compress else "images")
    _write_idx(path, images, 0x08, compress)
    out = read_idx(path)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, images)


def test_read_idx_reads_big_endian_integers(tmp_path):
    values = np.array([[1, -2, 70000], [3, 2**30, -5]], dtype=np.int32)
    _write_idx(tmp_path / "ints", values, 0x0C)
    out = read_idx(tmp_path / "ints")
    np.testing.assert_array_equal(out, values)
    assert out.dtype.isnative


def test_read_idx_rejects_a_bad_magic_and_a_short_file(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="not an idx file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1]) + np.asarray([5], ">u4").tobytes() + b"abc")
    with pytest.raises(ValueError, match="header says shape"):
        read_idx(tmp_path / "short")


def test_missing_data_names_the_debian_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(str(tmp_path), "train")


def test_loader_reads_a_synthetic_root(tmp_path):
    images = np.random.default_rng(1).integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = np.arange(7, dtype=np.uint8) % 3
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", images, 0x08, compress=True)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels, 0x08)
    x, y = load_fashion_mnist(str(tmp_path), "test")
    np.testing.assert_array_equal(x, images)
    np.testing.assert_array_equal(y, labels.astype(np.int64))


def _labels(n_per_class: int = 200, classes: int = 10) -> np.ndarray:
    return np.repeat(np.arange(classes), n_per_class)


def _mean_top_class_share(parts: list[np.ndarray], labels: np.ndarray) -> float:
    return float(np.mean([np.bincount(labels[p], minlength=10).max() / len(p) for p in parts]))


def test_dirichlet_split_is_a_seeded_partition_with_no_empty_part():
    labels = _labels()
    pool = np.arange(len(labels))
    for alpha in (0.05, 0.1, 0.5):
        parts = dirichlet_split(labels, pool, 30, alpha, np.random.default_rng(3))
        assert len(parts) == 30 and min(len(p) for p in parts) >= 2
        again = dirichlet_split(labels, pool, 30, alpha, np.random.default_rng(3))
        assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    # with no borrowing (alpha 0.5 leaves every part >= 2 images here) the parts cover the pool exactly once
    parts = dirichlet_split(labels, pool, 10, 0.5, np.random.default_rng(0))
    assert min(len(p) for p in parts) > 2
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), pool)


def test_label_skew_grows_as_alpha_shrinks():
    labels = _labels()
    pool = np.arange(len(labels))

    def skew_of(alpha: float) -> float:
        splits = [dirichlet_split(labels, pool, 20, alpha, np.random.default_rng(s)) for s in range(5)]
        return float(np.mean([_mean_top_class_share(parts, labels) for parts in splits]))

    skew = {alpha: skew_of(alpha) for alpha in (0.1, 0.5, 100.0)}
    assert skew[0.1] > skew[0.5] + 0.1 > skew[100.0] + 0.2
    assert skew[100.0] < 0.2  # near-IID: the top class holds about a tenth


def test_target_draws_its_samples_and_peers_get_the_rest():
    labels = _labels()
    pool = np.arange(len(labels))
    dist, owned = target_and_peers(labels, pool, 12, 0.3, 40, np.random.default_rng(0))
    assert dist.shape == (10,) and abs(dist.sum() - 1) < 1e-12
    assert len(owned[0]) == 40 and len(owned) == 12
    assert not np.intersect1d(owned[0], np.concatenate(owned[1:])).size


def test_byte_client_data_batches_are_floats_in_the_unit_interval():
    x = torch.tensor([[[0, 255]], [[128, 64]]], dtype=torch.uint8)  # 2 clients, 1 image, 2 pixels
    labels = torch.zeros(2, 1, dtype=torch.int64)
    ones, concept = torch.ones(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64)
    data = ByteClientData(x, labels, ones, concept, torch.full((2, 10), 0.1), x.float(), labels)
    batch, _ = data.sample_batch(3, torch.Generator().manual_seed(0))
    assert batch.dtype == torch.float32
    torch.testing.assert_close(batch[0, 0], torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(batch[1, 2], torch.tensor([128.0, 64.0]) / 255)


@pytest.mark.skipif(not HAS_DEBIAN_DATA, reason="needs `apt-get install dataset-fashion-mnist`")
def test_real_fashion_mnist_federation():
    images, labels = load_fashion_mnist(DEBIAN_ROOT, "train")
    assert images.shape == (60000, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [6000] * 10  # the official split is balanced
    data = fmnist_federation(n_clients=20, dirichlet=0.1, target_samples=40, seed=0, n_test=500)
    assert data.n_clients == 20 and int(data.count[0]) == 40 and int(data.count.min()) >= 2
    assert int(data.count[1:].sum()) == 60000 - 40  # alpha 0.1 over 20 leaves no peer nearly empty here
    assert data.test_x.shape == (20, 500, 784)
    torch.testing.assert_close(data.label_weights.sum(1), torch.ones(20))
    # alpha 0.1: most peers' largest class holds over half their images
    assert float(data.label_weights[1:].max(1).values.median()) > 0.5
