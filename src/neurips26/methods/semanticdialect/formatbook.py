"""Formatbooks: sets of 4-bit *dialects* (BlockDialect, Jang & Tambe, ICML 2025; SemanticDialect, 2026).

A dialect is 8 non-negative magnitudes on a 0.5 grid in [0, 7.5]; a 4-bit code is a sign bit and a 3-bit
index into the block's dialect. A block of 32 values shares a power-of-two exponent (E8M0, as MX) and a
dialect id. BlockDialect's DialectFP4 book has 16 dialects that all hold {0, 0.5, 1, 1.5, 2, 3} and differ
in their two largest magnitudes (table from BlockDialect, Fig. 4, as read in research note §4.1); the last
one is {0, 0.5, 1, 1.5, 2, 2.5, 3, 4}. MXFP4's E2M1 element set {0, 0.5, 1, 1.5, 2, 3, 4, 6} is a
one-dialect book.

Larger books (32, 64, 128; SemanticDialect scales the book up with LUTs) are **ours**: the 16 DialectFP4
dialects first, then dialects {0, 0.5, 1, 1.5, 2, a, b, c} (2.5 <= a < b < c <= 7.5 on the 0.5 grid) added
greedily, each time the candidate farthest (L1 on (a, b, c)) from every dialect already in the book
(ties: lexicographic), so the book spreads its top magnitudes evenly.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["DIALECT_FP4", "E2M1", "GRID_STEP", "MAX_MAGNITUDE", "Formatbook"]

GRID_STEP = 0.5
MAX_MAGNITUDE = 7.5
LEVELS = 8  # magnitudes per dialect: a 3-bit index plus a sign bit = a 4-bit code

_SHARED = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
_TOP_PAIRS = (
    (5.5, 7.5),
    (4.5, 7.5),
    (5.5, 7.0),
    (4.5, 7.0),
    (5.0, 6.5),
    (4.0, 6.5),
    (5.0, 6.0),
    (4.0, 6.0),
    (4.5, 5.5),
    (3.5, 5.5),
    (4.5, 5.0),
    (3.5, 5.0),
    (4.0, 4.5),
    (3.5, 4.5),
    (3.5, 4.0),
)
# BlockDialect's DialectFP4 formatbook (16 dialects); research note §4.1, from BlockDialect Fig. 4.
DIALECT_FP4: tuple[tuple[float, ...], ...] = (
    *(_SHARED + pair for pair in _TOP_PAIRS),
    (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0),
)
# OCP MX v1.0 FP4 (E2M1) magnitudes.
E2M1: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _validate_dialect(index: int, dialect: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(v) for v in dialect)
    if len(values) != LEVELS:
        raise ValueError(f"dialects[{index}] must hold {LEVELS} magnitudes (3-bit index), got {len(values)}")
    for v in values:
        if not (0.0 <= v <= MAX_MAGNITUDE) or (v / GRID_STEP) != round(v / GRID_STEP):
            raise ValueError(
                f"dialects[{index}] value {v} is off the grid: magnitudes must be multiples of "
                f"{GRID_STEP} in [0, {MAX_MAGNITUDE}]"
            )
    if len(set(values)) != LEVELS:
        raise ValueError(f"dialects[{index}] has duplicated magnitudes: {values}")
    if 0.0 not in values:
        raise ValueError(f"dialects[{index}] must contain 0 (zeros and padding must be exact): {values}")
    return tuple(sorted(values))


def _extension_candidates() -> list[tuple[float, ...]]:
    tops = [2.5 + GRID_STEP * i for i in range(int((MAX_MAGNITUDE - 2.5) / GRID_STEP) + 1)]
    return [(0.0, 0.5, 1.0, 1.5, 2.0, *abc) for abc in itertools.combinations(tops, 3)]


@dataclass(frozen=True)
class Formatbook:
    """A set of dialects (each 8 magnitudes on the 0.5 grid in [0, 7.5], sorted, holding 0).

    Parameters
    ----------
    dialects : sequence of sequences of float
        The dialects; magnitudes off the grid, duplicated magnitudes or duplicated dialects raise
        ``ValueError`` naming ``dialects``.
    name : str
        A label for reports.

    Attributes
    ----------
    magnitudes : torch.Tensor
        (|F|, 8) float32, sorted ascending per dialect.
    """

    dialects: tuple[tuple[float, ...], ...]
    name: str = "custom"
    magnitudes: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.dialects) == 0:
            raise ValueError("dialects must hold at least one dialect")
        checked = tuple(_validate_dialect(i, d) for i, d in enumerate(self.dialects))
        if len(set(checked)) != len(checked):
            seen: set[tuple[float, ...]] = set()
            duplicate = next(d for d in checked if d in seen or seen.add(d))  # type: ignore[func-returns-value]
            raise ValueError(f"dialects holds the same dialect twice: {duplicate}")
        object.__setattr__(self, "dialects", checked)
        object.__setattr__(self, "magnitudes", torch.tensor(checked, dtype=torch.float32))

    def __len__(self) -> int:
        return len(self.dialects)

    @property
    def id_bits(self) -> int:
        """Bits of a dialect id: ceil(log2 |F|) (0 for a one-dialect book such as MXFP4)."""
        return max(len(self) - 1, 0).bit_length()

    @classmethod
    def dialect_fp4(cls) -> Formatbook:
        """BlockDialect's 16-dialect DialectFP4 book."""
        return cls(DIALECT_FP4, name="DialectFP4-16")

    @classmethod
    def mxfp4(cls) -> Formatbook:
        """MXFP4 as a one-dialect book (E2M1 magnitudes)."""
        return cls((E2M1,), name="E2M1")

    @classmethod
    def extended(cls, size: int) -> Formatbook:
        """DialectFP4 grown to ``size`` dialects by farthest-point selection (ours; see module doc)."""
        candidates = _extension_candidates()
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= len(candidates):
            raise ValueError(f"size must be an integer in [1, {len(candidates)}], got {size!r}")
        if size <= len(DIALECT_FP4):
            return cls(DIALECT_FP4[:size], name=f"DialectFP4-{size}")
        chosen = list(DIALECT_FP4)
        top = torch.tensor([c[5:] for c in candidates])
        in_book = torch.tensor([c in chosen for c in candidates])
        distance = torch.cdist(top, torch.tensor([c[5:] for c in chosen]), p=1).min(dim=1).values
        while len(chosen) < size:
            distance = torch.where(in_book, torch.tensor(-1.0), distance)
            best = int(torch.argmax(distance))  # first maximum = lexicographic tie-break
            chosen.append(candidates[best])
            in_book[best] = True
            distance = torch.minimum(distance, (top - top[best]).abs().sum(dim=1))
        return cls(tuple(chosen), name=f"SemanticDialect-{size}")
