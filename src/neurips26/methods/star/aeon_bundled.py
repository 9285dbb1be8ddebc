"""Series that ship inside aeon's wheel, read without importing aeon.

aeon 1.6 pins ``numba < 0.64``, which would downgrade numba and numpy for every other method in this
project, so aeon is not a dependency. Its bundled data files are plain text, though:
``neurips26 data fetch aeon`` downloads the wheel once (``pip download --no-deps aeon==1.6.0``), extracts the
few files read here into the data cache (``NEURIPS26_CACHE``, else ``~/.cache/neurips26``) and checks each
file's SHA-256 (``neurips26.data.fetch``). The readers below never download: without the files they raise
``DataNotFetched`` naming that command. Small readers of our own parse them (``.ts`` for the classification
sets, TimeEval ``.csv`` for the anomaly sets). Nothing is committed and aeon's code is never imported.

Sets read here: ``BasicMotions`` (80 instances of 6 IMU channels x 100 steps, 4 activities),
``JapaneseVowels`` (640 utterances of 12 LPC channels x 7-29 steps, 9 speakers), ``KDD-TSAD_135``
(UCR InternalBleeding16: 1,200 normal training steps, a 7,501-step test series with one labelled anomaly)
and ``Daphnet_S06R02E0`` (7,040 steps x 9 accelerometer channels; the shipped excerpt holds **no**
labelled freeze-of-gait episode, as aeon 1.6's deprecation note says).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from neurips26.data.fetch import AEON, fetched_dir
from neurips26.methods.star.labelled_csv import read_labelled_csv

__all__ = [
    "aeon_data_dir",
    "load_basic_motions",
    "load_daphnet_s06r02e0",
    "load_japanese_vowels",
    "load_kdd_tsad_135",
    "read_timeeval_csv",
    "read_ts",
]


def aeon_data_dir() -> Path:
    """The cache folder of aeon's verified files; raises ``DataNotFetched`` naming
    ``neurips26 data fetch aeon`` when they are not there (a run never downloads)."""
    return fetched_dir(AEON)


def read_ts(path: str | Path) -> tuple[list[np.ndarray], np.ndarray, tuple[str, ...]]:
    """Read a ``.ts`` classification file (sktime/aeon text format, no missing values, no timestamps).

    Returns the instances (a list of (n_channels, length) float arrays; lengths may differ between
    instances), their class labels (as strings) and the declared class vocabulary (``@classLabel``).
    """
    instances: list[np.ndarray] = []
    labels: list[str] = []
    classes: tuple[str, ...] = ()
    in_data = False
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            lower = line.lower()
            if lower.startswith("@classlabel"):
                parts = line.split()
                classes = tuple(parts[2:]) if len(parts) > 2 and parts[1].lower() == "true" else ()
            elif lower.startswith("@data"):
                in_data = True
            continue
        *dims, label = line.split(":")
        rows = [np.array(d.split(","), dtype=np.float64) for d in dims]
        if len({len(r) for r in rows}) != 1:
            raise ValueError(f"{path}: an instance's channels differ in length (unequal-length channels)")
        instances.append(np.stack(rows))
        labels.append(label.strip())
    if not instances:
        raise ValueError(f"{path}: no @data section with instances")
    return instances, np.array(labels), classes


def read_timeeval_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a TimeEval ``.csv`` (timestamp, channels..., is_anomaly): values (n, d) and labels (n,) int."""
    return read_labelled_csv(path, leading_columns=1)


@cache
def _classification(name: str, split: str) -> tuple[tuple[np.ndarray, ...], np.ndarray, tuple[str, ...]]:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    instances, labels, classes = read_ts(aeon_data_dir() / name / f"{name}_{split.upper()}.ts")
    return tuple(instances), labels, classes


def load_basic_motions(split: str) -> tuple[tuple[np.ndarray, ...], np.ndarray, tuple[str, ...]]:
    """BasicMotions: 40 instances per split, (6, 100) each (3-D accelerometer + gyroscope at 10 Hz); labels
    among Standing, Running, Walking, Badminton."""
    return _classification("BasicMotions", split)


def load_japanese_vowels(split: str) -> tuple[tuple[np.ndarray, ...], np.ndarray, tuple[str, ...]]:
    """JapaneseVowels: 270 train / 370 test utterances of /ae/, (12, 7-29) LPC cepstra; label = speaker
    1-9."""
    return _classification("JapaneseVowels", split)


@cache
def load_kdd_tsad_135() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """KDD-TSAD 135 (UCR InternalBleeding16): training series (1200, 1) (normal), test series (7501, 1)
    and its labels (one anomaly at steps 4187-4198). The test file repeats the training steps first."""
    folder = aeon_data_dir() / "KDD-TSAD_135"
    train, _ = read_timeeval_csv(folder / "135_UCR_Anomaly_InternalBleeding16_TRAIN.csv")
    test, labels = read_timeeval_csv(folder / "135_UCR_Anomaly_InternalBleeding16_TEST.csv")
    return train, test, labels


@cache
def load_daphnet_s06r02e0() -> np.ndarray:
    """Daphnet S06R02E0: (7040, 9) accelerometer readings (ankle, thigh, trunk x 3 axes). No step is
    labelled anomalous in this excerpt."""
    values, _ = read_timeeval_csv(aeon_data_dir() / "Daphnet_S06R02E0" / "S06R02E0.csv")
    return values
