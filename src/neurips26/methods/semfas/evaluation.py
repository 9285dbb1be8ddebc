"""FAS metrics (HTER at two thresholds, AUC, TPR@FPR, ECE, AURC, misclassification AUROC, attribution).

ROC quantities come from scikit-learn, ECE from torchmetrics (cross-checked with netcal). Scores are
spoof probabilities: the positive class is the attack.
"""

from __future__ import annotations

import numpy as np


def eer_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The threshold where the false-acceptance and false-rejection rates are closest (the EER point)."""
    from sklearn.metrics import roc_curve

    fpr, tpr, thresholds = roc_curve(labels, scores)
    index = int(np.nanargmin(np.abs(fpr - (1 - tpr))))
    return float(min(thresholds[index], 1.0))


def hter(labels: np.ndarray, scores: np.ndarray, threshold: float) -> float:
    """Half total error rate at ``threshold``: (APCER + BPCER) / 2, spoof when score >= threshold."""
    predicted = scores >= threshold
    apcer = float(np.mean(~predicted[labels == 1])) if np.any(labels == 1) else 0.0
    bpcer = float(np.mean(predicted[labels == 0])) if np.any(labels == 0) else 0.0
    return 0.5 * (apcer + bpcer)


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    if len(np.unique(labels)) < 2:
        return float("nan")
    return float(roc_auc_score(labels, scores))


def tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, fpr_level: float = 0.01) -> float:
    """The largest attack-detection rate whose bona-fide false-alarm rate is <= ``fpr_level``."""
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(labels, scores)
    return float(tpr[fpr <= fpr_level].max()) if np.any(fpr <= fpr_level) else 0.0


def ece(labels: np.ndarray, probs: np.ndarray, bins: int = 15) -> float:
    """Binary expected calibration error (torchmetrics, L1, 15 bins) of the spoof probability."""
    import torch
    from torchmetrics.functional.classification import binary_calibration_error

    return float(
        binary_calibration_error(
            torch.as_tensor(probs, dtype=torch.float32), torch.as_tensor(labels), n_bins=bins
        )
    )


def ece_netcal(labels: np.ndarray, probs: np.ndarray, bins: int = 15) -> float:
    """The same ECE from netcal (top-label confidence binning), the cross-check."""
    from netcal.metrics import ECE

    confidence = np.stack([1 - probs, probs], 1)
    return float(ECE(bins).measure(confidence, labels))


def aurc(errors: np.ndarray, uncertainty: np.ndarray) -> float:
    """Area under the risk-coverage curve: accept the most certain first; mean risk over coverages."""
    order = np.argsort(uncertainty, kind="stable")
    risks = np.cumsum(errors[order]) / np.arange(1, len(errors) + 1)
    return float(risks.mean())


def misclassification_auroc(errors: np.ndarray, uncertainty: np.ndarray) -> float:
    """AUROC of the uncertainty score at telling wrong predictions from right ones."""
    return auc(errors.astype(int), uncertainty)


def attribution_accuracy(attribution: np.ndarray, cue: np.ndarray) -> float:
    """Fraction of attack samples whose top-attributed modality is the generator's cue modality.

    Parameters
    ----------
    attribution : [N, M] per-modality evidence for the spoof class
    cue : [N] cue modality index (-1 for live samples, which are skipped)
    """
    attack = cue >= 0
    if not np.any(attack):
        return float("nan")
    return float(np.mean(attribution[attack].argmax(1) == cue[attack]))
