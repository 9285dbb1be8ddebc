"""Ground-truth metrics on a synthetic world: latent coverage, pairwise dedup quality, ambiguity AUROC."""

from __future__ import annotations

from collections import Counter

import numpy as np
from scipy.stats import rankdata

from neurips26.methods.screensearch.ambiguity import AmbiguityEstimator
from neurips26.methods.screensearch.graph import StateGraph


def latent_coverage(graph: StateGraph, reachable: set[str]) -> float:
    """Fraction of the reachable latent states observed at least once."""
    if not reachable:
        raise ValueError("reachable must be a non-empty set of latent states")
    seen = {t["latent"] for records in graph.truth.values() for t in records}
    return len(seen & reachable) / len(reachable)


def _pairs(counts: Counter) -> float:
    n = np.array(list(counts.values()), dtype=float)
    return float((n * (n - 1) / 2).sum())


def dedup_precision_recall(graph: StateGraph) -> tuple[float, float]:
    """Pairwise precision and recall of dedup over all observations.

    Two observations are truly the same screen when their ground-truth ``screen`` ids agree (page plus
    the bits it displays, noise ignored); dedup says so when they map to one state. Computed from the
    contingency counts (no quadratic loop).
    """
    joint: Counter = Counter()
    for state, records in graph.truth.items():
        for t in records:
            joint[(state, t["screen"])] += 1
    by_state: Counter = Counter()
    by_truth: Counter = Counter()
    for (state, screen), n in joint.items():
        by_state[state] += n
        by_truth[screen] += n
    together = _pairs(joint)
    predicted, actual = _pairs(by_state), _pairs(by_truth)
    precision = together / predicted if predicted else 1.0
    recall = together / actual if actual else 1.0
    return precision, recall


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve by the Mann-Whitney rank statistic (ties count one half); NaN when one
    class is absent."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = labels.sum(), (~labels).sum()
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def ambiguity_auroc(estimator: AmbiguityEstimator) -> float:
    """How well the per-state ambiguity score ranks truly aliased states above the rest.

    Over states with at least one action tried twice; a state is aliased when the page its observations
    show is an aliased page (its successor depends on a hidden bit). Flaky (nondeterministic) pages are
    negatives: the signal should flag aliasing, not noise.
    """
    graph = estimator.graph
    probed = {s for (s, _), c in graph.outcomes.items() if sum(c.values()) >= 2}
    states = sorted(s for s in probed if graph.truth.get(s))
    if not states:
        return float("nan")
    labels = np.array([Counter(t["aliased"] for t in graph.truth[s]).most_common(1)[0][0] for s in states])
    scores = np.array([estimator.state_score(s) for s in states])
    return auroc(scores, labels)
