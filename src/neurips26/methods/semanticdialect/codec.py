"""The block codec: shared exponents, LUT dialect selection, quantize-by-gather, brute force (reference).

SemanticDialect (Jang & Tambe, 2026), on BlockDialect's block format. A tensor is cut into blocks of
``block_size`` values along its last dimension (zero-padded when that dimension is not a multiple; the
padding is dropped on the way back). For a block B:

    e_B = floor(log2 max|x|) - 2                                   (E8M0 shared exponent, as MX FLOOR)
    s = |x| 2^-e_B in [0, 8)                                       (scaled magnitudes)
    m = floor(s / delta)                                           (intermediate grid, delta = 8 / M)
    err_B[d] = sum_m hist_B[m] LUT_err[d, m]                       (one (blocks x M) @ (M x |F|) matmul)
    d*_B = argmin_d err_B[d],  code_i = LUT_idx[d*_B, m_i]         (a gather)

``LUT_err[d, m] = (c_m - q_d(c_m))^2`` at the bin centre ``c_m = (m + 1/2) delta`` and ``LUT_idx[d, m]`` is
the index of the dialect value nearest to the bin's interior. Every decision threshold of a 0.5-grid
dialect is a multiple of 0.25, so with ``delta <= 0.25`` all of a bin's interior rounds to one value and
quantization by gather is *exact* nearest rounding; a value exactly on a bin's lower edge uses
``LUT_edge[d, m]`` (ties go to the even index, which for E2M1 is IEEE round-to-nearest-even). The
selection error is approximate: with ``err_true = A + H_d + 2 sum_i (s_i - c_m)(c_m - q_d)`` (A does not
depend on d), the LUT pick is worse than the best dialect by at most ``2 delta max_d sum_m hist[m]
|c_m - q_d(c_m)|`` (scaled units; :func:`selection_error_bound`), and exact on values at bin centres.
The cost is O(n) plus a (blocks x M x |F|) matmul: flat in |F| next to brute force's O(n |F|).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from neurips26.methods.semanticdialect.formatbook import Formatbook

__all__ = [
    "BlockQuantized",
    "DialectLUT",
    "block_errors",
    "blockify",
    "brute_force_errors",
    "build_lut",
    "dequantize_blocks",
    "fake_quantize_blocks",
    "quantize_blocks",
    "selection_error_bound",
    "shared_exponents",
]

EXPONENT_MIN, EXPONENT_MAX = -127, 127


@dataclass(frozen=True)
class DialectLUT:
    """Lookup tables of one formatbook on an intermediate grid of ``M = 8 / delta`` bins.

    ``err`` (|F|, M) float32, ``absdiff`` (|F|, M), ``idx`` and ``edge`` (|F|, M) int64.
    """

    delta: float
    err: torch.Tensor
    absdiff: torch.Tensor
    idx: torch.Tensor
    edge: torch.Tensor
    values: torch.Tensor  # (|F| * 2M,): slot 2m = value of a bin's lower edge, 2m + 1 = of its interior

    @property
    def bins(self) -> int:
        return self.err.shape[1]


def _nearest_index(values: torch.Tensor, magnitudes: torch.Tensor) -> torch.Tensor:
    """Index of the nearest magnitude per dialect, ties to the even index: (|F|, n) for values (n,)."""
    distance = (values[None, :, None] - magnitudes[:, None, :]).abs()  # (|F|, n, 8)
    best = distance.min(dim=-1, keepdim=True).values
    tied = distance == best
    index = torch.arange(magnitudes.shape[1])
    # among tied indices prefer an even one (IEEE round-half-to-even on E2M1's code order)
    preference = torch.where(tied, (index % 2) * 16 + index, torch.full_like(index, 1 << 10))
    return preference.argmin(dim=-1)


@cache
def _lut_cached(dialects: tuple[tuple[float, ...], ...], intermediate_bits: int) -> DialectLUT:
    magnitudes = torch.tensor(dialects, dtype=torch.float64)
    bins = 1 << intermediate_bits
    delta = 8.0 / bins
    centres = (torch.arange(bins, dtype=torch.float64) + 0.5) * delta
    edges = torch.arange(bins, dtype=torch.float64) * delta
    idx = _nearest_index(centres, magnitudes)
    edge = _nearest_index(edges, magnitudes)
    q = torch.gather(magnitudes, 1, idx)
    values = torch.stack([torch.gather(magnitudes, 1, edge), q], dim=-1).reshape(-1).float()
    return DialectLUT(
        delta=delta,
        err=((centres[None] - q) ** 2).float(),
        absdiff=(centres[None] - q).abs().float(),
        idx=idx,
        edge=edge,
        values=values,
    )


def build_lut(book: Formatbook, intermediate_bits: int = 5) -> DialectLUT:
    """Precompute LUT_err, LUT_idx (and the lower-edge index table) for ``book`` (cached per book).

    ``intermediate_bits`` >= 5 (delta <= 0.25) keeps quantization by gather exact.
    """
    if isinstance(intermediate_bits, bool) or not isinstance(intermediate_bits, int):
        raise TypeError(f"intermediate_bits must be an int, got {intermediate_bits!r}")
    if not 5 <= intermediate_bits <= 10:
        raise ValueError(f"intermediate_bits must lie in [5, 10] (delta <= 0.25), got {intermediate_bits}")
    return _lut_cached(book.dialects, intermediate_bits)


def blockify(x: torch.Tensor, block_size: int) -> tuple[torch.Tensor, int]:
    """(..., K) -> (..., ceil(K / block_size), block_size), zero-padding the last block; returns the pad."""
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (blocks run along the last one)")
    pad = (-x.shape[-1]) % block_size
    if pad:
        x = torch.nn.functional.pad(x, (0, pad))
    return x.reshape(*x.shape[:-1], x.shape[-1] // block_size, block_size), pad


def shared_exponents(blocks: torch.Tensor) -> torch.Tensor:
    """E8M0 exponent per block, ``floor(log2 max|x|) - 2`` clamped to [-127, 127] (-127 for all-zero)."""
    amax = blocks.abs().amax(dim=-1)
    _, exponent = torch.frexp(amax)  # amax = mantissa * 2^exponent, mantissa in [0.5, 1)
    shared = (exponent - 1 - 2).to(torch.int32)
    shared = torch.where(amax > 0, shared, torch.full_like(shared, EXPONENT_MIN))
    return shared.clamp(EXPONENT_MIN, EXPONENT_MAX)


def _scaled(blocks: torch.Tensor, exponents: torch.Tensor) -> torch.Tensor:
    return torch.ldexp(blocks.abs(), -exponents[..., None].to(blocks.dtype))


def _bins(scaled: torch.Tensor, lut: DialectLUT) -> torch.Tensor:
    return (scaled * (1.0 / lut.delta)).floor().clamp_(0, lut.bins - 1).to(torch.int64)


def block_errors(bins: torch.Tensor, lut: DialectLUT) -> torch.Tensor:
    """LUT selection errors: hist (blocks, M) @ LUT_err^T -> (blocks, |F|), for bins (blocks, B)."""
    flat = bins.reshape(-1, bins.shape[-1])
    hist = torch.zeros(flat.shape[0], lut.bins, dtype=torch.float32)
    hist.scatter_add_(1, flat, torch.ones_like(flat, dtype=torch.float32))
    return (hist @ lut.err.T).reshape(*bins.shape[:-1], -1)


def selection_error_bound(blocks: torch.Tensor, book: Formatbook, intermediate_bits: int = 5) -> torch.Tensor:
    """Per block, the most the LUT pick's squared error can exceed the best dialect's (original units).

    With ``H_d = hist @ LUT_err[d]``, ``G_d = hist @ |c - q_d(c)|`` and ``|s - c_m| <= delta / 2``, the
    true error is ``A + H_d + L_d`` with ``|L_d| <= delta G_d``, so for the pick ``d*`` and any ``d``:
    ``E_d* - E_d <= H_d* - H_d + delta (G_d* + G_d)``; the bound is its maximum over ``d`` (>= 0).
    """
    lut = build_lut(book, intermediate_bits)
    exponents = shared_exponents(blocks)
    bins = _bins(_scaled(blocks, exponents), lut)
    flat = bins.reshape(-1, bins.shape[-1])
    hist = torch.zeros(flat.shape[0], lut.bins, dtype=torch.float64)
    hist.scatter_add_(1, flat, torch.ones_like(flat, dtype=torch.float64))
    h, g = hist @ lut.err.double().T, hist @ lut.absdiff.double().T
    pick = h.argmin(dim=1, keepdim=True)
    h_pick, g_pick = h.gather(1, pick), g.gather(1, pick)
    worst = (h_pick - h + lut.delta * (g_pick + g)).amax(dim=1).clamp_min(0).reshape(bins.shape[:-1])
    return worst * torch.ldexp(torch.ones_like(worst), 2 * exponents.to(torch.int64))


def brute_force_errors(blocks: torch.Tensor, book: Formatbook, exponents: torch.Tensor) -> torch.Tensor:
    """Squared error of every dialect on every block, quantizing each element exactly: O(n |F|).

    Each dialect's exact nearest values come from the gather table (exact, see the module doc), so this
    is BlockDialect-style exhaustive selection: every element is quantized with every dialect.
    """
    lut = build_lut(book)
    scaled = _scaled(blocks, exponents)
    bins_f = (scaled * (1.0 / lut.delta)).floor_().clamp_(0, lut.bins - 1)
    slot = bins_f.to(torch.int64).mul_(2).add_((scaled != bins_f * lut.delta).to(torch.int64))
    errors = []
    for d in range(len(book)):
        q = lut.values[slot + d * 2 * lut.bins]
        errors.append(q.sub_(scaled).square_().sum(dim=-1))
    return torch.stack(errors, dim=-1)


@dataclass(frozen=True)
class BlockQuantized:
    """A quantized tensor before packing: per element a sign and a 3-bit index, per block an exponent
    and a dialect id (into ``book``). Shapes: ``signs``/``indices`` (..., nb, B), ``exponents`` and
    ``dialects`` (..., nb); ``pad`` zeros were appended to the last dimension ``length``."""

    signs: torch.Tensor
    indices: torch.Tensor
    exponents: torch.Tensor
    dialects: torch.Tensor
    book: Formatbook
    length: int
    pad: int


def quantize_blocks(
    x: torch.Tensor,
    book: Formatbook,
    *,
    block_size: int = 32,
    selection: str = "lut",
    intermediate_bits: int = 5,
    allowed: torch.Tensor | None = None,
) -> BlockQuantized:
    """Quantize ``x`` (..., K) blockwise along its last dimension with ``book``.

    Parameters
    ----------
    selection : {"lut", "brute_force", "random"}
        LUT selection (SemanticDialect), exact per-dialect errors (BlockDialect-style reference) or a
        uniformly random dialect per block (a negative control).
    allowed : torch.Tensor, optional
        Bool (..., nb, |F|) or broadcastable: dialects a block may choose (SeDA's sub-formatbooks).
    """
    if selection not in ("lut", "brute_force", "random"):
        raise ValueError(f"selection={selection!r} is not allowed; choose one of lut, brute_force, random")
    lut = build_lut(book, intermediate_bits)
    x = x.float()
    blocks, pad = blockify(x, block_size)
    exponents = shared_exponents(blocks)
    scaled = _scaled(blocks, exponents)
    bins = _bins(scaled, lut)
    if selection == "random":
        errors = torch.rand(*blocks.shape[:-1], len(book))
    elif selection == "lut":
        errors = block_errors(bins, lut)
    else:
        errors = brute_force_errors(blocks, book, exponents)
    if allowed is not None:
        errors = errors.masked_fill(~allowed, float("inf"))
    dialects = errors.argmin(dim=-1)
    d = dialects[..., None].expand_as(bins).reshape(-1)
    flat_bins = bins.reshape(-1)
    on_edge = scaled.reshape(-1) == flat_bins.to(scaled.dtype) * lut.delta
    indices = torch.where(on_edge, lut.edge[d, flat_bins], lut.idx[d, flat_bins]).reshape(bins.shape)
    return BlockQuantized(
        signs=torch.signbit(blocks),
        indices=indices.to(torch.uint8),
        exponents=exponents,
        dialects=dialects,
        book=book,
        length=x.shape[-1],
        pad=pad,
    )


def dequantize_blocks(q: BlockQuantized) -> torch.Tensor:
    """Values of a :class:`BlockQuantized`: ``(-1)^sign * magnitudes[dialect, index] * 2^exponent``."""
    n_dialects = len(q.book)
    flat = q.dialects[..., None].expand_as(q.indices).to(torch.int64) * 8 + q.indices.to(torch.int64)
    magnitude = q.book.magnitudes.reshape(n_dialects * 8)[flat]
    values = torch.ldexp(magnitude, q.exponents[..., None].to(torch.float32))
    values = torch.where(q.signs, -values, values)
    values = values.reshape(*values.shape[:-2], -1)
    return values[..., : q.length] if q.pad else values


def fake_quantize_blocks(
    x: torch.Tensor,
    book: Formatbook,
    *,
    block_size: int = 32,
    selection: str = "lut",
    intermediate_bits: int = 5,
    allowed: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
    errors: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused quantize + dequantize (the online path): returns (values like ``x``, dialect ids (..., nb)).

    Equal to ``dequantize_blocks(quantize_blocks(x, ...))`` element for element; the magnitude comes from
    one gather in the table ``LUT.values`` at ``(d * M + m) * 2 + [s is inside its bin]``.
    ``errors`` (..., nb, |F|) may be passed when the caller already computed the LUT errors;
    ``allowed`` may be a callable ``errors -> bool mask`` (SeDA picks sub-books from the errors).
    """
    if selection not in ("lut", "brute_force", "random"):
        raise ValueError(f"selection={selection!r} is not allowed; choose one of lut, brute_force, random")
    lut = build_lut(book, intermediate_bits)
    x = x.float()
    blocks, pad = blockify(x, block_size)
    exponents = shared_exponents(blocks)
    scale = torch.ldexp(torch.ones_like(exponents, dtype=torch.float32), exponents.float())[..., None]
    scaled = blocks.abs().div_(scale)  # exact: division by a power of two
    bins_f = scaled.mul(1.0 / lut.delta).floor_().clamp_(0, lut.bins - 1)
    bins = bins_f.to(torch.int64)
    if errors is None:
        if selection == "random":
            errors = torch.rand(*blocks.shape[:-1], len(book))
        elif selection == "lut":
            errors = block_errors(bins, lut)
        else:
            errors = brute_force_errors(blocks, book, exponents)
    if callable(allowed):
        allowed = allowed(errors)
    if allowed is not None:
        errors = errors.masked_fill(~allowed, float("inf"))
    dialects = errors.argmin(dim=-1)
    inside = (scaled != bins_f.mul_(lut.delta)).to(torch.int64)
    key = ((dialects[..., None] * lut.bins + bins) << 1).add_(inside)
    values = lut.values[key].mul_(scale).copysign_(blocks)
    values = values.reshape(*values.shape[:-2], -1)
    return (values[..., : x.shape[-1]] if pad else values), dialects
