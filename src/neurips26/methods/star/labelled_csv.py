"""Labelled anomaly series as CSV: a header line, optional leading columns, channels, a 0/1 label last.

Two bundled formats share it: TimeEval's (``timestamp, channels..., is_anomaly``; aeon's anomaly sets) and
sktime's (``data, label``; its MIT-BIH excerpt), which differ only in the leading timestamp column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["read_labelled_csv"]


def read_labelled_csv(path: str | Path, leading_columns: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Values (n, d) float and labels (n,) int (0 normal, 1 anomalous) of a labelled CSV.

    The first line is a header; ``leading_columns`` columns (e.g. a timestamp) are skipped, the last column
    is the label and every column between them is a channel. A file without >= 1 channel, with a missing
    channel value or with a label other than 0/1 raises ``ValueError`` naming the file.
    """
    if leading_columns < 0:
        raise ValueError(f"leading_columns must be >= 0, got {leading_columns}")
    table = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=np.float64, ndmin=2)
    if table.shape[0] == 0 or table.shape[1] < leading_columns + 2:
        expected = f"{leading_columns} leading column(s), >= 1 channel and a label column"
        raise ValueError(f"{path}: expected {expected}, got {table.shape[1]} column(s)")
    values, labels = table[:, leading_columns:-1], table[:, -1]  # leading columns may be text (timestamps)
    if np.isnan(values).any():
        raise ValueError(f"{path}: missing or non-numeric channel values")
    if not np.isin(labels, (0.0, 1.0)).all():
        raise ValueError(f"{path}: the label column (last) must hold 0 or 1")
    return values, labels.astype(np.int64)
