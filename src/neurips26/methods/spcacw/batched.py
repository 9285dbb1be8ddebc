"""SP-CACW's per-round bookkeeping for several targets at once: estimators, exact weights and the round log.

The in-process engine runs this every round on (T, N) arrays (T targets, N clients), so its cost is a few
dozen NumPy calls whatever T is. It does what :class:`~neurips26.methods.spcacw.core.BiasEstimator` and
:func:`~neurips26.methods.spcacw.core.choose_weights` do target by target (tests compare the two). The
round log keeps each round's weights, squared biases, variances and dropped replies as arrays; the
certificate (variance terms, bias, bound, local-only bound) is a pure function of those and is formed
when a :class:`~neurips26.methods.spcacw.core.RoundRecord` is read, so a round does not pay for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from neurips26.core.validation import check_int
from neurips26.methods.spcacw.core import _VARIANCE_FLOOR, RoundRecord, solve_exact


class BiasEstimators:
    """:class:`~neurips26.methods.spcacw.core.BiasEstimator` for several targets: (T, N) debiased EMAs.

    Row ``r`` is the estimator of target ``targets[r]``; every method does in one vectorised step what a
    list of ``BiasEstimator`` does target by target.
    """

    def __init__(self, n_clients: int, targets: Any, decay: float = 0.9) -> None:
        check_int("n_clients", n_clients, minimum=2)
        self.targets = np.asarray(targets, dtype=np.int64).reshape(-1)
        if self.targets.size == 0 or (self.targets < 0).any() or (self.targets >= n_clients).any():
            raise ValueError(f"targets={self.targets.tolist()} must be among the {n_clients} clients")
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must lie in [0, 1), got {decay!r}")
        self.n_clients, self.decay = n_clients, float(decay)
        self.rows = np.arange(self.targets.size)
        shape = (self.targets.size, n_clients)
        self.distance, self.noise = np.zeros(shape), np.zeros(shape)
        self.spread, self.weight, self.spread_weight = np.zeros(shape), np.zeros(shape), np.zeros(shape)

    def update(
        self,
        sq_distance: np.ndarray,
        variance: np.ndarray | None,
        observed: np.ndarray,
        past_variance: np.ndarray | None = None,
    ) -> None:
        """One round for every target: (T, N) ``||g_i - g_target||^2``, ``s_i`` and validity masks.

        ``variance`` is None (or NaN for a client) in a round without a variance estimate (see
        ``SPCACWConfig.variance_every``): the noise term then uses the EMA of past ``s_i``
        (``past_variance``, :meth:`variance` before this update, when the caller has it) and that EMA keeps
        its state. With a fresh ``s_i`` every round this is ``BiasEstimator.update`` exactly.
        """
        d = np.asarray(sq_distance, np.float64)
        mask = np.asarray(observed, bool) & np.isfinite(d)
        mask &= mask[self.rows, self.targets][:, None]  # no target gradient: that row keeps its state
        past = self.variance() if past_variance is None else past_variance
        fresh_s = None
        if variance is None:
            s = past
        else:
            s = np.asarray(variance, np.float64)
            fresh_s = mask & np.isfinite(s)
            if not fresh_s.all():
                s = np.where(fresh_s, s, past)
        noise = s + s[self.rows, self.targets][:, None]
        noise[self.rows, self.targets] = 0.0
        decay, rate = self.decay, 1.0 - self.decay
        if mask.all():  # the usual round: every reply valid, scalar factors
            self.distance = decay * self.distance + rate * d
            self.noise = decay * self.noise + rate * noise
            self.weight = decay * self.weight + rate
        else:
            keep, fresh = np.where(mask, decay, 1.0), np.where(mask, rate, 0.0)
            self.distance = keep * self.distance + fresh * np.where(mask, d, 0.0)
            self.noise = keep * self.noise + fresh * np.where(mask, noise, 0.0)
            self.weight = keep * self.weight + fresh
        if fresh_s is None or not fresh_s.any():
            return
        if fresh_s.all():
            self.spread = decay * self.spread + rate * s
            self.spread_weight = decay * self.spread_weight + rate
        else:
            keep_s = np.where(fresh_s, decay, 1.0)
            self.spread = keep_s * self.spread + np.where(fresh_s, rate * s, 0.0)
            self.spread_weight = keep_s * self.spread_weight + np.where(fresh_s, rate, 0.0)

    def variance(self) -> np.ndarray:
        """(T, N) bias-corrected EMA of ``s_i``; 1.0 where a client was never observed."""
        seen = self.spread_weight > 0
        return np.divide(self.spread, self.spread_weight, out=np.ones_like(self.spread), where=seen)

    def estimate(self) -> np.ndarray:
        """(T, N) ``zeta_i^2`` floored at 0; ``inf`` where never observed; 0 for each row's target."""
        seen = self.weight > 0
        unseen = np.full_like(self.weight, np.inf)
        raw = np.divide(self.distance - self.noise, self.weight, out=unseen, where=seen)
        out = np.maximum(raw, 0.0, out=raw)
        out[self.rows, self.targets] = 0.0
        return out


def floored(variance: np.ndarray) -> np.ndarray:
    """(..., N) variances floored at 1e-12 of each row's largest (what ``choose_weights`` solves with)."""
    return np.maximum(variance, _VARIANCE_FLOOR * np.maximum(variance.max(-1, keepdims=True), 1e-300))


def batch_weights(
    variance: np.ndarray, bias_sq: np.ndarray, scale: float, bias_form: str
) -> tuple[np.ndarray, np.ndarray]:
    """The exact weights (T, N) and thresholds (T,) of T targets; ``inf`` in ``bias_sq`` excludes a client."""
    alpha, threshold = solve_exact(floored(variance), bias_sq, scale, bias_form)
    if bias_form == "squared":  # the linear form's weights of excluded clients are exactly 0 already
        alpha = np.where(np.isfinite(bias_sq), alpha, 0.0)
        alpha /= alpha.sum(-1, keepdims=True)
    return alpha, threshold


def certificate(
    alpha: np.ndarray,
    variance: np.ndarray,
    bias_sq: np.ndarray,
    targets: np.ndarray,
    scale: float,
    bias_form: str,
) -> dict[str, np.ndarray]:
    """The bound's terms of weights ``alpha`` (..., N): ``variance_terms`` (..., N), ``bias``, ``bound``,
    ``local_bound`` and ``alone`` (...,); ``targets`` (...,) is each row's target."""
    s = floored(variance)
    z = np.where(np.isfinite(bias_sq), bias_sq, 0.0)
    terms = scale * alpha**2 * s
    bias = (alpha * np.sqrt(z)).sum(-1) ** 2 if bias_form == "squared" else (alpha * z).sum(-1)
    own = np.take_along_axis(alpha, targets[..., None], -1)[..., 0]
    alone = (alpha != 0.0).sum(-1) - (own != 0.0) == 0
    local = scale * np.take_along_axis(s, targets[..., None], -1)[..., 0]
    bound = terms.sum(-1) + bias
    return {"variance_terms": terms, "bias": bias, "bound": bound, "local_bound": local, "alone": alone}


class RoundLogs:
    """Every target's round log, stored as each round's (T, N) arrays; records are formed when read."""

    def __init__(self, targets: Sequence[int], scale: float, bias_form: str) -> None:
        self.targets = np.asarray(list(targets), dtype=np.int64)
        self.scale, self.bias_form = float(scale), bias_form
        self.rounds: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def append(
        self,
        round_index: int,
        alpha: np.ndarray,
        bias_sq: np.ndarray,
        variance: np.ndarray,
        valid: np.ndarray,
    ) -> None:
        """Record one round: (T, N) weights, squared biases, variance EMAs and valid replies (not copied)."""
        self.rounds.append((round_index, alpha, bias_sq, variance, valid))

    def record(self, position: int, row: int) -> RoundRecord:
        """The :class:`RoundRecord` of the ``position``-th logged round of row ``row``."""
        round_index, alpha, bias_sq, variance, valid = self.rounds[position]
        a, z, v = alpha[row], bias_sq[row], variance[row]
        cert = certificate(a, v, z, self.targets[row], self.scale, self.bias_form)
        return RoundRecord(
            round=round_index, alpha=a.tolist(), bias_sq=z.tolist(), variance=v.tolist(),
            variance_terms=cert["variance_terms"].tolist(), bias=float(cert["bias"]),
            bound=float(cert["bound"]), local_bound=float(cert["local_bound"]),
            better_off_alone=bool(cert["alone"]), dropped=np.flatnonzero(~valid[row]).tolist(),
        )  # fmt: skip

    def log(self, target: int) -> TargetLog:
        """The log of ``target`` (a sequence of :class:`RoundRecord`)."""
        rows = np.flatnonzero(self.targets == target)
        if rows.size == 0:
            raise ValueError(f"target {target} is not among the logged targets {self.targets.tolist()}")
        return TargetLog(self, int(rows[0]))


class TargetLog(Sequence[RoundRecord]):
    """One target's rounds as a read-only sequence of :class:`RoundRecord` (built on access)."""

    def __init__(self, logs: RoundLogs, row: int) -> None:
        self._logs, self._row = logs, row

    def __len__(self) -> int:
        return len(self._logs.rounds)

    @overload
    def __getitem__(self, index: int) -> RoundRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[RoundRecord]: ...

    def __getitem__(self, index: int | slice) -> RoundRecord | list[RoundRecord]:
        if isinstance(index, slice):
            return [self._logs.record(i, self._row) for i in range(len(self))[index]]
        position = range(len(self))[index]  # negative indices and IndexError as for a list
        return self._logs.record(position, self._row)
