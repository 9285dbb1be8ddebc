"""sktime's MIT-BIH excerpt read without sktime: the CSV reader, the loader on a synthetic file in the same
format (always runs) and on the real file (skips naming the fetch command), and star's ``mitdb`` split."""

from __future__ import annotations

import numpy as np
import pytest

from neurips26.data.fetch import DataNotFetched
from neurips26.methods.star import sktime_bundled
from neurips26.methods.star.labelled_csv import read_labelled_csv
from neurips26.methods.star.state_benchmarks import MITDB_TRAIN_STEPS, make_benchmark


@pytest.fixture
def fresh_loader():
    """``load_mitdb`` caches its result: clear it around a test so no other test sees what this one read."""
    sktime_bundled.load_mitdb.cache_clear()
    yield sktime_bundled.load_mitdb
    sktime_bundled.load_mitdb.cache_clear()


def _write_mitdb_like(folder, values: np.ndarray, labels: np.ndarray) -> None:
    """A file in mitdb.csv's format: header ``data,label``, one value and a 0/1 label per line."""
    (folder / "mitdb").mkdir(parents=True)
    rows = "".join(f"{v:g},{int(y)}\n" for v, y in zip(values, labels, strict=True))
    (folder / "mitdb" / "mitdb.csv").write_text("data,label\n" + rows)


def test_read_labelled_csv_reads_both_layouts_and_refuses_bad_files(tmp_path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("data,label\n-0.195,0\n0.5,1\n1.25,0\n")
    values, labels = read_labelled_csv(path)
    assert np.array_equal(values, [[-0.195], [0.5], [1.25]]) and labels.tolist() == [0, 1, 0]
    assert labels.dtype == np.int64
    path.write_text("timestamp,x,is_anomaly\n1970-01-01 00:00:00,2.5,1\n")  # TimeEval: a text timestamp
    values, labels = read_labelled_csv(path, leading_columns=1)
    assert np.array_equal(values, [[2.5]]) and labels.tolist() == [1]
    path.write_text("data,label\n0.1,2\n")
    with pytest.raises(ValueError, match="must hold 0 or 1"):
        read_labelled_csv(path)
    path.write_text("label\n0\n1\n")
    with pytest.raises(ValueError, match=">= 1 channel"):
        read_labelled_csv(path)
    path.write_text("data,label\n0.1,0\n,1\n")
    with pytest.raises(ValueError, match="missing or non-numeric"):
        read_labelled_csv(path)


def test_loader_and_split_on_a_synthetic_file_in_the_same_format(tmp_path, monkeypatch, fresh_loader) -> None:
    n, anomaly = MITDB_TRAIN_STEPS + 400, slice(MITDB_TRAIN_STEPS + 100, MITDB_TRAIN_STEPS + 130)
    values = np.round(np.sin(np.arange(n) / 5.0), 3)
    labels = np.zeros(n, dtype=np.int64)
    labels[anomaly] = 1
    _write_mitdb_like(tmp_path, values, labels)
    monkeypatch.setattr(sktime_bundled, "sktime_data_dir", lambda: tmp_path)
    read_values, read_labels = fresh_loader()
    assert read_values.shape == (n, 1) and np.allclose(read_values[:, 0], values)
    assert np.array_equal(read_labels, labels)
    data = make_benchmark("mitdb", seed=0)
    assert data.train.shape == (MITDB_TRAIN_STEPS, 1) and data.test.shape == (400, 1)
    assert data.state_columns == {} and np.flatnonzero(data.labels).tolist() == list(range(100, 130))
    assert np.array_equal(make_benchmark("mitdb", seed=7).test, data.test)  # fixed data: seeds vary training


def test_a_label_inside_the_training_split_is_refused(tmp_path, monkeypatch, fresh_loader) -> None:
    labels = np.zeros(MITDB_TRAIN_STEPS + 100, dtype=np.int64)
    labels[10] = 1
    _write_mitdb_like(tmp_path, np.zeros(len(labels)), labels)
    monkeypatch.setattr(sktime_bundled, "sktime_data_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match="labelled step falls in the training split"):
        make_benchmark("mitdb")


def test_the_real_excerpt(fresh_loader) -> None:
    try:
        values, labels = fresh_loader()  # never downloads: tests stay offline
    except DataNotFetched:
        pytest.skip("sktime's MIT-BIH excerpt is not cached: run `neurips26 data fetch sktime`")
    assert values.shape == (7500, 1) and labels.sum() == 352
    assert np.flatnonzero(labels).tolist() == list(range(6936, 7288))  # one contiguous anomaly
    data = make_benchmark("mitdb")
    assert data.train.shape == (3000, 1) and data.test.shape == (4500, 1) and data.labels.sum() == 352
