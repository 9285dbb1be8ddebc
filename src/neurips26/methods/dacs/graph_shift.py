"""Source/target graph pairs with controllable covariate shift, for graph domain adaptation.

A contextual stochastic block model (CSBM) in which every class ``y`` has ``n_subclusters`` feature
sub-clusters ``z``, with **two independent knobs** (the decomposition of DACS's abstract):

* ``feature_shift`` (FS): the target's features are moved by an affine map ``x -> x + s * v`` (``v`` a
  fixed unit direction, ``s`` in units of the class-mean spacing). Edges are drawn before and without the
  features, so the edge distribution is untouched.
* ``structure_shift`` (FCSS): target edge probabilities are multiplied by a factor ``g(i, j)`` that
  depends on the endpoints' *features* only, normalised so that ``E[g(i, j) | i, y_j] = 1``: the
  label-level edge matrix ``P(edge | y_i, y_j)`` and the feature marginal are both unchanged.
  ``structure_mode="subcluster"`` makes ``g`` depend on whether ``z_i == z_j`` (a partition k-means can
  recover); ``structure_mode="score"`` uses ``g = 1 + s * phi_i * phi_j`` with a continuous score
  ``phi = tanh(u . (x - m) / tau)`` that no finite partition matches.

Plus Pair-Align-style controls: ``label_shift`` (the target's class proportions tilt as
``pi_T(c) ~ exp(label_shift * t_c)``, ``t`` evenly spaced in [-1, 1]) and ``degree_ratio`` (target mean
degree / source mean degree).

Edges are sampled in ``O(edges)`` (a binomial count per class-block pair, distinct pairs by
``numpy.random.Generator.choice``, then thinning by ``g / max g``); ``torch_geometric.utils.
stochastic_blockmodel_graph`` (dense ``O(n^2)``, global RNG) is used as the oracle in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from neurips26.core.validation import check_choice, check_in_range, check_int, check_positive

STRUCTURE_MODES = ("subcluster", "score")


@dataclass(frozen=True)
class CSBMShift:
    """The parameters of one source/target pair (every default cites its reason).

    Parameters
    ----------
    n_nodes: nodes per domain (issue: about 3k per domain in the full experiment).
    n_classes, n_subclusters: ``C`` classes times ``S`` feature sub-clusters (research notes: 3 x 2).
    dim: feature dimension (research notes: 16 to 32).
    avg_degree: source mean degree (issue: about 10).
    homophily: expected fraction of a node's edges that stay in its class (same in both domains).
    class_separation: distance between class means, in units of the noise std.
    subcluster_offset: a sub-cluster sits this fraction of the way towards (or away from) a neighbouring
        class mean, so features alone are ambiguous and neighbour averaging matters.
    feature_shift: FS strength (target features move by ``feature_shift * class_separation`` along ``v``).
    structure_shift: FCSS strength ``s`` in [0, 1] (``g`` ranges over [1 - s, 1 + s]).
    structure_mode: ``"subcluster"`` or ``"score"`` (see the module docstring).
    label_shift: tilt of the target's class proportions (0: same as the source, uniform).
    degree_ratio: target mean degree over source mean degree.
    score_temperature: ``tau`` of the continuous score.
    subcluster_spread: sub-clusters also sit at ``+-subcluster_spread`` (noise stds) along a label-free
        axis, the axis the continuous score reads.
    """

    n_nodes: int = 3000
    n_classes: int = 3
    n_subclusters: int = 2
    dim: int = 16
    avg_degree: float = 10.0
    homophily: float = 0.7
    class_separation: float = 2.0
    subcluster_offset: float = 0.65
    feature_shift: float = 0.0
    structure_shift: float = 0.0
    structure_mode: str = "subcluster"
    label_shift: float = 0.0
    degree_ratio: float = 1.0
    score_temperature: float = 3.0
    subcluster_spread: float = 3.0

    def __post_init__(self) -> None:
        check_int("n_nodes", self.n_nodes, minimum=4)
        check_int("n_classes", self.n_classes, minimum=2)
        check_int("n_subclusters", self.n_subclusters, minimum=1)
        check_int("dim", self.dim, minimum=self.n_classes + 2)
        check_positive("avg_degree", self.avg_degree)
        check_in_range("homophily", self.homophily, 0.0, 1.0)
        check_positive("class_separation", self.class_separation)
        check_positive("subcluster_offset", self.subcluster_offset, allow_zero=True)
        check_positive("feature_shift", self.feature_shift, allow_zero=True)
        check_in_range("structure_shift", self.structure_shift, 0.0, 1.0)
        check_choice("structure_mode", self.structure_mode, STRUCTURE_MODES)
        check_positive("degree_ratio", self.degree_ratio)
        check_positive("score_temperature", self.score_temperature)
        check_positive("subcluster_spread", self.subcluster_spread, allow_zero=True)
        if isinstance(self.label_shift, bool) or not isinstance(self.label_shift, (int, float)):
            raise TypeError(f"label_shift must be a number, got {self.label_shift!r}")
        if self.structure_mode == "subcluster" and self.n_subclusters < 2 and self.structure_shift > 0:
            raise ValueError("structure_shift > 0 with structure_mode='subcluster' needs n_subclusters >= 2")
        expected_per_class = self.avg_degree * max(self.degree_ratio, 1.0) * (1.0 + self.structure_shift)
        if expected_per_class > self.n_nodes / self.n_classes:
            raise ValueError(
                f"avg_degree={self.avg_degree} (x degree_ratio, x (1 + structure_shift)) is too large for "
                f"n_nodes={self.n_nodes}: edge probabilities would exceed 1"
            )


@dataclass
class GraphShiftPair:
    """A generated source/target pair and the generator's ground truth (never read by the estimators).

    ``source`` and ``target`` are ``torch_geometric.data.Data`` with ``x``, ``edge_index`` (undirected,
    both directions), ``y``, plus ``subcluster`` and ``clean_x`` (features before FS): the latter two are
    ground truth for scoring only.
    """

    source: object
    target: object
    spec: CSBMShift
    shift_direction: torch.Tensor
    class_means: torch.Tensor
    score_direction: torch.Tensor
    class_probs: dict[str, np.ndarray] = field(default_factory=dict)
    block_matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def structure_factor(
        self, data: object, domain: str, edge_index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``g(i, j)`` of ``domain`` for each edge of ``edge_index`` (default ``data.edge_index``)."""
        edges = data.edge_index if edge_index is None else edge_index
        strength = self.spec.structure_shift if domain == "target" else 0.0
        factor = _structure_factor(self.spec, strength, data.subcluster, self._score(data), edges)
        return torch.as_tensor(factor, dtype=torch.float32)

    def true_edge_ratio(self, edge_index: torch.Tensor | None = None) -> torch.Tensor:
        """The true feature-conditional ratio ``P_T(j | i) / P_S(j | i)`` on source edges ``(j -> i)``.

        ``P(neighbour j | node i) = B[y_i, y_j] pi(y_j) g(i, j) / sum_c B[y_i, c] pi(c)``, evaluated at the
        source nodes' (clean) features; ``edge_index[1]`` is the receiving node ``i``.
        """
        data = self.source
        edges = data.edge_index if edge_index is None else edge_index
        j, i = edges[0], edges[1]
        g_t = self.structure_factor(data, "target", edges).double()
        pi_s = torch.as_tensor(self.class_probs["source"])
        pi_t = torch.as_tensor(self.class_probs["target"])
        block = torch.as_tensor(self.block_matrix)
        norm_s = block @ pi_s
        norm_t = block @ pi_t
        y = data.y
        ratio = g_t * (pi_t[y[j]] / pi_s[y[j]]) * (norm_s[y[i]] / norm_t[y[i]])
        return ratio.float()

    def _score(self, data: object) -> np.ndarray:
        return _score(self.spec, data.clean_x.numpy(), self.score_direction.numpy())


def _class_probs(spec: CSBMShift, shifted: bool) -> np.ndarray:
    if not shifted or spec.label_shift == 0:
        return np.full(spec.n_classes, 1.0 / spec.n_classes)
    tilt = np.exp(spec.label_shift * np.linspace(-1.0, 1.0, spec.n_classes))
    return tilt / tilt.sum()


def _geometry(
    spec: CSBMShift, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Class means, sub-cluster means, the FS direction and the score direction (a random rotation)."""
    basis, _ = np.linalg.qr(rng.standard_normal((spec.dim, spec.dim)))
    # class means: a regular simplex of side class_separation in the first C basis directions
    simplex = np.eye(spec.n_classes) * (spec.class_separation / math.sqrt(2.0))
    simplex -= simplex.mean(axis=0, keepdims=True)
    class_means = simplex @ basis[:, : spec.n_classes].T  # (C, dim)
    # sub-cluster z of class y sits offset along (mu_{y+1} - mu_y), at symmetric positions in [-1, 1]
    positions = np.linspace(-1.0, 1.0, spec.n_subclusters) if spec.n_subclusters > 1 else np.zeros(1)
    toward = np.roll(class_means, -1, axis=0) - class_means  # (C, dim)
    sub_means = class_means[:, None, :] + spec.subcluster_offset * positions[None, :, None] * toward[:, None]
    # sub-clusters also spread along a label-free axis (the score's axis), at the same symmetric positions
    free_axis = basis[:, spec.n_classes + 1]
    sub_means = sub_means + spec.subcluster_spread * positions[None, :, None] * free_axis[None, None, :]
    shift_direction = basis[:, 0] + basis[:, 1] + basis[:, spec.n_classes]  # mixes class and free axes
    shift_direction /= np.linalg.norm(shift_direction)
    # the score reads the label-free axis: its within-class law is symmetric about 0 for every class (class
    # means have no component there), so E[phi | y] = 0; correlated with the sub-cluster, not a partition
    score_direction = free_axis
    return class_means, sub_means, shift_direction, score_direction


def _score(spec: CSBMShift, clean_x: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """phi_i = tanh(u . x_i / tau) on clean features (zero mean within each class by symmetry)."""
    return np.tanh(clean_x @ direction / spec.score_temperature)


def _structure_factor(
    spec: CSBMShift,
    strength: float,
    subcluster: torch.Tensor | np.ndarray,
    score: np.ndarray,
    edge_index: torch.Tensor | np.ndarray,
) -> np.ndarray:
    """g(i, j) for each pair of ``edge_index``; its mean over j given i and y_j is 1."""
    rows = np.asarray(edge_index[0])
    cols = np.asarray(edge_index[1])
    if strength == 0:
        return np.ones(rows.shape[0])
    if spec.structure_mode == "subcluster":
        z = np.asarray(subcluster)
        same = (z[rows] == z[cols]).astype(np.float64)
        s = spec.n_subclusters
        return 1.0 + strength * (s * same - 1.0) / (s - 1.0)
    return 1.0 + strength * score[rows] * score[cols]


def _triangle_pairs(n: int, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode linear indices of the strict upper triangle of an n x n matrix into (row, col), row < col."""
    k = index.astype(np.float64)
    i = n - 2 - np.floor(np.sqrt(-8.0 * k + 4.0 * n * (n - 1) - 7.0) / 2.0 - 0.5)
    i = i.astype(np.int64)
    j = (index + i + 1 - n * (n - 1) // 2 + (n - i) * (n - i - 1) // 2).astype(np.int64)
    return i, j


def sample_block_edges(
    block_sizes: np.ndarray, edge_probs: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Undirected SBM edges in ``O(edges)``: per block pair, a binomial count of distinct uniform pairs.

    Nodes are numbered block by block. Returns a ``(2, m)`` array with each undirected edge once
    (``row < col``), the same law as ``torch_geometric.utils.stochastic_blockmodel_graph``.
    """
    offsets = np.concatenate([[0], np.cumsum(block_sizes)])
    parts = []
    for a in range(len(block_sizes)):
        for b in range(a, len(block_sizes)):
            n_a, n_b = int(block_sizes[a]), int(block_sizes[b])
            total = n_a * (n_a - 1) // 2 if a == b else n_a * n_b
            if total == 0 or edge_probs[a, b] <= 0:
                continue
            count = rng.binomial(total, min(float(edge_probs[a, b]), 1.0))
            if count == 0:
                continue
            chosen = rng.choice(total, size=count, replace=False)
            if a == b:
                r, c = _triangle_pairs(n_a, chosen)
            else:
                r, c = chosen // n_b, chosen % n_b
            parts.append(np.stack([r + offsets[a], c + offsets[b]]))
    if not parts:
        return np.zeros((2, 0), dtype=np.int64)
    return np.concatenate(parts, axis=1)


def _make_domain(
    spec: CSBMShift,
    pair_geometry: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    block: np.ndarray,
    probs: np.ndarray,
    structure_strength: float,
    degree_scale: float,
    feature_shift: float,
    rng: np.random.Generator,
) -> object:
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    _, sub_means, shift_direction, score_direction = pair_geometry
    n = spec.n_nodes
    counts = rng.multinomial(n, probs)
    y = np.repeat(np.arange(spec.n_classes), counts)
    z = rng.integers(0, spec.n_subclusters, size=n)
    clean_x = sub_means[y, z] + rng.standard_normal((n, spec.dim))
    score = _score(spec, clean_x, score_direction)
    # proposal: the label-level SBM scaled by max g, then thinning by g / max g (exact rejection sampling)
    g_max = 1.0 + structure_strength
    proposal = sample_block_edges(counts, block * degree_scale * g_max, rng)
    factor = _structure_factor(spec, structure_strength, z, score, proposal)
    keep = rng.random(proposal.shape[1]) < factor / g_max
    edges = proposal[:, keep]
    x = clean_x + feature_shift * spec.class_separation * shift_direction[None, :]
    # a random node order, so nothing positional carries the class
    order = rng.permutation(n)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    edge_index = to_undirected(torch.as_tensor(inverse[edges], dtype=torch.long), num_nodes=n)
    return Data(
        x=torch.as_tensor(x[order], dtype=torch.float32),
        edge_index=edge_index,
        y=torch.as_tensor(y[order], dtype=torch.long),
        subcluster=torch.as_tensor(z[order], dtype=torch.long),
        clean_x=torch.as_tensor(clean_x[order], dtype=torch.float32),
        num_nodes=n,
    )


def label_block_matrix(spec: CSBMShift) -> np.ndarray:
    """``B[y, y']``: the label-level edge probability, fixed across domains (before ``degree_ratio``).

    Chosen so that under uniform classes a node expects ``homophily * avg_degree`` same-class and
    ``(1 - homophily) * avg_degree`` other-class neighbours.
    """
    per_class = spec.n_nodes / spec.n_classes
    p_in = spec.homophily * spec.avg_degree / per_class
    p_out = (1.0 - spec.homophily) * spec.avg_degree / (spec.n_nodes - per_class)
    block = np.full((spec.n_classes, spec.n_classes), p_out)
    np.fill_diagonal(block, p_in)
    return block


def make_csbm_pair(spec: CSBMShift | None = None, seed: int = 0, **overrides: object) -> GraphShiftPair:
    """Draw a source/target CSBM pair with the shifts of ``spec`` (or ``CSBMShift(**overrides)``).

    Parameters
    ----------
    spec: the generator's parameters; keyword ``overrides`` build one when it is None.
    seed: one integer seeds everything (geometry, labels, features, edges) through numpy's Generator.

    Returns
    -------
    GraphShiftPair with ``source`` (no shift) and ``target`` (FS, FCSS, label shift, degree ratio).
    """
    if spec is None:
        spec = CSBMShift(**overrides)  # type: ignore[arg-type]
    elif overrides:
        raise ValueError("pass either spec or keyword overrides, not both")
    if not isinstance(spec, CSBMShift):
        raise TypeError(f"spec must be a CSBMShift, got {type(spec).__name__}")
    check_int("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    geometry = _geometry(spec, rng)
    block = label_block_matrix(spec)
    probs_s = _class_probs(spec, shifted=False)
    probs_t = _class_probs(spec, shifted=True)
    source = _make_domain(spec, geometry, block, probs_s, 0.0, 1.0, 0.0, rng)
    target = _make_domain(
        spec, geometry, block, probs_t, spec.structure_shift, spec.degree_ratio, spec.feature_shift, rng
    )
    class_means, _, shift_direction, score_direction = geometry
    return GraphShiftPair(
        source=source,
        target=target,
        spec=spec,
        shift_direction=torch.as_tensor(shift_direction, dtype=torch.float32),
        class_means=torch.as_tensor(class_means, dtype=torch.float32),
        score_direction=torch.as_tensor(score_direction, dtype=torch.float32),
        class_probs={"source": probs_s, "target": probs_t},
        block_matrix=block,
    )


@dataclass
class DigitsGraphPair:
    """A semi-real pair: sklearn's handwritten digits as node features, kNN graphs as edges."""

    source: object
    target: object
    feature_shift: float
    structure_shift: float


def _blur(images: np.ndarray, amount: float) -> np.ndarray:
    """Mix each 8x8 image with its 3x3 box average (amount in [0, 1])."""
    padded = np.pad(images, ((0, 0), (1, 1), (1, 1)), mode="edge")
    box = sum(padded[:, 1 + dy : 9 + dy, 1 + dx : 9 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) / 9.0
    return (1.0 - amount) * images + amount * box


def _knn_edges(features: np.ndarray, k: int) -> torch.Tensor:
    from sklearn.neighbors import NearestNeighbors
    from torch_geometric.utils import to_undirected

    neighbours = NearestNeighbors(n_neighbors=k + 1).fit(features).kneighbors(features, return_distance=False)
    rows = np.repeat(np.arange(features.shape[0]), k)
    cols = neighbours[:, 1:].reshape(-1)
    edges = torch.as_tensor(np.stack([cols, rows]), dtype=torch.long)
    return to_undirected(edges, num_nodes=features.shape[0])


def make_digits_pair(
    seed: int = 0, feature_shift: float = 1.0, structure_shift: float = 1.0, k: int = 8
) -> DigitsGraphPair:
    """Source/target graphs from ``sklearn.datasets.load_digits`` (1,797 real 8x8 images, 10 classes).

    The images are split at random into two domains. Source: pixel features in [0, 1], edges from a kNN
    graph in pixel space. Target FS: intensity ``x * (1 - 0.4 s) + 0.25 s`` and a 3x3 blur mixed in with
    weight ``s`` (``s = feature_shift``, clipped to [0, 1] for the blur). Target FCSS: the kNN graph is
    built in another feature subspace, a mix ``(1 - t) * all pixels + t * left half only`` of the
    *untransformed* images (``t = structure_shift``), so who connects to whom depends on features
    differently than in the source, while the node features' law is untouched by ``t``.
    """
    from sklearn.datasets import load_digits
    from torch_geometric.data import Data

    check_int("seed", seed, minimum=0)
    check_int("k", k, minimum=1)
    check_positive("feature_shift", feature_shift, allow_zero=True)
    check_in_range("structure_shift", structure_shift, 0.0, 1.0)
    digits = load_digits()
    images = digits.images / 16.0
    labels = digits.target
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    half = len(labels) // 2
    src, tgt = order[:half], order[half:]

    def domain(idx: np.ndarray, fs: float, fcss: float) -> object:
        clean = images[idx]
        shifted = _blur(clean, min(fs, 1.0)) * (1.0 - 0.4 * fs) + 0.25 * fs
        edge_space = clean.reshape(len(idx), -1).copy()
        if fcss > 0:
            left = clean.copy()
            left[:, :, 4:] = 0.0
            edge_space = (1.0 - fcss) * edge_space + fcss * left.reshape(len(idx), -1)
        return Data(
            x=torch.as_tensor(shifted.reshape(len(idx), -1), dtype=torch.float32),
            edge_index=_knn_edges(edge_space, k),
            y=torch.as_tensor(labels[idx], dtype=torch.long),
            num_nodes=len(idx),
        )

    return DigitsGraphPair(
        source=domain(src, 0.0, 0.0),
        target=domain(tgt, feature_shift, structure_shift),
        feature_shift=feature_shift,
        structure_shift=structure_shift,
    )
