"""Bit-exact packing of block-quantized tensors and the byte ledger (bits per element).

Layout (all little-endian bit order within a byte):

- ``codes``: one 4-bit code per element (bit 3: sign, bits 0-2: index into the block's dialect), two per
  byte, the first element in the low nibble; padding elements are stored (as +0) so blocks stay whole;
- ``exponents``: one byte per block, the E8M0 biased exponent ``e + 127``;
- ``dialect_ids``: a bit stream of ``id_bits`` per block: ``ceil(log2 |F|)`` without SeDA, ``ceil(log2 k)``
  (the index inside the block's cluster sub-formatbook) with SeDA;
- ``subbook_table`` (SeDA only): per cluster ``k`` dialect ids of ``ceil(log2 |F|)`` bits, plus the
  cluster id of every row (``ceil(log2 C)`` bits per row).

Bits per element = 8 * (sum of the ledger) / (number of real, unpadded elements).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neurips26.methods.semanticdialect.codec import BlockQuantized
from neurips26.methods.semanticdialect.formatbook import Formatbook

__all__ = ["PackedTensor", "pack", "pack_bits", "unpack", "unpack_bits"]

_BIT_WEIGHTS = 2 ** torch.arange(8, dtype=torch.int64)


def pack_bits(values: torch.Tensor, width: int) -> torch.Tensor:
    """Pack non-negative ints (< 2^width) into a uint8 bit stream, ``width`` bits each, LSB first."""
    if width == 0:
        return torch.zeros(0, dtype=torch.uint8)
    flat = values.reshape(-1).to(torch.int64)
    if flat.numel() and (flat.min() < 0 or flat.max() >= (1 << width)):
        raise ValueError(f"values must lie in [0, {1 << width}) to pack in {width} bits")
    bits = (flat[:, None] >> torch.arange(width)) & 1
    bits = bits.reshape(-1)
    bits = torch.nn.functional.pad(bits, (0, (-bits.numel()) % 8))
    return (bits.reshape(-1, 8) * _BIT_WEIGHTS).sum(dim=1).to(torch.uint8)


def unpack_bits(stream: torch.Tensor, width: int, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: the first ``count`` values of ``width`` bits (int64)."""
    if width == 0:
        return torch.zeros(count, dtype=torch.int64)
    bits = (stream.to(torch.int64)[:, None] >> torch.arange(8)) & 1
    bits = bits.reshape(-1)[: count * width].reshape(count, width)
    return (bits << torch.arange(width)).sum(dim=1)


@dataclass(frozen=True)
class PackedTensor:
    """A packed tensor: byte buffers, the metadata to unpack them, and the ledger."""

    codes: torch.Tensor
    exponents: torch.Tensor
    dialect_ids: torch.Tensor
    subbook_table: torch.Tensor
    book: Formatbook
    block_shape: tuple[int, ...]  # (..., nb, B) of the codes
    length: int
    pad: int
    id_bits: int
    seda_shape: tuple[int, int] | None  # (C, k) of the sub-formatbook table (SeDA), None without

    @property
    def ledger(self) -> dict[str, int]:
        """Bytes per buffer."""
        return {
            "codes": self.codes.numel(),
            "exponents": self.exponents.numel(),
            "dialect_ids": self.dialect_ids.numel(),
            "subbook_table": self.subbook_table.numel(),
        }

    @property
    def total_bytes(self) -> int:
        return sum(self.ledger.values())

    @property
    def n_elements(self) -> int:
        rows = 1
        for size in self.block_shape[:-2]:
            rows *= size
        return rows * self.length

    @property
    def bits_per_element(self) -> float:
        return 8.0 * self.total_bytes / self.n_elements


def pack(
    q: BlockQuantized, subbooks: torch.Tensor | None = None, row_clusters: torch.Tensor | None = None
) -> PackedTensor:
    """Pack ``q`` into bytes. With SeDA pass ``subbooks`` (C, k) and ``row_clusters`` (rows,): every
    block's dialect must then be in its row's sub-formatbook (else ``ValueError``)."""
    codes = (q.signs.to(torch.int64) << 3) | q.indices.to(torch.int64)
    codes = codes.reshape(-1)
    if codes.numel() % 2:
        codes = torch.nn.functional.pad(codes, (0, 1))
    packed_codes = (codes[0::2] | (codes[1::2] << 4)).to(torch.uint8)
    exponents = (q.exponents.to(torch.int64) + 127).to(torch.uint8).reshape(-1)
    book_bits = q.book.id_bits
    if subbooks is None:
        ids, id_bits, table = q.dialects, book_bits, torch.zeros(0, dtype=torch.uint8)
    else:
        if row_clusters is None:
            raise ValueError("row_clusters is required with subbooks")
        rows = q.dialects.reshape(-1, q.dialects.shape[-1])
        if row_clusters.numel() != rows.shape[0]:
            raise ValueError(f"row_clusters must hold {rows.shape[0]} entries, got {row_clusters.numel()}")
        k = subbooks.shape[1]
        member = subbooks[row_clusters][:, None, :] == rows[..., None]  # (rows, nb, k)
        if not bool(member.any(dim=-1).all()):
            raise ValueError("a block's dialect is outside its cluster's sub-formatbook")
        ids = member.to(torch.int64).argmax(dim=-1)
        id_bits = max(k - 1, 0).bit_length()
        cluster_bits = max(subbooks.shape[0] - 1, 0).bit_length()
        table = torch.cat([pack_bits(subbooks, book_bits), pack_bits(row_clusters, cluster_bits)])
    return PackedTensor(
        codes=packed_codes,
        exponents=exponents,
        dialect_ids=pack_bits(ids, id_bits),
        subbook_table=table,
        book=q.book,
        block_shape=tuple(q.indices.shape),
        length=q.length,
        pad=q.pad,
        id_bits=id_bits,
        seda_shape=None if subbooks is None else (int(subbooks.shape[0]), int(subbooks.shape[1])),
    )


def unpack(p: PackedTensor) -> BlockQuantized:
    """Inverse of :func:`pack` (bit-exact)."""
    n_codes = 1
    for size in p.block_shape:
        n_codes *= size
    n_blocks = n_codes // p.block_shape[-1]
    codes = torch.stack([p.codes & 0xF, p.codes >> 4], dim=1).reshape(-1)[:n_codes].to(torch.int64)
    codes = codes.reshape(p.block_shape)
    exponents = p.exponents.to(torch.int32).reshape(p.block_shape[:-1]) - 127
    ids = unpack_bits(p.dialect_ids, p.id_bits, n_blocks).reshape(p.block_shape[:-1])
    if p.seda_shape is not None:
        n_clusters, k = p.seda_shape
        rows = ids.reshape(-1, p.block_shape[-2])
        table_bytes = (n_clusters * k * p.book.id_bits + 7) // 8
        subbooks = unpack_bits(p.subbook_table[:table_bytes], p.book.id_bits, n_clusters * k)
        cluster_bits = max(n_clusters - 1, 0).bit_length()
        row_clusters = unpack_bits(p.subbook_table[table_bytes:], cluster_bits, rows.shape[0])
        subbooks = subbooks.reshape(n_clusters, k)
        ids = torch.gather(subbooks[row_clusters], 1, rows).reshape(p.block_shape[:-1])
    return BlockQuantized(
        signs=(codes >> 3).bool(),
        indices=(codes & 7).to(torch.uint8),
        exponents=exponents,
        dialects=ids,
        book=p.book,
        length=p.length,
        pad=p.pad,
    )
