"""Graph domain-adaptation benchmarks read from PyGDA's raw file layout, without importing PyGDA.

PyGDA (pygda-team/pygda) imports ``torch_sparse``/``torch_scatter`` eagerly, which have no wheels here, so
this module reads the same raw files itself. Nothing is downloaded: the files must already be on disk.
Layout (one folder per domain, PyGDA's ``raw`` sub-folder, file names as PyGDA's dataset classes expect):

* ``citation`` (ACMv9, Citationv1, DBLPv7): ``<root>/citation/<name>/raw/<name>_docs.txt`` (one row of
  comma-separated floats per node), ``<name>_edgelist.txt`` (``src,dst`` per line),
  ``<name>_labels.txt`` (one integer per line).
* ``twitch`` (DE, EN, ES, FR, PT, RU): ``<root>/twitch/<name>/raw/musae_<name>_target.csv`` (header with
  ``mature`` and ``new_id`` columns; label = mature, node id = new_id, first row per id kept),
  ``musae_<name>_edges.csv`` (header, ``from,to``), ``musae_<name>_features.json`` (node id -> list of
  active feature indices, multi-hot of width ``twitch_dim`` = 3,170 as in PyGDA).
* ``airport`` (USA, BRAZIL, EUROPE): ``<root>/airport/<name>/raw/<name>_edgelist.txt`` and
  ``<name>_labels.txt``; the files carry no features.

The family folder is matched case-insensitively (``Citation`` or ``citation``). Our choices, not PyGDA's:
edges are made undirected, deduplicated and freed of self-loops (GCN propagation in both directions),
and airport nodes get one-hot log2-degree buckets as features (the same width in every domain).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neurips26.core.validation import check_choice, check_int

FAMILIES: dict[str, tuple[str, ...]] = {
    "citation": ("ACMv9", "Citationv1", "DBLPv7"),
    "twitch": ("DE", "EN", "ES", "FR", "PT", "RU"),
    "airport": ("USA", "BRAZIL", "EUROPE"),
}
TWITCH_DIM = 3170  # PyGDA's multi-hot width for the Twitch feature indices (union over languages)


class PyGDAFilesMissing(FileNotFoundError):
    """A domain's raw files are not on disk (the experiment reports the PyGDA setting as n/a)."""


@dataclass
class PyGDAPair:
    """A source/target pair of one PyGDA family (PyG ``Data`` with ``x``, ``edge_index``, ``y``)."""

    source: object
    target: object
    family: str
    names: tuple[str, str]


def _family_dir(root: Path, family: str) -> Path:
    if root.is_dir():
        for child in root.iterdir():
            if child.is_dir() and child.name.lower() == family:
                return child
    return root / family


def pygda_raw_dir(root: str | Path, family: str, name: str) -> Path:
    """``<root>/<family>/<name>/raw``, the folder holding one domain's files."""
    check_choice("family", family, tuple(FAMILIES))
    check_choice("name", name, FAMILIES[family])
    return _family_dir(Path(root), family) / name / "raw"


def _required(raw: Path, *names: str) -> list[Path]:
    paths = [raw / name for name in names]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise PyGDAFilesMissing(f"missing {', '.join(missing)}")
    return paths


def _read_edges(path: Path, num_nodes: int, *, header: bool = False) -> torch.Tensor:
    edges = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2, skiprows=1 if header else 0)
    if edges.size == 0:
        edges = np.zeros((0, 2), dtype=np.int64)
    if edges.shape[1] != 2:
        raise ValueError(f"{path}: each line must be 'src,dst', got {edges.shape[1]} columns")
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(f"{path}: node ids must lie in [0, {num_nodes}), got [{edges.min()}, {edges.max()}]")
    return _undirected(torch.as_tensor(edges.T.copy()), num_nodes)


def _undirected(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    from torch_geometric.utils import remove_self_loops, to_undirected

    edge_index, _ = remove_self_loops(edge_index)
    return to_undirected(edge_index, num_nodes=num_nodes)


def _read_labels(path: Path) -> np.ndarray:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    try:
        return np.array([int(line) for line in lines if line], dtype=np.int64)
    except ValueError as exc:
        raise ValueError(f"{path}: every line must be one integer label ({exc})") from None


def _citation(raw: Path, name: str) -> tuple[np.ndarray, torch.Tensor, np.ndarray]:
    docs, edges, labels = _required(raw, f"{name}_docs.txt", f"{name}_edgelist.txt", f"{name}_labels.txt")
    x = np.loadtxt(docs, delimiter=",", dtype=np.float32, ndmin=2)
    y = _read_labels(labels)
    if len(y) != len(x):
        raise ValueError(f"{labels}: {len(y)} labels but {docs} has {len(x)} rows")
    return x, _read_edges(edges, len(x)), y


def _twitch(raw: Path, name: str, dim: int) -> tuple[np.ndarray, torch.Tensor, np.ndarray]:
    target, edges, features = _required(
        raw, f"musae_{name}_target.csv", f"musae_{name}_edges.csv", f"musae_{name}_features.json"
    )
    labels: dict[int, int] = {}
    with target.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"mature", "new_id"} <= set(reader.fieldnames):
            raise ValueError(f"{target}: needs the columns 'mature' and 'new_id', got {reader.fieldnames}")
        for row in reader:
            labels.setdefault(int(row["new_id"]), int(row["mature"].strip() == "True"))
    n = len(labels)
    if sorted(labels) != list(range(n)):
        raise ValueError(f"{target}: new_id must number the nodes 0..{n - 1}")
    y = np.array([labels[i] for i in range(n)], dtype=np.int64)
    x = np.zeros((n, dim), dtype=np.float32)
    active = json.loads(features.read_text(encoding="utf-8"))
    for node, indices in active.items():
        if int(node) < n and indices:
            index = np.asarray(indices, dtype=np.int64)
            if index.min() < 0 or index.max() >= dim:
                raise ValueError(f"{features}: feature index outside [0, {dim}) at node {node}")
            x[int(node), index] = 1.0
    return x, _read_edges(edges, n, header=True), y


def degree_features(edge_index: torch.Tensor, num_nodes: int, buckets: int = 16) -> np.ndarray:
    """One-hot ``min(floor(log2(1 + degree)), buckets - 1)``, ``(num_nodes, buckets)``."""
    degree = np.bincount(edge_index[1].numpy(), minlength=num_nodes)
    bucket = np.minimum(np.floor(np.log2(1.0 + degree)).astype(np.int64), buckets - 1)
    x = np.zeros((num_nodes, buckets), dtype=np.float32)
    x[np.arange(num_nodes), bucket] = 1.0
    return x


def _airport(raw: Path, name: str, buckets: int) -> tuple[np.ndarray, torch.Tensor, np.ndarray]:
    edges, labels = _required(raw, f"{name}_edgelist.txt", f"{name}_labels.txt")
    y = _read_labels(labels)
    edge_index = _read_edges(edges, len(y))
    return degree_features(edge_index, len(y), buckets), edge_index, y


def load_pygda_graph(
    root: str | Path, family: str, name: str, *, twitch_dim: int = TWITCH_DIM, degree_buckets: int = 16
) -> object:
    """One domain as a PyG ``Data`` (``x`` float32, undirected ``edge_index``, ``y`` int64).

    Raises ``PyGDAFilesMissing`` (naming every missing path) when the domain's files are absent and
    ``ValueError`` (naming the file) when they are malformed.
    """
    from torch_geometric.data import Data

    check_int("twitch_dim", twitch_dim, minimum=1)
    check_int("degree_buckets", degree_buckets, minimum=1)
    raw = pygda_raw_dir(root, family, name)
    if family == "citation":
        x, edge_index, y = _citation(raw, name)
    elif family == "twitch":
        x, edge_index, y = _twitch(raw, name, twitch_dim)
    else:
        x, edge_index, y = _airport(raw, name, degree_buckets)
    if y.min() < 0:
        raise ValueError(f"{raw}: labels must be non-negative")
    return Data(
        x=torch.as_tensor(x), edge_index=edge_index, y=torch.as_tensor(y), num_nodes=len(y), domain=name
    )


def load_pygda_pair(root: str | Path, family: str, source: str, target: str) -> PyGDAPair:
    """The ``source -> target`` task of a PyGDA family (e.g. ``citation``, ``ACMv9``, ``DBLPv7``)."""
    if source == target:
        raise ValueError(f"source and target must be different domains, got {source!r} twice")
    pair = PyGDAPair(
        source=load_pygda_graph(root, family, source),
        target=load_pygda_graph(root, family, target),
        family=family,
        names=(source, target),
    )
    if pair.source.x.shape[1] != pair.target.x.shape[1]:
        raise ValueError(
            f"{source} has {pair.source.x.shape[1]} features but {target} has {pair.target.x.shape[1]}"
        )
    return pair
