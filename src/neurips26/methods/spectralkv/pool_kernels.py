"""Compiled (numba) CPU kernels for SpectralKV's candidate pool (:func:`features.metric_candidates`).

Per (batch, KV head) row: every token's energy ``w^2 (key_scale^2 ||z_j||^2 + lambda^2 ||v_j||^2)`` from
its window logits ``z_j`` and value ``v_j`` (``lambda`` balances the two parts), the forced tokens plus
the most energetic ones, and their features ``w [key_scale z_j ; lambda v_j]`` -- in one pass instead of
two dozen full-size tensor operations, with the same numbers (tests compare them with the torch path).
:func:`pools_of_layers` builds every layer's pool of a prefill in one call.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from neurips26.methods.spectralkv.kernels import _REDUCE, _largest, as_array

__all__ = ["pool_from_logits", "pools_of_layers"]


def pool_from_logits(
    logits: torch.Tensor,
    values: torch.Tensor,
    weight: torch.Tensor | None,
    forced: torch.Tensor,
    size: int,
    key_scale: float,
    value_weight: float,
    *,
    logit_features: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer's candidate pool from its window logits (CPU).

    ``logits`` ``(B, H, Q, n)`` per KV head, ``values`` ``(B, H, n, dv)``, ``weight`` ``(B, H, n)``
    feature weights (or ``None``), ``forced`` ``(n,)`` bool: the forced tokens plus the ``size`` most
    energetic ones in context order. Returns ``(B, H, size)`` positions and ``(B, H, size, Q + dv)``
    float32 features, in one pass instead of two dozen full-size tensor operations. Without
    ``logit_features`` the features are the value part ``w lambda v_j`` alone ``(B, H, size, dv)`` (the
    caller builds a key part of fewer dims than ``Q``).
    """
    batch, heads, queries, n = logits.shape
    flat = (batch * heads, n)
    weight = torch.ones(flat) if weight is None else weight.reshape(flat)
    index, features = _pool_from_logits(
        as_array(logits, torch.float32).reshape(-1, queries, n),
        as_array(values, torch.float32).reshape(-1, n, values.shape[-1]),
        as_array(weight, torch.float32),
        as_array(forced),
        int(size),
        float(key_scale),
        float(value_weight),
        bool(logit_features),
    )
    shape = (batch, heads, int(size))
    return torch.from_numpy(index).reshape(shape), torch.from_numpy(features).reshape(*shape, -1)


@numba.njit(cache=True, nogil=True)
def _pool_from_logits(
    logits, values, weight, forced, size, key_scale, value_weight, logit_features
):  # pragma: no cover
    rows, queries, n = logits.shape
    key_dims = queries if logit_features else 0
    index = np.empty((rows, size), dtype=np.int64)
    features = np.empty((rows, size, key_dims + values.shape[2]), dtype=np.float32)
    for r in range(rows):
        key_energy, value_energy = np.zeros(n), np.zeros(n)
        _token_energies(logits[r], values[r], key_energy, value_energy)
        chosen, lam = _choose_pool(key_energy, value_energy, weight[r], forced, size, key_scale, value_weight)
        index[r] = chosen
        if logit_features:
            _logit_features(logits[r], weight[r], chosen, key_scale, features[r])
        _value_features(values[r], weight[r], chosen, lam, features[r], key_dims)
    return index, features


def pools_of_layers(
    logits: list[torch.Tensor],
    values: list[torch.Tensor],
    weight: torch.Tensor,
    forced: torch.Tensor,
    sizes: list[int],
    key_scale: float,
    value_weight: float,
    *,
    logit_features: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`pool_from_logits` for every layer of a prefill in one call, stacked on the batch dim.

    ``logits[l]`` ``(B, H, Q, n)``, ``values[l]`` ``(B, H, n, dv)``, ``weight`` ``(L, B, H, n)``, ``forced``
    ``(L, n)`` (each layer's, trimmed to its budget), ``sizes[l]`` its pool size. Returns ``(L*B, H, P)``
    positions, ``(L*B, H, P, D)`` features, and the ``valid`` and ``forced`` masks of the pool entries,
    ``P = max(sizes)``: a smaller pool is padded with position 0, zero features and both masks False
    (:func:`features.stack_candidates`'s padding), without a per-layer call and its conversions.
    """
    batch, heads, queries, n = logits[0].shape
    index, features, valid, forced_at = _pools_of_layers(
        # tuples, not numba.typed.List: 0.5 against 25 microseconds to hand over (compiled once per
        # layer count)
        tuple(as_array(x, torch.float32).reshape(-1, queries, n) for x in logits),
        tuple(as_array(v, torch.float32).reshape(batch * heads, n, -1) for v in values),
        as_array(weight, torch.float32).reshape(len(logits), batch * heads, n),
        as_array(forced),
        np.asarray(sizes, dtype=np.int64),
        float(key_scale),
        float(value_weight),
        bool(logit_features),
    )
    shape = (len(logits) * batch, heads, index.shape[-1])
    arrays = (index, features, valid, forced_at)
    return tuple(torch.from_numpy(array).reshape(*shape, *array.shape[3:]) for array in arrays)


@numba.njit(cache=True, nogil=True)
def _pools_of_layers(
    logits, values, weight, forced, sizes, key_scale, value_weight, logit_features
):  # pragma: no cover
    rows, queries, n = logits[0].shape
    key_dims = queries if logit_features else 0
    width = sizes.max()
    index = np.zeros((len(logits), rows, width), dtype=np.int64)
    features = np.zeros((len(logits), rows, width, key_dims + values[0].shape[2]), dtype=np.float32)
    valid = np.zeros((len(logits), rows, width), dtype=np.bool_)
    forced_at = np.zeros((len(logits), rows, width), dtype=np.bool_)
    for layer in range(len(logits)):
        size = sizes[layer]
        for r in range(rows):
            z, v, w, into = logits[layer][r], values[layer][r], weight[layer, r], features[layer, r, :size]
            key_energy, value_energy = np.zeros(n), np.zeros(n)
            _token_energies(z, v, key_energy, value_energy)
            chosen, lam = _choose_pool(
                key_energy, value_energy, w, forced[layer], size, key_scale, value_weight
            )
            index[layer, r, :size] = chosen
            if logit_features:
                _logit_features(z, w, chosen, key_scale, into)
            _value_features(v, w, chosen, lam, into, key_dims)
            valid[layer, r, :size] = True
            for p in range(size):
                forced_at[layer, r, p] = forced[layer, chosen[p]]
    return index, features, valid, forced_at


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _token_energies(logits, values, key_energy, value_energy):  # pragma: no cover
    """Add ``sum_q z_qj^2`` (``logits`` ``(Q, n)``) and ``||v_j||^2`` (``values`` ``(n, dv)``) into the zeroed
    ``key_energy`` and ``value_energy`` ``(n,)``, in float64."""
    for q in range(logits.shape[0]):
        z = logits[q]
        for j in range(z.shape[0]):
            key_energy[j] += np.float64(z[j]) ** 2
    for j in range(values.shape[0]):
        v = values[j]
        for c in range(v.shape[0]):
            value_energy[j] += np.float64(v[c]) ** 2


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _choose_pool(key_energy, value_energy, weight, forced, size, key_scale, value_weight):  # pragma: no cover
    """The pool's ``size`` positions (forced tokens first, then by energy; in increasing order) and the
    value part's scale ``lambda`` (the two parts' total energies equal, times ``value_weight``)."""
    n = key_energy.shape[0]
    scaled = key_energy * (key_scale * key_scale)
    lam = value_weight * np.sqrt(scaled.sum()) / max(np.sqrt(value_energy.sum()), 1e-12)
    if size == n:
        return np.arange(n), lam
    energy = (scaled + lam * lam * value_energy) * weight.astype(np.float64) ** 2
    for j in range(n):
        if forced[j]:
            energy[j] = np.inf
    return _largest(energy, size), lam


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _logit_features(logits, weight, chosen, key_scale, features):  # pragma: no cover
    """``features[p, :Q] = key_scale w_j z_j`` for ``j = chosen[p]``, from ``logits`` ``(Q, n)``."""
    for q in range(logits.shape[0]):  # row by row of the logits: increasing addresses, not one column each
        z = logits[q]
        for p in range(chosen.shape[0]):
            features[p, q] = z[chosen[p]] * key_scale * weight[chosen[p]]


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE)
def _value_features(values, weight, chosen, lam, features, offset):  # pragma: no cover
    """``features[p, offset:] = lambda w_j v_j`` for ``j = chosen[p]``."""
    for p in range(chosen.shape[0]):
        v, scale = values[chosen[p]], lam * weight[chosen[p]]
        for c in range(v.shape[0]):
            features[p, offset + c] = v[c] * scale
