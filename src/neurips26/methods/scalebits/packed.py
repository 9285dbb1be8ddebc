"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs -- the packed linear layer.

Storage format of one ``(R, C)`` weight with tile ``(tr, tc)``, group size ``g`` and bit set ``B``
(every stream is a byte-aligned uint8 buffer, bit-packed little-endian by :func:`core.pack_bits`):

============  ==========================================================  =========================
buffer        content                                                     bits
============  ==========================================================  =========================
tile_ids      index into ``B`` of each tile, row-major over the tile grid  ``n_tiles ceil(log2 |B|)``
codes_{b}     codes of all tiles at width ``b``, tile order, row-major     ``n_b tr tc b``
zeros_{b}     integer zero point per group of those tiles                 ``n_b tr (tc / g) b``
zeros_fp16    (instead of zeros_{b}, HQQ's format) float16 zero per group  ``16 R C / g``
scales        float16 scale per group, ``(R, C / g)``                      ``16 R C / g``
input_order   (optional) runtime gather index of the input columns         ``C ceil(log2 C)``
output_order  (optional) runtime gather index of the output rows           ``R ceil(log2 R)``
============  ==========================================================  =========================

The reference kernel dequantizes ``W_hat = (q - z) s`` tile by tile and calls ``F.linear``; with gather
indices (``reorder="gather"``, :mod:`.gather`) it computes ``(W_hat x[input_order])[argsort(output_order)]``.
"""

from __future__ import annotations

import torch
from torch import nn

from neurips26.methods.scalebits.core import (
    BitLedger,
    check_tiling,
    dequantize_groups,
    expand_tile_values,
    from_tiles,
    index_bits,
    layer_ledger,
    pack_bits,
    pad_to_tiles,
    padded_shape,
    quantize_groups,
    to_tiles,
    unpack_bits,
)
from neurips26.methods.scalebits.gather import gathered_linear


class ScaleBitsLinear(nn.Module):
    """A linear layer stored in the ScaleBITS packed mixed-precision tile format (see module docstring).

    Build it with :meth:`from_weight`; ``forward(x)`` computes ``x W_hat^T + bias`` with the reference
    dequantize-matmul. Shapes: ``x (..., C) -> (..., R)``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bit_set: tuple[int, ...],
        tile: tuple[int, int],
        group_size: int,
        tile_counts: dict[int, int],
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.bit_set, self.tile, self.group_size = tuple(bit_set), tuple(tile), group_size
        self.tile_counts = dict(tile_counts)
        self.stored_shape = padded_shape((out_features, in_features), tile)
        self.float_zeros = False
        self.bias: nn.Parameter | None = None
        self.gathers = (False, False)  # whether input_order / output_order are stored

    @classmethod
    def from_weight(
        cls,
        weight: torch.Tensor,
        tile_bits: torch.Tensor,
        bit_set: tuple[int, ...],
        tile: tuple[int, int],
        group_size: int,
        bias: torch.Tensor | None = None,
        pad: bool = False,
        input_order: torch.Tensor | None = None,
        output_order: torch.Tensor | None = None,
    ) -> ScaleBitsLinear:
        """Quantize ``weight (R, C)`` with the per-tile bit-widths ``tile_bits (n_tiles,)`` and pack it.

        With ``pad=True`` a weight that whole tiles do not cover is padded (edge values repeated) and the
        padding is stored and counted in the ledger; the output is cropped back to ``(R, C)``.
        ``weight`` is the stored (already permuted) weight of a gathered layer with its orders.
        """
        rows, cols = weight.shape
        check_tiling("weight", (rows, cols), tile, group_size, pad)
        stored = padded_shape((rows, cols), tile)
        tile_bits = tile_bits.long().reshape(-1)
        element_bits = expand_tile_values(tile_bits, stored, tile)
        codes, scales, zeros = quantize_groups(pad_to_tiles(weight.detach(), tile), element_bits, group_size)
        return cls.from_quantized(
            codes,
            scales,
            zeros,
            (rows, cols),
            tile_bits,
            bit_set,
            tile,
            group_size,
            bias,
            input_order,
            output_order,
        )

    @classmethod
    def from_quantized(
        cls,
        codes: torch.Tensor,
        scales: torch.Tensor,
        zeros: torch.Tensor,
        shape: tuple[int, int],
        tile_bits: torch.Tensor,
        bit_set: tuple[int, ...],
        tile: tuple[int, int],
        group_size: int,
        bias: torch.Tensor | None = None,
        input_order: torch.Tensor | None = None,
        output_order: torch.Tensor | None = None,
    ) -> ScaleBitsLinear:
        """Pack codes another quantizer chose (GPTQ, HQQ) into the same format and ledger.

        ``codes (R', C')`` integers below ``2^b`` of their tile, ``scales (R', C' / g)`` (stored as float16)
        and ``zeros (R', C' / g)``: integers (packed at the tile's width) or, when floating point, one float16
        zero per group (HQQ's native format, counted as 16 bits per group). ``(R', C')`` is the stored
        (padded) shape; ``shape = (R, C)`` the real one the output is cropped to.
        """
        stored = padded_shape(tuple(shape), tile)
        if tuple(codes.shape) != stored or tuple(scales.shape) != (stored[0], stored[1] // group_size):
            raise ValueError(
                f"codes {tuple(codes.shape)} and scales {tuple(scales.shape)} must have the stored shape "
                f"{stored} and {(stored[0], stored[1] // group_size)} for shape={tuple(shape)}, tile={tile}"
            )
        rows, cols = shape
        tile_bits = tile_bits.long().reshape(-1)
        counts = {b: int((tile_bits == b).sum()) for b in bit_set}
        layer = cls(cols, rows, bit_set, tile, group_size, counts)
        layer.stored_shape = stored
        layer.float_zeros = zeros.is_floating_point()
        bit_index = torch.searchsorted(torch.tensor(bit_set), tile_bits)
        layer.register_stream("tile_ids", pack_bits(bit_index, index_bits(len(bit_set))))
        code_tiles = to_tiles(codes.long(), tile)
        zero_tiles = None if layer.float_zeros else to_tiles(zeros.long(), (tile[0], tile[1] // group_size))
        for bits in bit_set:
            mask = tile_bits == bits
            layer.register_stream(f"codes_{bits}", pack_bits(code_tiles[mask], bits))
            if zero_tiles is not None:
                layer.register_stream(f"zeros_{bits}", pack_bits(zero_tiles[mask], bits))
        layer.register_buffer("scales", scales.half())
        if layer.float_zeros:
            layer.register_buffer("zeros_fp16", zeros.half())
        if bias is not None:
            layer.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)
        for side, order, length in (("input", input_order, cols), ("output", output_order, rows)):
            if order is not None:
                if sorted(order.tolist()) != list(range(length)):
                    raise ValueError(f"{side}_order must be a permutation of range({length})")
                layer.register_buffer(f"{side}_order", pack_bits(order.long(), index_bits(length)))
        layer.gathers = (input_order is not None, output_order is not None)
        return layer

    def register_stream(self, name: str, stream: torch.Tensor) -> None:
        """Register a packed stream as a buffer unless it is empty (a width no tile uses, the tile ids of a
        one-width bit set): transformers' ``save_pretrained`` takes empty tensors for tied weights."""
        if stream.numel():
            self.register_buffer(name, stream)

    def tile_bits(self) -> torch.Tensor:
        """The bit-width of every tile, unpacked from ``tile_ids``."""
        n_tiles = sum(self.tile_counts.values())
        if len(self.bit_set) == 1:  # no tile ids stored
            return torch.full((n_tiles,), self.bit_set[0], dtype=torch.long)
        index = unpack_bits(self.tile_ids, index_bits(len(self.bit_set)), n_tiles)
        return torch.tensor(self.bit_set)[index]

    def dequantize(self) -> torch.Tensor:
        """``W_hat (R, C)`` float32, tile by tile: ``(q - z) s``."""
        tile_rows, tile_cols = self.tile
        groups_per_row = tile_cols // self.group_size
        tile_bits = self.tile_bits()
        scale_tiles = to_tiles(self.scales.float(), (tile_rows, groups_per_row))
        float_zero_tiles = (
            to_tiles(self.zeros_fp16.float(), (tile_rows, groups_per_row)) if self.float_zeros else None
        )
        weight_tiles = torch.zeros(len(tile_bits), tile_rows, tile_cols)
        for bits in self.bit_set:
            mask = tile_bits == bits
            count = int(mask.sum())
            if count == 0:
                continue
            codes = unpack_bits(getattr(self, f"codes_{bits}"), bits, count * tile_rows * tile_cols)
            if float_zero_tiles is not None:
                zeros = float_zero_tiles[mask]
            else:
                zeros = unpack_bits(getattr(self, f"zeros_{bits}"), bits, count * tile_rows * groups_per_row)
                zeros = zeros.reshape(count, tile_rows, groups_per_row)
            weight_tiles[mask] = dequantize_groups(
                codes.reshape(count, tile_rows, tile_cols), scale_tiles[mask], zeros
            )
        full = from_tiles(weight_tiles, self.stored_shape)
        return full[: self.out_features, : self.in_features]

    def orders(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The unpacked runtime gather indices ``(input_order, output_order)``; None where not stored."""
        lengths = (self.in_features, self.out_features)
        return tuple(  # type: ignore[return-value]
            unpack_bits(getattr(self, f"{side}_order"), index_bits(n), n) if stored else None
            for side, n, stored in zip(("input", "output"), lengths, self.gathers, strict=True)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.dequantize().to(x.dtype)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        if not any(self.gathers):
            return nn.functional.linear(x, weight, bias)
        return gathered_linear(x, weight, bias, *self.orders())

    def ledger(self) -> BitLedger:
        """Every stored bit of this layer's weight, per stream (bias excluded)."""
        return layer_ledger(
            self.stored_shape,
            self.tile,
            self.group_size,
            self.bit_set,
            self.tile_bits(),
            input_permutation=self.in_features if self.gathers[0] else 0,
            output_permutation=self.out_features if self.gathers[1] else 0,
            n_weights=self.out_features * self.in_features,
            float_zeros=self.float_zeros,
        )

    def packed_nbytes(self) -> int:
        """Bytes of the packed weight buffers (what the ledger must equal)."""
        return sum(buffer.numel() * buffer.element_size() for buffer in self.buffers())

    def extra_repr(self) -> str:
        mix = ", ".join(f"{b}b:{n}" for b, n in self.tile_counts.items())
        return f"in={self.in_features}, out={self.out_features}, tile={self.tile}, g={self.group_size}, {mix}"
