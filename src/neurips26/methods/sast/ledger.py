"""FlipLedger: per-sample prediction history, temporal stability and the class-flip matrix.

SAST (Stability-Aware Self-Training for CLIP) names *temporal prediction instability* -- a target sample
whose predicted class keeps changing across epochs -- as the failure mode of CLIP self-training. The
ledger measures it for any self-training method: call :meth:`FlipLedger.update` once per epoch with the
current predictions (and, optionally, the pseudo-labels used for training and hidden true labels for
diagnostics only).

Stability of sample x over the last ``W`` recorded epochs (issue #27, step 1):

    s(x) = 1 - (number of prediction changes among the last W predictions) / (W - 1)

Before ``W`` epochs are recorded, the window is the ``n`` epochs seen so far (``s = 1`` when ``n < 2``).
Memory is O(N * W) small integers (int8 below 128 classes, int16 below 32768).
"""

from __future__ import annotations

import torch

__all__ = ["FlipLedger"]


class FlipLedger:
    """Per-sample prediction history in a ring buffer of the last ``window`` epochs.

    Parameters
    ----------
    n_samples:
        Number of tracked samples N.
    n_classes:
        Number of classes C.
    window:
        W >= 2, the number of recent epochs stability looks at (ours: 5).

    Attributes
    ----------
    flip_matrix: (C, C) int64, F[c, c'] counts transitions c -> c' between consecutive epochs.
    flip_counts: (N,) int64, total flips per sample over the whole run.
    flip_rates: per epoch, the fraction of samples whose prediction changed (from the second epoch).
    precisions: per epoch, pseudo-label precision when labels were given to :meth:`update`.
    """

    def __init__(self, n_samples: int, n_classes: int, window: int = 5) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 2:
            raise ValueError(f"window must be an integer >= 2, got {window!r}")
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        self.n_samples, self.n_classes, self.window = n_samples, n_classes, window
        dtype = torch.int8 if n_classes < 128 else torch.int16 if n_classes < 32768 else torch.int32
        self.history = torch.zeros(n_samples, window, dtype=dtype)
        self.epochs = 0
        self.flip_matrix = torch.zeros(n_classes, n_classes, dtype=torch.int64)
        self.flip_counts = torch.zeros(n_samples, dtype=torch.int64)
        self.flip_rates: list[float] = []
        self.precisions: list[float] = []

    @property
    def last(self) -> torch.Tensor:
        """The most recent predictions (N,) as int64 (raises before the first update)."""
        if self.epochs == 0:
            raise RuntimeError("FlipLedger.last: no epoch recorded yet")
        return self.history[:, (self.epochs - 1) % self.window].long()

    def update(
        self,
        predictions: torch.Tensor,
        pseudo_index: torch.Tensor | None = None,
        pseudo_labels: torch.Tensor | None = None,
        true_labels: torch.Tensor | None = None,
    ) -> None:
        """Record one epoch's predictions (N,) int; optionally score the pseudo-labels against labels.

        ``pseudo_index``/``pseudo_labels``: the samples pseudo-labelled this epoch and their labels;
        ``true_labels`` (N,): hidden labels used only for the precision diagnostic (-1 = unknown).
        """
        predictions = torch.as_tensor(predictions).reshape(-1).long()
        if predictions.numel() != self.n_samples:
            raise ValueError(f"predictions must have {self.n_samples} entries, got {predictions.numel()}")
        if predictions.numel() and (predictions.min() < 0 or predictions.max() >= self.n_classes):
            raise ValueError(f"predictions must lie in [0, {self.n_classes}), got values outside")
        if self.epochs > 0:
            previous = self.last
            changed = previous != predictions
            # F[c -> c'] += 1 for every changed sample: one index_add_ over flattened (c, c') cells
            cells = previous[changed] * self.n_classes + predictions[changed]
            self.flip_matrix.view(-1).index_add_(0, cells, torch.ones_like(cells))
            self.flip_counts += changed.long()
            self.flip_rates.append(float(changed.float().mean()))
        self.history[:, self.epochs % self.window] = predictions.to(self.history.dtype)
        self.epochs += 1
        if pseudo_index is not None and pseudo_labels is not None and true_labels is not None:
            truth = torch.as_tensor(true_labels).long()[pseudo_index]
            known = truth >= 0
            if bool(known.any()):
                self.precisions.append(float((pseudo_labels[known] == truth[known]).float().mean()))

    def window_flips(self) -> torch.Tensor:
        """(N,) number of prediction changes among the last min(epochs, W) recorded predictions."""
        n = min(self.epochs, self.window)
        if n < 2:
            return torch.zeros(self.n_samples, dtype=torch.int64)
        # chronological order of the ring buffer's valid columns
        cols = torch.arange(self.epochs - n, self.epochs) % self.window
        ordered = self.history[:, cols]
        return (ordered[:, 1:] != ordered[:, :-1]).sum(dim=1)

    def stability(self) -> torch.Tensor:
        """(N,) float32 s(x) = 1 - flips in the window / (window length - 1), in [0, 1]."""
        n = min(self.epochs, self.window)
        if n < 2:
            return torch.ones(self.n_samples)
        return 1.0 - self.window_flips().float() / (n - 1)

    def class_stability(self, labels: torch.Tensor | None = None) -> torch.Tensor:
        """(C,) mean stability of the samples currently predicted (or labelled ``labels``) as each class;
        classes with no sample get 1."""
        labels = self.last if labels is None else torch.as_tensor(labels).long()
        s = self.stability()
        total = torch.zeros(self.n_classes).index_add_(0, labels, s)
        count = torch.zeros(self.n_classes).index_add_(0, labels, torch.ones_like(s))
        return torch.where(count > 0, total / count.clamp_min(1), torch.ones_like(total))

    def most_flipped_pairs(self, k: int) -> torch.Tensor:
        """(<=k, 2) the unordered class pairs with the most flips in either direction (F + F^T), most first;
        pairs that never flipped are left out."""
        sym = (self.flip_matrix + self.flip_matrix.T).triu(diagonal=1)
        flat = sym.view(-1)
        k = min(k, int((flat > 0).sum()))
        if k == 0:
            return torch.zeros(0, 2, dtype=torch.int64)
        top = torch.topk(flat, k).indices
        return torch.stack([top // self.n_classes, top % self.n_classes], dim=1)

    def mean_flip_rate(self) -> float:
        """Average fraction of samples that flipped between consecutive epochs (0 before two epochs)."""
        return float(sum(self.flip_rates) / len(self.flip_rates)) if self.flip_rates else 0.0

    def memory_bytes(self) -> int:
        """Bytes held by the ledger's tensors (history, flip counts, flip matrix)."""
        return sum(t.numel() * t.element_size() for t in (self.history, self.flip_counts, self.flip_matrix))

    def summary(self) -> dict[str, float]:
        """Mean flip rate, final-epoch flip rate, mean stability and mean pseudo-label precision."""
        return {
            "mean_flip_rate": self.mean_flip_rate(),
            "final_flip_rate": self.flip_rates[-1] if self.flip_rates else 0.0,
            "mean_stability": float(self.stability().mean()),
            "mean_precision": float(sum(self.precisions) / len(self.precisions))
            if self.precisions
            else float("nan"),
        }
