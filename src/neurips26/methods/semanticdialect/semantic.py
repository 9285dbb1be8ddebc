"""SeDA (semantic-aware dialect assignment), attention-guided decomposition, and the tensor quantizer.

SeDA: tokens are grouped into clusters of semantically correlated tokens (one spatial patch across all
frames, or k-means on the block's input features). Each cluster c picks a sub-formatbook S_c of k
dialects minimising ``sum_{blocks b in c} min_{d in S_c} err_b[d]`` (greedy, facility-location style,
vectorised over clusters); its blocks then choose only inside S_c. Block ids shrink to log2 k bits and
blocks of the same patch in different frames share their candidate formats.

Decomposition: the rows of the salient tokens S (top ``r`` of tokens by attention mass received, i.e. the
column sums of the softmax) get a residual term, ``X_hat[S] = Q(X[S]) + Q(X[S] - Q(X[S]))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from neurips26.methods.semanticdialect.codec import (
    BlockQuantized,
    block_errors,
    blockify,
    build_lut,
    fake_quantize_blocks,
    quantize_blocks,
    shared_exponents,
)
from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.formatbook import Formatbook

__all__ = [
    "QuantStats",
    "SemanticDialectQuantizer",
    "TokenContext",
    "assign_subbooks",
    "patch_clusters",
    "salient_tokens",
]


def assign_subbooks(
    errors: torch.Tensor, row_clusters: torch.Tensor, n_clusters: int, k: int
) -> torch.Tensor:
    """Greedy sub-formatbook per cluster: (C, k) dialect ids.

    ``errors`` (rows, nb, |F|) are the blocks' selection errors, ``row_clusters`` (rows,) in [0, C).
    Step j adds, per cluster, the dialect that most lowers ``sum_b min_{d in S} err_b[d]``.
    """
    n_dialects = errors.shape[-1]
    if not 1 <= k <= n_dialects:
        raise ValueError(f"k must lie in [1, |F|={n_dialects}], got {k}")
    current = torch.full(errors.shape[:-1], float("inf"))
    chosen = torch.zeros(n_clusters, k, dtype=torch.int64)
    taken = torch.zeros(n_clusters, n_dialects, dtype=torch.bool)
    finite_cap = torch.finfo(torch.float32).max / (errors.shape[0] * errors.shape[1] + 1)
    for step in range(k):
        candidate = torch.minimum(current[..., None], errors).clamp_max(finite_cap).sum(dim=1)
        per_cluster = torch.zeros(n_clusters, n_dialects).index_add_(0, row_clusters, candidate)
        per_cluster = per_cluster.masked_fill(taken, float("inf"))
        pick = per_cluster.argmin(dim=1)
        chosen[:, step] = pick
        taken[torch.arange(n_clusters), pick] = True
        current = torch.minimum(
            current,
            errors[..., :]
            .gather(-1, pick[row_clusters][:, None, None].expand(-1, errors.shape[1], 1))
            .squeeze(-1),
        )
    return chosen


def patch_clusters(batch: int, tokens: int, tokens_per_frame: int) -> tuple[torch.Tensor, int]:
    """One cluster per (video, spatial patch): the same patch across every frame. Returns ids, count."""
    if tokens % tokens_per_frame:
        raise ValueError(f"tokens={tokens} is not a multiple of tokens_per_frame={tokens_per_frame}")
    patch = torch.arange(tokens) % tokens_per_frame
    ids = (torch.arange(batch)[:, None] * tokens_per_frame + patch[None]).reshape(-1)
    return ids, batch * tokens_per_frame


def salient_tokens(attention_mass: torch.Tensor, ratio: float) -> torch.Tensor:
    """Bool (B, N): per video the ``ceil(ratio N)`` tokens receiving the most attention mass."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must lie in [0, 1], got {ratio}")
    n = attention_mass.shape[-1]
    count = math.ceil(ratio * n)
    mask = torch.zeros_like(attention_mass, dtype=torch.bool)
    if count:
        top = attention_mass.topk(count, dim=-1).indices
        mask.scatter_(-1, top, True)
    return mask


@dataclass
class TokenContext:
    """What a layer knows about its input rows (tokens): SeDA clusters and salient rows, flattened."""

    row_clusters: torch.Tensor | None = None  # (rows,) int64
    n_clusters: int = 0
    salient: torch.Tensor | None = None  # (rows,) bool


@dataclass
class QuantStats:
    """Counters one quantizer accumulates: non-finite inputs, elements, and the last dialect ids."""

    non_finite: int = 0
    elements: int = 0
    last_dialects: torch.Tensor | None = field(default=None, repr=False)


class SemanticDialectQuantizer:
    """Fake-quantize (..., K) tensors blockwise along K with SemanticDialect (online, per call).

    Non-finite inputs are counted in ``stats.non_finite`` and passed through unchanged (they are left
    out of their block's exponent). ``K`` not a multiple of the block size is zero-padded (the padding
    is quantized exactly to zero and dropped).
    """

    def __init__(self, config: SemanticDialectConfig | None = None, book: Formatbook | None = None) -> None:
        self.config = config or SemanticDialectConfig()
        self.book = book or self.config.formatbook()
        self.lut = build_lut(self.book, self.config.intermediate_bits)
        self.stats = QuantStats()

    @property
    def bits_per_element(self) -> float:
        """Codes + exponent + dialect id per element (SeDA tables excluded: < 0.01 bit here)."""
        c = self.config
        id_bits = max(c.seda_k - 1, 0).bit_length() if c.seda else self.book.id_bits
        return 4.0 + (8.0 + id_bits) / c.block_size

    def _subbook_mask(self, context: TokenContext | None, rows: int) -> Callable | None:
        c = self.config
        if not c.seda or context is None or context.row_clusters is None or c.seda_k >= len(self.book):
            return None
        if context.row_clusters.numel() != rows:
            return None
        clusters, n_clusters = context.row_clusters, context.n_clusters

        def restrict(errors: torch.Tensor) -> torch.Tensor:
            subbooks = assign_subbooks(errors, clusters, n_clusters, c.seda_k)
            allowed = torch.zeros(n_clusters, len(self.book), dtype=torch.bool)
            allowed.scatter_(1, subbooks, True)
            return allowed[clusters][:, None, :]

        return restrict

    def quantize(self, x: torch.Tensor, context: TokenContext | None = None) -> BlockQuantized:
        """One 4-bit pass with SeDA (when on and the context has clusters for these rows), unpacked."""
        c = self.config
        rows = x.reshape(-1, x.shape[-1]).float()
        restrict = self._subbook_mask(context, rows.shape[0])
        allowed = None
        if restrict is not None:
            blocks, _ = blockify(rows, c.block_size)
            exponents = shared_exponents(blocks)
            scaled = torch.ldexp(blocks.abs(), -exponents[..., None].float())
            bins = (scaled / self.lut.delta).floor().clamp_(0, self.lut.bins - 1).long()
            allowed = restrict(block_errors(bins, self.lut))
        return quantize_blocks(
            rows,
            self.book,
            block_size=c.block_size,
            selection=c.selection,
            intermediate_bits=c.intermediate_bits,
            allowed=allowed,
        )

    def fake_quantize(self, rows: torch.Tensor, context: TokenContext | None = None) -> torch.Tensor:
        """Fused one-pass fake quantization of (rows, K) (the online path); records the dialect ids."""
        c = self.config
        values, dialects = fake_quantize_blocks(
            rows,
            self.book,
            block_size=c.block_size,
            selection=c.selection,
            intermediate_bits=c.intermediate_bits,
            allowed=self._subbook_mask(context, rows.shape[0]),
        )
        return values, dialects

    def __call__(self, x: torch.Tensor, context: TokenContext | None = None) -> torch.Tensor:
        finite = torch.isfinite(x)
        all_finite = bool(finite.all())
        source = x if all_finite else torch.where(finite, x, torch.zeros_like(x))
        if not all_finite:
            self.stats.non_finite += int((~finite).sum())
        self.stats.elements += x.numel()
        rows = source.reshape(-1, x.shape[-1]).float()
        out, self.stats.last_dialects = self.fake_quantize(rows, context)
        salient = None if context is None else context.salient
        if salient is not None and salient.numel() == rows.shape[0] and bool(salient.any()):
            # X_hat[S] = Q(X[S]) + Q(X[S] - Q(X[S]))   (attention-guided residual quantization)
            residual = rows[salient] - out[salient]
            sub_context = None
            if context is not None and context.row_clusters is not None:
                sub_context = TokenContext(context.row_clusters[salient], context.n_clusters)
            out[salient] = out[salient] + self.fake_quantize(residual, sub_context)[0]
        out = out.reshape(x.shape).to(x.dtype)
        return out if all_finite else torch.where(finite, out, x)
