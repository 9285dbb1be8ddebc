"""``diagnose_shift``: measure feature shift and (feature-conditional) structure shift before training.

Three numbers, each from observed quantities only (target labels are never read):

* feature shift (FS): the cross-validated ROC AUC of a logistic domain classifier on raw features
  (0.5 = indistinguishable);
* feature-conditional structure shift (FCSS): prototypes by k-means on per-domain standardised features
  (so a mean/scale feature shift does not split prototypes by domain), the prototype edge ratio
  ``gamma`` of :func:`~neurips26.methods.dacs.core.prototype_edge_ratio`, and its mean distance from 1
  over source edges, ``E_e |gamma_e - 1|``; the same statistic between two random halves of the source's
  edges gives the noise floor it is compared to;
* label-level structure shift: the class-pair conditional ratio with target pseudo-labels from a
  logistic classifier trained on the source's standardised features, mean ``|gamma - 1|`` over edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from neurips26.methods.dacs.core import conditional_ratio, edge_pair_histogram, prototype_edge_ratio
from neurips26.methods.dacs.integration import check_domain_pair


@dataclass
class ShiftDiagnosis:
    """What :func:`diagnose_shift` measured and which DACS stages it recommends."""

    feature_auc: float
    fcss_score: float
    fcss_noise: float
    label_structure_score: float
    degree_ratio: float
    feature_shift: bool
    structure_shift: bool
    stages: tuple[int, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        lines = [
            f"feature shift      : domain-classifier AUC {self.feature_auc:.3f} -> "
            f"{'yes' if self.feature_shift else 'no'}",
            f"FCSS               : E|gamma-1| {self.fcss_score:.3f} (noise {self.fcss_noise:.3f}) -> "
            f"{'yes' if self.structure_shift else 'no'}",
            f"label-level CSS    : E|gamma-1| {self.label_structure_score:.3f} (pseudo-labels)",
            f"degree ratio (T/S) : {self.degree_ratio:.2f}",
            f"recommended stages : {list(self.stages) or 'none (source-only training)'}",
        ]
        return "\n".join(lines)


def _standardise(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-8)


def _subsample(n: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(n)[:cap] if n > cap else np.arange(n)


def diagnose_shift(
    source: Any,
    target: Any,
    n_prototypes: int = 8,
    seed: int = 0,
    auc_threshold: float = 0.6,
    fcss_margin: float = 0.05,
    max_nodes: int = 4000,
) -> ShiftDiagnosis:
    """Diagnose the covariate shift between a labelled ``source`` and an unlabelled ``target`` graph.

    Parameters
    ----------
    source, target: PyG ``Data`` (``source.y`` is used for the label-level ratio; ``target.y`` is ignored).
    n_prototypes: K of the k-means prototypes (must not exceed the nodes of both domains).
    seed: seeds subsampling, the classifiers' folds and k-means.
    auc_threshold: FS is flagged when the domain AUC exceeds it.
    fcss_margin: FCSS is flagged when ``fcss_score > 2 * fcss_noise + fcss_margin``.
    max_nodes: nodes per domain used by the domain classifier.

    Returns
    -------
    ShiftDiagnosis; ``stages`` lists the DACS stages to enable (1 for FS, 2 for FCSS, 3 with either).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import cross_val_predict

    check_domain_pair(source, target)
    if isinstance(n_prototypes, bool) or not isinstance(n_prototypes, int) or n_prototypes < 2:
        raise ValueError(f"n_prototypes must be an integer >= 2, got {n_prototypes!r}")
    if n_prototypes > source.num_nodes + target.num_nodes:
        raise ValueError(
            f"n_prototypes={n_prototypes} exceeds the number of nodes in both domains "
            f"({source.num_nodes + target.num_nodes})"
        )
    rng = np.random.default_rng(seed)
    x_s, x_t = source.x.double().numpy(), target.x.double().numpy()
    # feature shift: can a linear classifier tell the domains apart?
    idx_s, idx_t = _subsample(len(x_s), max_nodes, rng), _subsample(len(x_t), max_nodes, rng)
    features = np.concatenate([x_s[idx_s], x_t[idx_t]])
    domain = np.concatenate([np.zeros(len(idx_s)), np.ones(len(idx_t))])
    scores = cross_val_predict(
        LogisticRegression(max_iter=500), _standardise(features), domain, cv=3, method="decision_function"
    )
    auc = float(roc_auc_score(domain, scores))
    # FCSS: prototypes on per-domain standardised features
    z_s = torch.as_tensor(_standardise(x_s))
    z_t = torch.as_tensor(_standardise(x_t))
    estimate = prototype_edge_ratio(
        z_s, z_t, source.edge_index, target.edge_index, n_prototypes, lam=1e-3, delta=0.05, seed=seed
    )
    fcss = float((estimate.weights - 1.0).abs().mean())
    # noise floor: the same statistic between two random halves of the source's edges
    edges = source.edge_index.numpy()
    half = rng.random(edges.shape[1]) < 0.5
    p_a = edge_pair_histogram(estimate.source_assign, edges[:, half], n_prototypes)
    p_b = edge_pair_histogram(estimate.source_assign, edges[:, ~half], n_prototypes)
    ratio = np.where(p_a > 0, p_b / np.maximum(p_a, 1e-12), 1.0)
    gamma_noise = conditional_ratio(ratio, p_a, 0.05)
    assign = estimate.source_assign
    noise = float(np.abs(gamma_noise[assign[edges[1, half]], assign[edges[0, half]]] - 1.0).mean())
    # label-level structure shift with target pseudo-labels
    y_s = source.y.numpy()
    classifier = LogisticRegression(max_iter=500).fit(z_s.numpy(), y_s)
    pseudo = classifier.predict(z_t.numpy())
    num_classes = int(max(y_s.max(), pseudo.max())) + 1
    joint_s = edge_pair_histogram(y_s, edges, num_classes)
    joint_t = edge_pair_histogram(pseudo, target.edge_index.numpy(), num_classes)
    w = np.where(joint_s > 0, joint_t / np.maximum(joint_s, 1e-12), 1.0)
    gamma_label = conditional_ratio(w, joint_s, 0.05)
    label_score = float(np.abs(gamma_label[y_s[edges[1]], y_s[edges[0]]] - 1.0).mean())
    degree_ratio = (target.edge_index.shape[1] / target.num_nodes) / max(
        source.edge_index.shape[1] / source.num_nodes, 1e-12
    )
    feature_flag = auc > auc_threshold
    structure_flag = fcss > 2.0 * noise + fcss_margin
    stages = tuple(s for s, on in ((1, feature_flag), (2, structure_flag)) if on)
    if stages:
        stages = (*stages, 3)
    return ShiftDiagnosis(
        feature_auc=auc,
        fcss_score=fcss,
        fcss_noise=noise,
        label_structure_score=label_score,
        degree_ratio=float(degree_ratio),
        feature_shift=feature_flag,
        structure_shift=structure_flag,
        stages=stages,
    )
