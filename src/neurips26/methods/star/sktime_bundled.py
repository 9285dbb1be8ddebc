"""The MIT-BIH ECG excerpt that ships inside sktime's wheel, read without importing sktime.

``neurips26 data fetch sktime`` downloads the wheel once (``pip download --no-deps sktime==1.2.0``), extracts
``sktime/datasets/data/mitdb/mitdb.csv`` into the data cache (``NEURIPS26_CACHE``, else
``~/.cache/neurips26``) and checks its SHA-256 (``neurips26.data.fetch``). The reader never downloads:
without the file it raises ``DataNotFetched`` naming that command. Nothing is committed and sktime's code
is never imported (only one small text file of its wheel is needed).

The file: 7,500 steps of one ECG lead from the MIT-BIH Arrhythmia Database (PhysioNet, ODC-By 1.0;
360 Hz, so about 21 s and 25 beats), columns ``data,label``; one labelled anomaly, steps 6,936-7,287
(352 steps around a premature beat and its compensatory pause), every other step normal.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from neurips26.data.fetch import SKTIME, fetched_dir
from neurips26.methods.star.labelled_csv import read_labelled_csv

__all__ = ["load_mitdb", "sktime_data_dir"]


def sktime_data_dir() -> Path:
    """The cache folder of sktime's verified file; raises ``DataNotFetched`` naming
    ``neurips26 data fetch sktime`` when it is not there (a run never downloads)."""
    return fetched_dir(SKTIME)


@cache
def load_mitdb() -> tuple[np.ndarray, np.ndarray]:
    """The MIT-BIH excerpt: values (7500, 1) and labels (7500,) int (1 on the 352 anomalous steps)."""
    return read_labelled_csv(sktime_data_dir() / "mitdb" / "mitdb.csv")
