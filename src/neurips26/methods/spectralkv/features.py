"""SpectralKV within a layer, part 1: the metric-aligned joint features and the candidate pool.

:func:`metric_features` embeds every token in a joint key-value space whose key part is aligned with the
metric of the observation queries (``|| M^1/2 k ||^2`` is the mean squared logit); :func:`metric_candidates`
keeps the forced tokens (sinks, window) plus the highest-energy tokens as the pool that
:mod:`~neurips26.methods.spectralkv.core` pivots over.

Shapes: ``B`` batch, ``H`` KV heads, ``n`` tokens, ``d`` head dim, ``D = 2 d`` feature dim.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "Candidates",
    "coreset_candidates",
    "cpu_kernels",
    "forced_token_mask",
    "forced_within_budget",
    "metric_candidates",
    "metric_candidates_of_layers",
    "metric_features",
    "metric_root",
    "stack_candidates",
]


def metric_features(
    keys: torch.Tensor,
    values: torch.Tensor,
    window_queries: torch.Tensor,
    *,
    value_weight: float = 1.0,
    scores: torch.Tensor | None = None,
    score_power: float = 1.0,
    window_logits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Joint feature ``phi_i = s_i^(beta/2) [M^1/2 k_i ; lambda v_i]`` per KV head.

    ``M = Q^T Q / |Q|`` is the second moment of the observation queries of the head's GQA group, so
    ``||M^1/2 k||^2 = mean_q (q . k)^2``: distances in the key part are distances in logit space.
    ``lambda = value_weight * ||K M^1/2||_F / ||V||_F`` gives the value part the same energy.

    Parameters
    ----------
    keys, values:
        ``(B, H, n, d)`` cached (post-RoPE) keys and values.
    window_queries:
        ``(B, H, g*w, d)`` post-RoPE observation queries grouped by KV head.
    scores:
        optional ``(B, H, n)`` non-negative importance (observed attention); weights the features.
    window_logits:
        optional ``(B, H*g, w, n)`` pre-softmax logits ``q . k / sqrt(d)`` of the same queries (the press
        has them from the window attention); the key part is then read off them instead of recomputed.

    Returns
    -------
    ``(B, H, n, 2d)`` float32 features.
    """
    key_part = _KeyPart(keys, window_queries, window_logits)
    everything = torch.arange(keys.shape[2], device=keys.device).expand(keys.shape[:3])
    value_scale = _value_scale(key_part, values.float().pow(2).sum(-1), value_weight)
    return _assemble_features(key_part, values, everything, value_scale, _score_weight(scores, score_power))


class _KeyPart:
    """The metric-aligned key part ``M^1/2 k`` (up to a rotation): its per-token energy, and its rows.

    ``Q k / sqrt(|Q|)`` has the same Gram matrix as ``M^1/2 k`` (``k_i^T Q^T Q k_j / |Q|``) in ``g*w``
    dims without an eigendecomposition, and pivoting depends on the Gram matrix only. The window logits
    are ``Q k / sqrt(d)``: when given they *are* the key part up to a scale, so nothing is recomputed and
    only the rows of the candidate pool are ever materialised.
    """

    def __init__(
        self, keys: torch.Tensor, window_queries: torch.Tensor, window_logits: torch.Tensor | None
    ) -> None:
        q = window_queries.float()
        batch, heads, n, d = keys.shape
        self._logits = None
        if window_logits is not None and q.shape[-2] <= d:
            queries_per_head = q.shape[-2]
            self._logits = window_logits.float().reshape(batch, heads, queries_per_head, n)
            self._scale = math.sqrt(d / queries_per_head)
            self.energy = self._logits.pow(2).sum(-2) * self._scale**2  # (B, H, n)
            return
        if q.shape[-2] <= d:
            self._full = keys.float() @ q.transpose(-1, -2) / math.sqrt(q.shape[-2])
        else:  # more queries than dims: a square root of M keeps the key part in d dims
            self._full = keys.float() @ metric_root(q)
        self.energy = self._full.pow(2).sum(-1)

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """``(B, H, P, dims)`` key-part rows of the tokens ``index`` ``(B, H, P)``."""
        if self._logits is None:
            return _take_tokens(self._full, index)
        picked = self._logits.gather(
            -1, index.unsqueeze(-2).expand(*self._logits.shape[:-1], index.shape[-1])
        )
        return picked.transpose(-1, -2) * self._scale


def metric_root(window_queries: torch.Tensor) -> torch.Tensor:
    """``(B, H, d, d)`` ``S`` with ``S S^T = M = Q^T Q / |Q|``, so ``k S`` has the Gram matrix of ``M^1/2 k``.

    From the QR factorisation ``Q = U R``: ``M = R^T R / |Q|``, so ``S = R^T / sqrt(|Q|)`` -- ``M^1/2`` up to
    a rotation (pivoting and cosines see only the Gram matrix), without an eigendecomposition (3x
    faster on a 128 x 64 window) and defined for a rank-deficient ``Q`` too.
    """
    q = window_queries.float()
    return torch.linalg.qr(q, mode="r")[1].transpose(-1, -2) / math.sqrt(q.shape[-2])


def _score_weight(scores: torch.Tensor | None, score_power: float) -> torch.Tensor | None:
    """Per-token feature weight ``s^(beta/2)``, or None for unweighted features."""
    if scores is None or score_power == 0.0:
        return None
    return scores.float().clamp_min(0.0).pow(score_power / 2)


def _value_scale(key_part: _KeyPart, value_energy: torch.Tensor, value_weight: float) -> torch.Tensor:
    """``lambda`` ``(B, H, 1, 1)``: the value part gets ``value_weight`` times the key part's energy
    (``value_energy`` ``(B, H, n)``: ``||v_i||^2``)."""
    energy_k = key_part.energy.sum(-1).sqrt()
    energy_v = value_energy.sum(-1).sqrt().clamp_min(1e-12)
    return (value_weight * energy_k / energy_v)[..., None, None]


def _take_tokens(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` ``(B, H, P)`` of ``tensor`` ``(B, H, n, d)``: ``(B, H, P, d)``."""
    return tensor.gather(-2, index.unsqueeze(-1).expand(*index.shape, tensor.shape[-1]))


def _assemble_features(
    key_part: _KeyPart,
    values: torch.Tensor,
    index: torch.Tensor,
    value_scale: torch.Tensor,
    weight: torch.Tensor | None,
) -> torch.Tensor:
    """Features ``(B, H, P, dims + d)`` of the tokens ``index`` ``(B, H, P)``."""
    v = _take_tokens(values.float(), index)
    features = torch.cat([key_part.rows(index), value_scale * v], dim=-1)
    if weight is not None:
        features = features * weight.gather(-1, index).unsqueeze(-1)
    return features


def forced_token_mask(n: int, n_sink: int, window: int, device: torch.device | None = None) -> torch.Tensor:
    """``(n,)`` bool: the first ``n_sink`` and the last ``window`` tokens, which every budget keeps."""
    mask = torch.zeros(n, dtype=torch.bool, device=device)
    mask[: min(n_sink, n)] = True
    if window > 0:
        mask[max(0, n - window) :] = True
    return mask


@dataclass
class Candidates:
    """The pool a coreset is chosen from, per (batch row, head); rows may be stacked layers.

    ``index`` ``(B, H, P)`` token positions (sorted), ``features`` ``(B, H, P, D)``, ``scores`` ``(B, H, P)``,
    ``forced`` / ``valid`` ``(B, H, P)`` bool (padding is invalid), ``budget`` ``(B, H)`` tokens to keep.
    """

    index: torch.Tensor
    features: torch.Tensor
    scores: torch.Tensor
    forced: torch.Tensor
    valid: torch.Tensor
    budget: torch.Tensor


def coreset_candidates(
    features: torch.Tensor,
    scores: torch.Tensor,
    budget: int,
    forced: torch.Tensor,
    pool_factor: float | None = None,
) -> Candidates:
    """The forced tokens plus the ``ceil(pool_factor * budget)`` largest score-weighted feature energies.

    Pivoting then costs ``O(P k D)`` whatever the context length; a token outside the pool has less
    weighted energy than ``P - budget`` unkept candidates, so the greedy would rarely reach it. With
    ``pool_factor=None`` every token is a candidate (exact).
    """
    batch, heads, n, dim = features.shape
    _check_budget(budget, n)
    forced = forced_within_budget(forced, budget)
    index = _pool_index(features.float().pow(2).sum(-1), forced, budget, pool_factor)
    return Candidates(
        index=index,
        features=features.gather(-2, index.unsqueeze(-1).expand(-1, -1, -1, dim)),
        scores=scores.gather(-1, index),
        forced=forced[index],
        valid=torch.ones_like(index, dtype=torch.bool),
        budget=torch.full((batch, heads), budget, dtype=torch.long, device=features.device),
    )


def metric_candidates(
    keys: torch.Tensor,
    values: torch.Tensor,
    window_queries: torch.Tensor,
    scores: torch.Tensor,
    budget: int,
    forced: torch.Tensor,
    *,
    pool_factor: float | None = None,
    value_weight: float = 1.0,
    feature_scores: torch.Tensor | None = None,
    score_power: float = 1.0,
    window_logits: torch.Tensor | None = None,
    compiled: bool = True,
) -> Candidates:
    """``coreset_candidates(metric_features(...), ...)`` without the features of tokens outside the pool.

    The pool is ranked by feature energy, which is known per token without the features
    (``w_i^2 (||M^1/2 k_i||^2 + lambda^2 ||v_i||^2)``), so only the ``P`` pool rows are assembled: with
    the window logits given the key part costs no matmul at all. ``feature_scores`` weight the features
    (``metric_features``'s ``scores``), ``scores`` rank the hybrid fill (``coreset_candidates``'s). On
    CPU with the logits (``compiled``) the pool is built by :func:`pool_kernels.pool_from_logits`.
    """
    batch, heads, n, _ = keys.shape
    _check_budget(budget, n)
    forced = forced_within_budget(forced, budget)
    weight = _score_weight(feature_scores, score_power)
    queries_per_head, d = window_queries.shape[-2:]
    kernels = cpu_kernels(keys.device, "pool_kernels") if compiled and window_logits is not None else None
    if kernels is not None:
        # more queries than dims: the logits still give every token's energy, but the pool's key part
        # is k S in d dims (metric_root), not the logits' |Q| ones (pivoting costs grow with the dims)
        logit_features = queries_per_head <= d
        index, features = kernels.pool_from_logits(
            window_logits.reshape(batch, heads, queries_per_head, n),
            values,
            weight,
            forced,
            _pool_size(budget, n, pool_factor),
            math.sqrt(d / queries_per_head),
            value_weight,
            logit_features=logit_features,
        )
        if not logit_features:
            key_part = _take_tokens(keys.float(), index) @ metric_root(window_queries)
            if weight is not None:
                key_part = key_part * weight.gather(-1, index).unsqueeze(-1)
            features = torch.cat([key_part, features], dim=-1)
    else:
        key_part = _KeyPart(keys, window_queries, window_logits)
        value_energy = values.float().pow(2).sum(-1)
        value_scale = _value_scale(key_part, value_energy, value_weight)
        energy = key_part.energy + value_scale[..., 0].pow(2) * value_energy
        if weight is not None:
            energy = energy * weight.pow(2)
        index = _pool_index(energy, forced, budget, pool_factor)
        features = _assemble_features(key_part, values, index, value_scale, weight)
    return Candidates(
        index=index,
        features=features,
        scores=scores.gather(-1, index),
        forced=forced[index],
        valid=torch.ones_like(index, dtype=torch.bool),
        budget=torch.full((batch, heads), budget, dtype=torch.long, device=keys.device),
    )


def metric_candidates_of_layers(
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    window_queries: list[torch.Tensor],
    scores: torch.Tensor,
    budgets: list[int],
    forced: torch.Tensor,
    *,
    pool_factor: float | None = None,
    value_weight: float = 1.0,
    feature_scores: torch.Tensor | None = None,
    score_power: float = 1.0,
    window_logits: list[torch.Tensor] | None = None,
    compiled: bool = True,
) -> Candidates:
    """``stack_candidates([metric_candidates(...) for every layer])``, every layer's pool in one call.

    ``keys``, ``values``, ``window_queries`` and ``window_logits`` are per-layer lists as
    :func:`metric_candidates` takes them, ``scores`` and ``feature_scores`` the layers' stacked
    ``(L, B, H, n)``, ``budgets`` one per layer. On CPU with the logits (``compiled``) a single
    :func:`pool_kernels.pools_of_layers` call replaces a call per layer with its two dozen tensor
    conversions and the stacking (same candidates, tested); otherwise the layers go one by one.
    """
    kernels = cpu_kernels(keys[0].device, "pool_kernels") if compiled and window_logits is not None else None
    if kernels is None:
        return stack_candidates(
            [
                metric_candidates(
                    keys[layer],
                    values[layer],
                    window_queries[layer],
                    scores[layer],
                    budget,
                    forced,
                    pool_factor=pool_factor,
                    value_weight=value_weight,
                    feature_scores=None if feature_scores is None else feature_scores[layer],
                    score_power=score_power,
                    window_logits=None if window_logits is None else window_logits[layer],
                    compiled=compiled,
                )
                for layer, budget in enumerate(budgets)
            ]
        )
    batch, heads, n, _ = keys[0].shape
    for budget in budgets:
        _check_budget(budget, n)
    weight = _score_weight(feature_scores, score_power)
    queries_per_head, d = window_queries[0].shape[-2:]
    logit_features = queries_per_head <= d  # else the key part is k S (see metric_candidates)
    index, features, valid, forced_at = kernels.pools_of_layers(
        [logits.reshape(batch, heads, queries_per_head, n) for logits in window_logits],
        values,
        torch.ones(scores.shape) if weight is None else weight,
        _forced_of_layers(forced, budgets),
        [_pool_size(budget, n, pool_factor) for budget in budgets],
        math.sqrt(d / queries_per_head),
        value_weight,
        logit_features=logit_features,
    )
    if not logit_features:
        parts = []
        for layer, layer_index in enumerate(index.split(batch)):
            key_part = _take_tokens(keys[layer].float(), layer_index) @ metric_root(window_queries[layer])
            if weight is not None:
                key_part = key_part * weight[layer].gather(-1, layer_index).unsqueeze(-1)
            parts.append(key_part)
        features = torch.cat([torch.cat(parts) * valid.unsqueeze(-1), features], dim=-1)  # padding: 0
    return Candidates(
        index=index,
        features=features,
        scores=scores.flatten(0, 1).gather(-1, index).masked_fill(~valid, 0.0),
        forced=forced_at,
        valid=valid,
        budget=torch.tensor(budgets, device=index.device).repeat_interleave(batch)[:, None].expand(-1, heads),
    )


def _pool_index(
    energy: torch.Tensor, forced: torch.Tensor, budget: int, pool_factor: float | None
) -> torch.Tensor:
    """``(B, H, P)`` sorted positions of the forced tokens plus the largest ``energy``."""
    batch, heads, n = energy.shape
    size = _pool_size(budget, n, pool_factor)
    if size == n:
        return torch.arange(n, device=energy.device).expand(batch, heads, n).contiguous()
    return energy.masked_fill(forced, float("inf")).topk(size, dim=-1).indices.sort(-1).values


def _pool_size(budget: int, n: int, pool_factor: float | None) -> int:
    return n if pool_factor is None else min(n, max(budget, math.ceil(pool_factor * budget)))


def _check_budget(budget: int, n: int) -> None:
    if not 1 <= budget <= n:
        raise ValueError(f"budget must be in [1, n={n}], got {budget}")


def stack_candidates(parts: list[Candidates]) -> Candidates:
    """Concatenate candidate pools along the batch dim (e.g. all layers), padding pools to one size."""
    size = max(part.index.shape[-1] for part in parts)

    def pad(tensor: torch.Tensor, value: float | bool, dims: int) -> torch.Tensor:
        missing = size - tensor.shape[-dims]
        widths = [0, 0] * (dims - 1) + [0, missing]
        return torch.nn.functional.pad(tensor, widths, value=value) if missing else tensor

    return Candidates(
        index=torch.cat([pad(p.index, 0, 1) for p in parts]),
        features=torch.cat([pad(p.features, 0.0, 2) for p in parts]),
        scores=torch.cat([pad(p.scores, 0.0, 1) for p in parts]),
        forced=torch.cat([pad(p.forced, False, 1) for p in parts]),
        valid=torch.cat([pad(p.valid, False, 1) for p in parts]),
        budget=torch.cat([p.budget for p in parts]),
    )


def cpu_kernels(device: torch.device, module: str = "kernels") -> Any:
    """The compiled kernels ``module`` (``kernels`` or ``pool_kernels``) for CPU tensors, or ``None``
    (another device, or numba not installed: the batched torch path computes the same result)."""
    if device.type != "cpu":
        return None
    try:
        return importlib.import_module(f"neurips26.methods.spectralkv.{module}")
    except ImportError:
        return None


def _forced_of_layers(forced: torch.Tensor, budgets: list[int]) -> torch.Tensor:
    """``(L, n)``: :func:`forced_within_budget` per layer budget; one shared row when every budget holds
    all forced tokens (the usual case: a budget is at least sinks + window), instead of a copy each."""
    if int(forced.sum()) <= min(budgets):
        return forced.expand(len(budgets), -1)
    return torch.stack([forced_within_budget(forced, budget) for budget in budgets])


def forced_within_budget(forced: torch.Tensor, budget: int) -> torch.Tensor:
    """The forced mask, trimmed from the oldest window tokens inward if it exceeds the budget."""
    if int(forced.sum()) <= budget:
        return forced.clone()
    idx = torch.nonzero(forced).squeeze(-1)
    trimmed = torch.zeros_like(forced)
    trimmed[idx[-budget:]] = True  # the most recent tokens win: the window matters most for decoding
    return trimmed
