"""Series that ship inside aeon's wheel, read without importing aeon.

aeon 1.6 pins ``numba < 0.64``, which would downgrade numba and numpy for every other method in this
project, so aeon is not a dependency. Its bundled data files are plain text, though: this module fetches
the wheel once with ``pip download --no-deps aeon==1.6.0`` into the data cache (``NEURIPS26_CACHE``, else
``~/.cache/neurips26``), extracts the few files it needs, checks each file's SHA-256 and parses them with
small readers of its own (``.ts`` for the classification sets, TimeEval ``.csv`` for the anomaly sets).
Nothing is committed and aeon's code is never imported.

Sets read here: ``BasicMotions`` (80 instances of 6 IMU channels x 100 steps, 4 activities),
``JapaneseVowels`` (640 utterances of 12 LPC channels x 7-29 steps, 9 speakers), ``KDD-TSAD_135``
(UCR InternalBleeding16: 1,200 normal training steps, a 7,501-step test series with one labelled anomaly)
and ``Daphnet_S06R02E0`` (7,040 steps x 9 accelerometer channels; the shipped excerpt holds **no**
labelled freeze-of-gait episode, as aeon 1.6's deprecation note says).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import numpy as np

__all__ = [
    "AEON_VERSION",
    "AeonDataUnavailable",
    "aeon_data_dir",
    "load_basic_motions",
    "load_daphnet_s06r02e0",
    "load_japanese_vowels",
    "load_kdd_tsad_135",
    "read_timeeval_csv",
    "read_ts",
]

AEON_VERSION = "1.6.0"
_DATA = "aeon/datasets/data/"
# SHA-256 of each file as shipped in aeon-1.6.0-py3-none-any.whl
FILES = {
    "BasicMotions/BasicMotions_TRAIN.ts": "8dc43cc6306cb679c888c01e26f91772ac4441a916da43bac8b79734a538b9d6",
    "BasicMotions/BasicMotions_TEST.ts": "79213102bc6fca1a398ad98ce1185dff0208fa3d1465e687f48288946b0ff8dc",
    "JapaneseVowels/JapaneseVowels_TRAIN.ts": (
        "68a430eabd919cc77f40b1f5f3bc0dcafacc1486bca9260785aeb7d262cc78cd"
    ),
    "JapaneseVowels/JapaneseVowels_TEST.ts": (
        "b3d41d6a0ca3bcad3afb9ca7d4365382aa51341e2e58bae2a574babdda5b9462"
    ),
    "Daphnet_S06R02E0/S06R02E0.csv": "5a1d2990fec3846c3e1bc43487f0860e63434bd06b3df763012e97ce23d0d84c",
    "KDD-TSAD_135/135_UCR_Anomaly_InternalBleeding16_TRAIN.csv": (
        "a531b6f4f556b17c0321d144c3f6b4a7bdf5e8464b2218566181702e77962c2b"
    ),
    "KDD-TSAD_135/135_UCR_Anomaly_InternalBleeding16_TEST.csv": (
        "fe26577b94896943e8205d04d56bf2511fe05c008df535a1ec3826adff3597e2"
    ),
}


class AeonDataUnavailable(RuntimeError):
    """The aeon wheel could not be fetched (no package index reachable) and no cached copy exists."""


def _cache_root() -> Path:
    return Path(os.environ.get("NEURIPS26_CACHE", str(Path.home() / ".cache" / "neurips26")))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _complete(folder: Path) -> bool:
    return all(
        (folder / name).is_file() and _sha256(folder / name) == digest for name, digest in FILES.items()
    )


def aeon_data_dir(fetch: bool = True) -> Path:
    """The folder holding the extracted, checksum-verified files (fetched on first use when ``fetch``).

    Raises ``AeonDataUnavailable`` with the command to run by hand when the wheel cannot be fetched.
    """
    folder = _cache_root() / f"aeon-{AEON_VERSION}-data"
    if _complete(folder):
        return folder
    if not fetch:
        raise AeonDataUnavailable(f"aeon {AEON_VERSION}'s bundled data is not in {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", f"aeon=={AEON_VERSION}", "-d", tmp]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = list(Path(tmp).glob("aeon-*.whl"))
        if done.returncode != 0 or not wheels:
            raise AeonDataUnavailable(
                f"could not fetch aeon {AEON_VERSION}'s wheel for its bundled data "
                f"({done.stderr.strip()[-300:]}); "
                f"run `pip download --no-deps aeon=={AEON_VERSION} -d DIR` where an index is reachable and "
                f"extract {_DATA}{{{','.join(sorted({n.split('/')[0] for n in FILES}))}}} into {folder}"
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in FILES:
                target = folder / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(_DATA + name))
    bad = [name for name, digest in FILES.items() if _sha256(folder / name) != digest]
    if bad:
        raise AeonDataUnavailable(f"checksum mismatch for {bad} in {folder}: not aeon {AEON_VERSION}'s files")
    return folder


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
    table = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=np.float64, usecols=None)
    if table.ndim != 2 or table.shape[1] < 3:
        raise ValueError(f"{path}: expected timestamp, >= 1 channel and is_anomaly columns")
    return table[:, 1:-1], table[:, -1].astype(np.int64)


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
