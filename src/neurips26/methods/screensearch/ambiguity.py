"""Ambiguity as matched-action outcome dispersion (ScreenSearch's signal), with repeat-probe noise separation.

Paper says: "If similar screens produce different next states under the same action signature, the state
should be probed further rather than treated as resolved." We chose (issue #32): for state ``s`` and action
signature ``a``, take ``s`` itself (weight 1) and the ``K`` screens most similar to ``s`` by BM25 that also
tried ``a`` and whose exact Jaccard with ``s`` is at least ``min_similarity`` (weight = Jaccard); mix their
empirical outcome distributions with those weights and take the entropy (nats):

    p(o | s, a) = sum_j w_j n_j(o) / N_j  /  sum_j w_j ,    D(s, a) = -sum_o p(o) log p(o).

Outcomes are classes relative to the source screen (ours): ``stay`` (the action left the state as it
was), ``variant`` (a different state still similar to the source: a toggled check box, a digit typed)
or the next state's id. Why: similar screens are, by construction, different states, and their
analogous effects must count as agreement, not dispersion. On apps whose profile declares *content*
elements (a calculator's display, an editor's buffer), a next state that differs from the source only in
content also counts as ``stay`` (``mask_content``): typing a digit changes the display on one screen and
not on a similar one (``0`` then ``0``), which is the key's ordinary content dependence, not hidden state.
Likewise two next states that differ only in content (a menu opened over display ``7`` and over ``70``)
are one outcome. The cost: hidden state that shows only in content (a memory register recalled into the
display) is then invisible to the signal.

Repeat probes separate nondeterminism from hidden-state aliasing (ours): every transition is stored with
the action history since the last reset. A reset is deterministic, so two probes after the same history
reach the same hidden state; outcome spread *within* one history is noise,

    H_noise(s, a) = sum_h (n_h - 1) H(o | s, a, h) / sum_h (n_h - 1)   (histories with n_h >= 2),

and the aliasing part is ``A(s, a) = max(0, D(s, a) - H_noise(s, a))``. A history group is *resolved* once
probed ``min_probes`` times; the exploration bonus and the ambiguity mass use the unresolved part
``U(s, a) = A(s, a) (1 - resolved fraction)``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from neurips26.methods.screensearch.graph import StateGraph
from neurips26.methods.screensearch.screen import jaccard


def matched_outcome_entropy(weights: np.ndarray, counts: np.ndarray) -> float:
    """Entropy (nats) of the similarity-weighted mixture of per-neighbour outcome distributions.

    Parameters
    ----------
    weights: ``(K,)`` non-negative similarities of the matched screens.
    counts: ``(K, M)`` outcome counts per matched screen over a shared outcome vocabulary.
    """
    weights = np.asarray(weights, dtype=float)
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or weights.shape != (counts.shape[0],):
        raise ValueError(f"weights must be (K,) and counts (K, M); got {weights.shape} and {counts.shape}")
    if (weights < 0).any() or (counts < 0).any():
        raise ValueError("weights and counts must be non-negative")
    totals = counts.sum(axis=1)
    keep = (totals > 0) & (weights > 0)
    if not keep.any():
        return 0.0
    mixture = (weights[keep, None] * counts[keep] / totals[keep, None]).sum(axis=0) / weights[keep].sum()
    p = mixture[mixture > 0]
    return float(max(0.0, -(p * np.log(p)).sum()))


def entropy(counts: Mapping[object, int] | Sequence[int]) -> float:
    """Entropy (nats) of a count vector or mapping."""
    values = np.asarray(list(counts.values()) if isinstance(counts, Mapping) else list(counts), dtype=float)
    values = values[values > 0]
    if values.size == 0:
        return 0.0
    p = values / values.sum()
    return float(max(0.0, -(p * np.log(p)).sum()))


class AmbiguityEstimator:
    """Matched-action outcome dispersion over a :class:`StateGraph`.

    Parameters
    ----------
    graph: the state graph (its index retrieves the similar screens).
    k: matched screens besides ``s`` (ours: 8).
    min_similarity: exact-Jaccard floor of a matched screen (ours: 0.8, below the 0.9 dedup threshold so
        the band [0.8, 0.9) of similar-but-distinct states is what matching adds).
    separate_noise: subtract the within-history (repeat-probe) entropy (ours: on; off = raw dispersion).
    min_probes: probes of one history after which that history counts as resolved (ours: 2).
    mask_content: a content-only change counts as ``stay`` (states need a structure key, :meth:`set_shape`).
    """

    def __init__(
        self,
        graph: StateGraph,
        k: int = 8,
        min_similarity: float = 0.8,
        separate_noise: bool = True,
        min_probes: int = 2,
        mask_content: bool = True,
    ) -> None:
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if not 0.0 < min_similarity <= 1.0:
            raise ValueError(f"min_similarity must lie in (0, 1], got {min_similarity}")
        if min_probes < 1:
            raise ValueError(f"min_probes must be >= 1, got {min_probes}")
        self.graph = graph
        self.k = k
        self.min_similarity = min_similarity
        self.separate_noise = separate_noise
        self.min_probes = min_probes
        self.mask_content = mask_content
        self.shapes: dict[int, str] = {}
        self._neighbours: dict[int, list[tuple[int, float]]] = {}
        self._classes_cache: dict[tuple[int, int], object] = {}

    def _sync(self) -> None:
        """Retrieve the matched screens of states added since the last call (one BM25 query each); the
        relation is symmetric, so each new state is also appended to its matches' lists."""
        if len(self._neighbours) == self.graph.num_states:
            return
        sets = self.graph.index.sets
        for state in self.graph.state_actions:
            if state in self._neighbours:
                continue
            found = []
            if self.k > 0:
                found = self.graph.index.similar(sets[state], self.k, self.min_similarity, exclude=state)
            self._neighbours[state] = found
            for other, weight in found:
                if other in self._neighbours and all(s != state for s, _ in self._neighbours[other]):
                    self._neighbours[other].append((state, weight))

    def neighbours(self, state: int) -> list[tuple[int, float]]:
        """``[(state, 1.0), (similar state, Jaccard), ...]``, kept up to date as states are added."""
        self._sync()
        return [(state, 1.0), *self._neighbours.get(state, [])]

    def set_shape(self, state: int, key: str | None) -> None:
        """Record ``state``'s structure key (:func:`~neurips26.methods.screensearch.screen.structure_key`)."""
        if key is not None:
            self.shapes.setdefault(state, key)

    def outcome_class(self, src: int, dst: int) -> object:
        """``"stay"`` (also a content-only change with ``mask_content``), ``"variant"`` (a different but
        similar state) or the next state: its id, or with ``mask_content`` its structure key when it has
        content (a menu opened over display ``7`` and over ``70`` is one outcome)."""
        if dst == src:
            return "stay"
        if self.mask_content and src in self.shapes and self.shapes[src] == self.shapes.get(dst):
            return "stay"
        cached = self._classes_cache.get((src, dst))
        if cached is None:
            sets = self.graph.index.sets
            cached = "variant" if jaccard(sets[src], sets[dst]) >= self.min_similarity else dst
            if cached == dst and self.mask_content and dst in self.shapes:
                cached = f"shape:{self.shapes[dst]}"
            self._classes_cache[(src, dst)] = cached
        return cached

    def _classes(self, src: int, counts: Counter[int]) -> Counter[object]:
        out: Counter[object] = Counter()
        for dst, n in counts.items():
            out[self.outcome_class(src, dst)] += n
        return out

    def dispersion(self, state: int, signature: str) -> float:
        """``D(s, a)``: the matched-outcome entropy (0 when ``a`` was never tried at a matched screen)."""
        rows, weights = [], []
        for other, weight in self.neighbours(state):
            counts = self.graph.outcomes.get((other, signature))
            if counts:
                rows.append(self._classes(other, counts))
                weights.append(weight)
        if not rows:
            return 0.0
        vocab = sorted({o for row in rows for o in row}, key=str)
        matrix = np.array([[row.get(o, 0) for o in vocab] for row in rows], dtype=float)
        return matched_outcome_entropy(np.array(weights), matrix)

    def noise(self, state: int, signature: str) -> float:
        """``H_noise(s, a)``: outcome entropy within repeated histories (0 without repeat probes)."""
        groups = self.graph.histories.get((state, signature))
        if not groups:
            return 0.0
        num = den = 0.0
        for counts in groups.values():
            n = sum(counts.values())
            if n >= 2:
                num += (n - 1) * entropy(self._classes(state, counts))
                den += n - 1
        return num / den if den else 0.0

    def ambiguity(self, state: int, signature: str) -> float:
        """``A(s, a)``: dispersion minus repeat-probe noise (raw dispersion without ``separate_noise``)."""
        d = self.dispersion(state, signature)
        if not self.separate_noise or d == 0.0:
            return d
        return max(0.0, d - self.noise(state, signature))

    def resolved(self, state: int, signature: str) -> float:
        """Fraction of the history groups of ``(s, a)`` probed at least ``min_probes`` times."""
        groups = self.graph.histories.get((state, signature))
        if not groups:
            return 0.0
        return sum(sum(c.values()) >= self.min_probes for c in groups.values()) / len(groups)

    def unresolved(self, state: int, signature: str) -> float:
        """``U(s, a) = A(s, a) (1 - resolved)``: what still calls for a probe."""
        a = self.ambiguity(state, signature)
        return a * (1.0 - self.resolved(state, signature)) if a > 0 else 0.0

    def state_score(self, state: int) -> float:
        """Per-state ambiguity: the largest ``A(s, a)`` over its tried actions (used for AUROC)."""
        return max((self.ambiguity(state, a.signature) for a in self.graph.actions(state)), default=0.0)

    def mass(self) -> float:
        """Mean unresolved ambiguity over the tried (state, action) pairs: the 'ambiguity mass'."""
        pairs = list(self.graph.outcomes)
        if not pairs:
            return 0.0
        return float(np.mean([self.unresolved(s, a) for s, a in pairs]))
