"""Near-duplicate pairs of a candidate pool (exact, sub-quadratic) and the near-duplicate share metric."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from neurips26.methods.spectralkv.features import cpu_kernels

__all__ = ["DuplicatePairs", "near_duplicate_share", "rank_of", "sweep_settings"]

_SWEEP_DIRECTIONS = 4  # DuplicatePairs.find screens pairs on this many orthonormal coordinates (exact for
# any number; 4 was fastest on captured pools, 2-12 tried: fewer let more pairs through, more cost more to
# project)


def rank_of(key: torch.Tensor) -> torch.Tensor:
    """Position of every entry in the descending (stable) order of ``key`` along the last dim."""
    order = torch.argsort(key, dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    return rank


@dataclass
class DuplicatePairs:
    """The near-duplicate relation of a candidate pool: every pair with cosine >= ``threshold``.

    Stored sparse, once per pool (both orders of each pair), so the restart rounds and the score fill
    look up a token's duplicates by index instead of comparing it with every kept token again.
    """

    shape: tuple[int, ...]
    row: torch.Tensor  # flat (batch, head) row of each ordered pair
    first: torch.Tensor
    second: torch.Tensor

    @classmethod
    def find(
        cls, unit: torch.Tensor, valid: torch.Tensor, threshold: float, *, compiled: bool = True
    ) -> DuplicatePairs:
        """All pairs of ``valid`` tokens of ``unit`` ``(..., P, D)`` (unit rows) with cosine >= threshold.

        Exact, and far below the ``O(P^2 D)`` of comparing all pairs when duplicates are rare: unit
        vectors with cosine >= t lie within ``r = sqrt(2 - 2t)`` of each other, so also after any
        orthonormal projection. The tokens are sorted by their coordinate on a direction they spread
        along (:func:`_spread_directions`); a token's candidates are the ones within ``r`` of it in that
        order whose projection on a few more directions is also within ``r``, and only those are
        compared in full. On CPU (``compiled``) the sweep runs in :func:`kernels.duplicate_pairs`.
        """
        shape = tuple(valid.shape)
        n, dim = shape[-1], unit.shape[-1]
        u = unit.reshape(-1, n, dim).float()
        ok = valid.reshape(-1, n)
        radius, directions = sweep_settings(threshold, dim)
        kernels = cpu_kernels(u.device) if compiled else None
        if kernels is not None:
            row, a, b = kernels.duplicate_pairs(u, ok, threshold, radius, directions)
            return cls(shape, torch.cat([row, row]), torch.cat([a, b]), torch.cat([b, a]))
        coords = u @ _spread_directions(u, ok).transpose(1, 2)  # (R, n, k)
        sorted_first, order = coords[..., 0].masked_fill(~ok, float("inf")).sort(-1)
        reach = torch.searchsorted(sorted_first, sorted_first + radius, right=True)
        steps = (reach - torch.arange(n, device=u.device) - 1).masked_fill(~ok.gather(1, order), 0)
        first, second = _within_steps(steps)  # flat sorted positions, every pair close in coordinate 0
        near = coords.gather(1, order.unsqueeze(-1).expand_as(coords)).reshape(-1, coords.shape[-1])
        first, second = _keep(first, second, (near[first] - near[second]).pow(2).sum(-1) <= radius**2)
        row, a, b = first // n, order.reshape(-1)[first], order.reshape(-1)[second]
        row, a, b = _keep(row, a, b, (u[row, a] * u[row, b]).sum(-1) >= threshold)
        return cls(shape, torch.cat([row, row]), torch.cat([a, b]), torch.cat([b, a]))

    @property
    def empty(self) -> bool:
        return self.row.numel() == 0

    def of_any(self, flag: torch.Tensor, before: torch.Tensor | None = None) -> torch.Tensor:
        """``(..., P)`` bool: tokens with a duplicate among the ``flag`` ones (earlier by ``before``)."""
        if self.empty:
            return torch.zeros_like(flag, dtype=torch.bool)
        hit = flag.reshape(-1, self.shape[-1])[self.row, self.first]
        if before is not None:
            rank = before.reshape(-1, self.shape[-1])
            hit &= rank[self.row, self.first] < rank[self.row, self.second]
        out = torch.zeros(flag.numel(), dtype=torch.bool, device=flag.device)
        out[(self.row * self.shape[-1] + self.second)[hit]] = True
        return out.reshape(flag.shape)


def sweep_settings(threshold: float, dim: int) -> tuple[float, torch.Tensor]:
    """The sweep's screening radius (``sqrt(2 - 2t)`` plus slack for float32 rounding) and its fixed
    ``(dim, k - 1)`` directions, for :meth:`DuplicatePairs.find` and the compiled selection alike."""
    radius = math.sqrt(max(0.0, 2.0 - 2.0 * threshold)) + 1e-5
    return radius, _fixed_directions(dim, min(_SWEEP_DIRECTIONS, dim) - 1)


def _spread_directions(unit: torch.Tensor, valid: torch.Tensor, k: int = _SWEEP_DIRECTIONS) -> torch.Tensor:
    """``(R, k, D)`` orthonormal directions; the first runs from the mean of the valid rows to the row
    farthest from it (they spread along it nearly as much as along the principal direction, for one
    matrix-vector product), the others are fixed random ones. Any orthonormal directions keep
    :meth:`DuplicatePairs.find` exact; spread-out ones keep it fast."""
    count, _, dim = unit.shape
    weight = valid.unsqueeze(1).to(unit.dtype)  # (R, 1, n)
    mean = (weight @ unit).squeeze(1) / weight.sum(-1).clamp_min(1)  # (R, D)
    # ||u - mean||^2 = 1 - 2 u.mean + ||mean||^2 for unit rows: the farthest has the smallest u.mean
    farthest = (unit @ mean.unsqueeze(-1)).squeeze(-1).masked_fill(~valid, float("inf")).argmin(-1)
    first = unit[torch.arange(count, device=unit.device), farthest] - mean
    others = _fixed_directions(dim, min(k, dim) - 1).to(unit)
    columns = torch.cat([first.unsqueeze(-1), others.expand(count, -1, -1)], dim=-1)
    return torch.linalg.qr(columns).Q.transpose(1, 2)


@functools.lru_cache(maxsize=8)
def _fixed_directions(dim: int, k: int) -> torch.Tensor:
    """``(dim, k)`` random directions, the same on every call (seed 0)."""
    return torch.randn(dim, k, generator=torch.Generator().manual_seed(0))


def _within_steps(steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat pairs ``(i, i + s)``, ``1 <= s <= steps[i]``, over the rows of ``steps`` ``(R, m)``."""
    counts = steps.reshape(-1)
    first = torch.repeat_interleave(torch.arange(len(counts), device=steps.device), counts)
    starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    return first, first + torch.arange(len(first), device=steps.device) - starts + 1


def _keep(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The entries of every tensor but the last where the last (a bool mask) is True."""
    *values, mask = tensors
    return tuple(value[mask] for value in values)


def near_duplicate_share(
    keys: torch.Tensor, values: torch.Tensor, threshold: float = 0.95, mask: torch.Tensor | None = None
) -> float:
    """Share of kept tokens that are a near-duplicate of an earlier kept token.

    Tokens are compared by the cosine of ``[k / ||K||_F ; v / ||V||_F]`` per (batch, head); token ``j``
    counts when some kept ``i < j`` has cosine >= ``threshold``. Inputs are ``(B, H, m, d)`` cache entries;
    ``mask`` ``(B, H, m)`` marks the ones a head really keeps (head-wise presses mask instead of dropping).
    """
    k = keys.float() / keys.float().pow(2).sum((-1, -2), keepdim=True).sqrt().clamp_min(1e-12)
    v = values.float() / values.float().pow(2).sum((-1, -2), keepdim=True).sqrt().clamp_min(1e-12)
    joint = torch.cat([k, v], dim=-1)
    unit = joint / joint.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    cos = unit @ unit.transpose(-1, -2)
    m = cos.shape[-1]
    present = torch.ones(keys.shape[:3], dtype=torch.bool, device=keys.device) if mask is None else mask
    earlier = torch.ones(m, m, dtype=torch.bool, device=cos.device).tril(-1)
    pairs = (cos >= threshold) & earlier & present.unsqueeze(-1) & present.unsqueeze(-2)
    duplicate = pairs.any(-1) & present
    total = int(present.sum())
    return float(duplicate.sum()) / total if total else 0.0
