"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs -- the algorithm on tensors.

Tiles, asymmetric uniform quantization with a group size inside a tile, bit packing, the bit ledger, the
tile sensitivities (dynamic and static) and the batched greedy allocation. No model glue lives here.

Conventions: a weight ``W`` has shape ``(R, C)`` (out x in). A tile is ``(tr, tc)``; tiles are numbered
row-major over the ``(R // tr, C // tc)`` tile grid. Groups of ``g`` consecutive input channels inside a
tile share one scale (float16) and one integer zero point (stored at the tile's bit-width).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

SCALE_BITS = 16  # float16 scale per group
_MIN_SCALE = 1e-6  # a constant group still gets a finite, representable scale


def check_tiling(
    name: str, shape: tuple[int, int], tile: tuple[int, int], group_size: int, pad: bool = False
) -> None:
    """Raise ValueError unless ``tile`` divides ``shape`` (or ``pad``) and ``group_size`` divides the
    tile's columns."""
    rows, cols = shape
    tile_rows, tile_cols = tile
    if not pad and (rows % tile_rows or cols % tile_cols):
        raise ValueError(
            f"tile={tile} must divide the weight shape {shape} of {name!r}; pick a tile whose rows divide "
            f"{rows} and whose columns divide {cols}, or set pad=True"
        )
    if tile_cols % group_size:
        raise ValueError(f"group_size={group_size} must divide the tile's columns {tile_cols}")


def padded_shape(shape: tuple[int, int], tile: tuple[int, int]) -> tuple[int, int]:
    """The shape rounded up to whole tiles."""
    return (-(-shape[0] // tile[0]) * tile[0], -(-shape[1] // tile[1]) * tile[1])


def pad_to_tiles(x: torch.Tensor, tile: tuple[int, int], zero: bool = False) -> torch.Tensor:
    """Pad ``(R, C)`` up to whole tiles by repeating the last row / column (or with zeros for gradients).

    Repeating edge values keeps every partially padded group's min and max, so the real weights quantize
    exactly as they would without padding.
    """
    rows, cols = padded_shape(tuple(x.shape), tile)
    extra_rows, extra_cols = rows - x.shape[0], cols - x.shape[1]
    if extra_cols:
        edge = torch.zeros_like(x[:, -1:]) if zero else x[:, -1:]
        x = torch.cat([x, edge.expand(-1, extra_cols)], dim=1)
    if extra_rows:
        edge = torch.zeros_like(x[-1:]) if zero else x[-1:]
        x = torch.cat([x, edge.expand(extra_rows, -1)], dim=0)
    return x


def to_tiles(x: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    """``(R, C) -> (n_tiles, tr, tc)`` with tiles in row-major order of the tile grid."""
    tile_rows, tile_cols = tile
    rows, cols = x.shape
    grid = x.reshape(rows // tile_rows, tile_rows, cols // tile_cols, tile_cols).permute(0, 2, 1, 3)
    return grid.reshape(-1, tile_rows, tile_cols)


def from_tiles(tiles: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`to_tiles`."""
    _, tile_rows, tile_cols = tiles.shape
    rows, cols = shape
    grid = tiles.reshape(rows // tile_rows, cols // tile_cols, tile_rows, tile_cols).permute(0, 2, 1, 3)
    return grid.reshape(rows, cols)


def expand_tile_values(per_tile: torch.Tensor, shape: tuple[int, int], tile: tuple[int, int]) -> torch.Tensor:
    """A per-tile value ``(n_tiles,)`` broadcast to every element of the ``(R, C)`` weight."""
    tiles = per_tile.reshape(-1, 1, 1).expand(-1, *tile)
    return from_tiles(tiles, shape)


def quantize_groups(
    weight: torch.Tensor, bits: torch.Tensor, group_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric uniform round-to-nearest per group of ``group_size`` input channels.

    ``qmax = 2^b - 1``, ``s = fp16((max - min) / qmax)``, ``z = clamp(round(-min / s), 0, qmax)``,
    ``q = clamp(round(w / s) + z, 0, qmax)``, and the dequantized weight is ``(q - z) s``.

    Parameters
    ----------
    weight: ``(R, C)`` float weight.
    bits: integer bit-width per element, ``(R, C)`` (constant inside each group), or a scalar.
    group_size: ``g``; must divide ``C``.

    Returns
    -------
    codes ``(R, C)`` int64, scales ``(R, C // g)`` float32 (exactly representable in float16),
    zeros ``(R, C // g)`` int64.
    """
    rows, cols = weight.shape
    groups = weight.float().reshape(rows, cols // group_size, group_size)
    bits = torch.as_tensor(bits).expand(rows, cols).reshape(rows, cols // group_size, group_size)[..., 0]
    qmax = (2.0 ** bits.double()).float() - 1
    low = groups.amin(-1)
    high = groups.amax(-1)
    scales = ((high - low) / qmax).clamp_min(_MIN_SCALE).half().float()
    zeros = torch.minimum(torch.round(-low / scales).clamp_min(0), qmax)
    codes = torch.round(groups / scales[..., None]) + zeros[..., None]
    codes = torch.minimum(codes.clamp_min(0), qmax[..., None])
    return codes.reshape(rows, cols).long(), scales, zeros.long()


def dequantize_groups(codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """``w_hat = (q - z) * s`` with ``z`` and ``s`` repeated over each group's channels."""
    group_size = codes.shape[-1] // scales.shape[-1]
    centred = codes.float() - zeros.float().repeat_interleave(group_size, dim=-1)
    return centred * scales.repeat_interleave(group_size, dim=-1)


def fake_quantize(weight: torch.Tensor, bits: torch.Tensor | int, group_size: int) -> torch.Tensor:
    """Quantize then dequantize (the weight a packed layer computes with)."""
    return dequantize_groups(*quantize_groups(weight, torch.as_tensor(bits), group_size))


def pack_bits(values: torch.Tensor, width: int) -> torch.Tensor:
    """Pack non-negative integers ``< 2**width`` into a little-endian bit stream of uint8 bytes.

    The stream holds ``ceil(len(values) * width / 8)`` bytes; bit ``k`` of value ``i`` sits at stream
    position ``i * width + k``.
    """
    flat = values.reshape(-1).long()
    if width == 0 or flat.numel() == 0:
        return torch.zeros(0, dtype=torch.uint8)
    if int(flat.min()) < 0 or int(flat.max()) >= 2**width:
        raise ValueError(f"values must lie in [0, 2**{width}), got [{int(flat.min())}, {int(flat.max())}]")
    stream = ((flat[:, None] >> torch.arange(width)) & 1).reshape(-1)
    stream = torch.nn.functional.pad(stream, (0, (-stream.numel()) % 8))
    return (stream.reshape(-1, 8) << torch.arange(8)).sum(-1).to(torch.uint8)


def unpack_bits(packed: torch.Tensor, width: int, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: the first ``count`` values as int64."""
    if width == 0 or count == 0:
        return torch.zeros(count, dtype=torch.long)
    stream = ((packed.long()[:, None] >> torch.arange(8)) & 1).reshape(-1)[: count * width]
    return (stream.reshape(count, width) << torch.arange(width)).sum(-1)


def index_bits(n_choices: int) -> int:
    """Bits of one index among ``n_choices`` (0 when there is a single choice)."""
    return math.ceil(math.log2(n_choices)) if n_choices > 1 else 0


@dataclass(frozen=True)
class BitLedger:
    """Every stored bit of one quantized weight, per stream (codes, zeros, scales, tile ids, permutation).

    ``streams`` maps a stream name to its bit count; each stream is stored byte-aligned, so ``nbytes`` is
    the sum of ``ceil(bits / 8)`` and equals the packed buffers' byte size.
    """

    n_weights: int
    streams: dict[str, int] = field(default_factory=dict)

    @property
    def total_bits(self) -> int:
        return sum(self.streams.values())

    @property
    def nbytes(self) -> int:
        return sum(-(-bits // 8) for bits in self.streams.values())

    @property
    def bits_per_weight(self) -> float:
        return self.total_bits / self.n_weights

    def category(self, prefix: str) -> int:
        return sum(bits for name, bits in self.streams.items() if name.startswith(prefix))


def layer_ledger(
    shape: tuple[int, int],
    tile: tuple[int, int],
    group_size: int,
    bit_set: Sequence[int],
    tile_bits: torch.Tensor,
    input_permutation: int = 0,
    output_permutation: int = 0,
    n_weights: int | None = None,
    float_zeros: bool = False,
) -> BitLedger:
    """The exact ledger of one layer stored in the ScaleBITS packed format.

    ``shape`` is the stored (padded) shape; ``n_weights`` the real weight count (default: all of it).
    ``input_permutation`` / ``output_permutation``: the length of a runtime gather index over the input
    columns / output rows (0: none), stored with ``ceil(log2 n)`` bits per entry.
    ``float_zeros`` stores one float16 zero point per group (HQQ's native format) instead of an integer
    zero at the tile's bit-width.
    """
    rows, cols = shape
    tile_elements = tile[0] * tile[1]
    tile_groups = tile[0] * tile[1] // group_size
    streams: dict[str, int] = {}
    for bits in bit_set:
        n_tiles = int((tile_bits == bits).sum())
        streams[f"codes_{bits}"] = n_tiles * tile_elements * bits
        streams[f"zeros_{bits}"] = 0 if float_zeros else n_tiles * tile_groups * bits
    streams["scales"] = SCALE_BITS * rows * cols // group_size
    if float_zeros:
        streams["zeros_fp16"] = SCALE_BITS * rows * cols // group_size
    streams["tile_ids"] = tile_bits.numel() * index_bits(len(bit_set))
    streams["permutation_in"] = input_permutation * index_bits(input_permutation)
    streams["permutation_out"] = output_permutation * index_bits(output_permutation)
    return BitLedger(n_weights if n_weights is not None else rows * cols, streams)


def tile_variable_bits(bits: torch.Tensor, tile: tuple[int, int], group_size: int) -> torch.Tensor:
    """Bits of a tile that depend on its bit-width: codes plus zero points, ``b (tr tc + tr tc / g)``."""
    elements = tile[0] * tile[1]
    return bits * (elements + elements // group_size)


# ----------------------------------------------------------------------------------------------------
# Sensitivity of lowering a tile's bit-width
# ----------------------------------------------------------------------------------------------------


def lower_bits(bit_set: Sequence[int], tile_bits: torch.Tensor) -> torch.Tensor:
    """The next lower bit-width of each tile (itself when it is already at the lowest)."""
    ordered = torch.tensor(sorted(bit_set))
    position = torch.searchsorted(ordered, tile_bits)
    return ordered[(position - 1).clamp_min(0)]


def tile_sum(x: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    """Sum of ``x`` inside each tile: ``(R, C) -> (n_tiles,)``."""
    return to_tiles(x, tile).sum((1, 2))


def dynamic_tile_sensitivity(
    fake: dict[int, torch.Tensor],
    tile_bits: torch.Tensor,
    lowered: torch.Tensor,
    grad: torch.Tensor,
    fisher: torch.Tensor,
    tile: tuple[int, int],
) -> torch.Tensor:
    """Marginal loss change of lowering each tile, Taylor-expanded at the *current quantized* weights.

    ``Delta_B = g_hat^T delta_B + 1/2 delta_B^T diag(F_hat) delta_B`` with
    ``delta_B = Q_{b-1}(W_B) - Q_b(W_B)``, where ``g_hat`` and ``F_hat`` (diagonal empirical Fisher) are
    measured on the current quantized model (ScaleBITS' dynamic sensitivity).
    """
    shape = tuple(grad.shape)
    current = _select_fake(fake, expand_tile_values(tile_bits, shape, tile))
    target = _select_fake(fake, expand_tile_values(lowered, shape, tile))
    delta = target - current
    return tile_sum(grad * delta + 0.5 * fisher * delta**2, tile)


def static_tile_sensitivity(
    weight: torch.Tensor,
    fake: dict[int, torch.Tensor],
    tile_bits: torch.Tensor,
    lowered: torch.Tensor,
    grad: torch.Tensor,
    fisher: torch.Tensor,
    tile: tuple[int, int],
) -> torch.Tensor:
    """The static variant: a quadratic model around the *full-precision* weights (measured once).

    ``Delta_B = g^T (e_{b-1} - e_b) + 1/2 sum F (e_{b-1}^2 - e_b^2)`` with ``e_b = Q_b(W) - W`` and ``g``,
    ``F`` measured at ``W`` (the HAWQ / SliM-LLM style estimate the paper argues against).
    """
    shape = tuple(grad.shape)
    error_now = _select_fake(fake, expand_tile_values(tile_bits, shape, tile)) - weight
    error_low = _select_fake(fake, expand_tile_values(lowered, shape, tile)) - weight
    change = grad * (error_low - error_now) + 0.5 * fisher * (error_low**2 - error_now**2)
    return tile_sum(change, tile)


def _select_fake(fake: dict[int, torch.Tensor], element_bits: torch.Tensor) -> torch.Tensor:
    result = torch.zeros_like(next(iter(fake.values())))
    for bits, values in fake.items():
        result = torch.where(element_bits == bits, values, result)
    return result


def select_fake(
    fake: dict[int, torch.Tensor], tile_bits: torch.Tensor, tile: tuple[int, int]
) -> torch.Tensor:
    """The fake-quantized weight of an allocation, from the per-bit-width fake-quantized copies."""
    shape = tuple(next(iter(fake.values())).shape)
    return _select_fake(fake, expand_tile_values(tile_bits, shape, tile))


# ----------------------------------------------------------------------------------------------------
# Batched greedy allocation
# ----------------------------------------------------------------------------------------------------

SensitivityFunction = Callable[[list[torch.Tensor]], list[torch.Tensor]]


@dataclass
class AllocationTrace:
    """The outcome of one progressive run: an allocation per target and the whole trajectory.

    ``snapshots[target]`` lists each layer's tile bit-widths at ``target`` average bits;
    ``curve`` holds ``(average bits, round)`` after every round (the Pareto path);
    ``rounds`` counts sensitivity refreshes.
    """

    snapshots: dict[float, list[torch.Tensor]]
    curve: list[tuple[float, int]]
    rounds: int
    seconds: float = 0.0
    budget_bits: dict[float, int] = field(default_factory=dict)
    achieved_bits: dict[float, int] = field(default_factory=dict)


def representable_range(
    fixed_bits: int,
    tile_counts: Sequence[int],
    tile: tuple[int, int],
    group_size: int,
    bit_set: Sequence[int],
    n_weights: int,
) -> tuple[float, float]:
    """The lowest and highest average bits (metadata included) an allocation can reach."""
    n_tiles = sum(tile_counts)
    low = fixed_bits + n_tiles * int(tile_variable_bits(torch.tensor(min(bit_set)), tile, group_size))
    high = fixed_bits + n_tiles * int(tile_variable_bits(torch.tensor(max(bit_set)), tile, group_size))
    return low / n_weights, high / n_weights


def batched_greedy(
    tile_counts: Sequence[int],
    bit_set: Sequence[int],
    targets: Sequence[float],
    sensitivity: SensitivityFunction,
    *,
    tile: tuple[int, int],
    group_size: int,
    fixed_bits: int,
    n_weights: int,
    fraction: float,
) -> AllocationTrace:
    """Progressive greedy bit lowering, batched: ScaleBITS' scalable approximation to greedy.

    Every tile starts at the top bit-width. Each round refreshes the sensitivities ``Delta_B`` of lowering
    every tile by one step, then lowers the cheapest ``ceil(fraction * n_tiles)`` tiles by
    ``Delta_B / bits_saved_B`` -- fewer when fewer suffice to reach the next target, so each target is hit
    within one tile's granularity (``budget - one step < used <= budget``). ``fraction -> 0`` (one tile
    per round) is the exact greedy. Targets are visited from high to low, so one run yields all of them.

    ``sensitivity(tile_bits_per_layer) -> Delta per layer`` gives ``(n_tiles,)`` per layer for lowering one
    step (its value for tiles already at the lowest width is ignored).
    """
    import time

    start = time.perf_counter()
    top = max(bit_set)
    allocation = [torch.full((count,), top, dtype=torch.long) for count in tile_counts]
    per_round = max(1, math.ceil(fraction * sum(tile_counts)))
    snapshots: dict[float, list[torch.Tensor]] = {}
    budgets: dict[float, int] = {}
    achieved: dict[float, int] = {}

    def used_bits() -> int:
        return fixed_bits + sum(int(tile_variable_bits(bits, tile, group_size).sum()) for bits in allocation)

    curve = [(used_bits() / n_weights, 0)]
    rounds = 0
    for target in sorted(set(targets), reverse=True):
        budget = math.floor(target * n_weights + 1e-6)
        while used_bits() > budget:
            deltas = torch.cat(sensitivity(allocation))
            current = torch.cat(allocation)
            lowered = lower_bits(bit_set, current)
            saved = tile_variable_bits(current - lowered, tile, group_size).double()
            score = torch.where(saved > 0, deltas.double() / saved.clamp_min(1), torch.inf)
            order = torch.argsort(score, stable=True)
            order = order[torch.isfinite(score[order])]
            if len(order) == 0:  # every tile at the lowest width: the caller validated the range
                raise ValueError(f"avg_bits={target} is below what the bit set {tuple(bit_set)} can reach")
            needed = int(torch.searchsorted(torch.cumsum(saved[order], 0), used_bits() - budget)) + 1
            chosen = order[: min(per_round, needed)]
            current[chosen] = lowered[chosen]
            allocation = list(current.split(list(tile_counts)))
            rounds += 1
            curve.append((used_bits() / n_weights, rounds))
        snapshots[target] = [bits.clone() for bits in allocation]
        budgets[target] = budget
        achieved[target] = used_bits()
    return AllocationTrace(snapshots, curve, rounds, time.perf_counter() - start, budgets, achieved)


def random_allocation(
    tile_counts: Sequence[int],
    bit_set: Sequence[int],
    target: float,
    *,
    tile: tuple[int, int],
    group_size: int,
    fixed_bits: int,
    n_weights: int,
    generator: torch.Generator,
) -> list[torch.Tensor]:
    """Baseline: lower uniformly random tiles one step at a time until the budget is met."""
    scores = lambda allocation: [torch.rand(len(bits), generator=generator) for bits in allocation]  # noqa: E731
    trace = batched_greedy(
        tile_counts,
        bit_set,
        [target],
        scores,
        tile=tile,
        group_size=group_size,
        fixed_bits=fixed_bits,
        n_weights=n_weights,
        fraction=0.05,
    )
    return trace.snapshots[target]


def channel_concentration(sensitivity: torch.Tensor, top: float = 0.1) -> tuple[float, float]:
    """Share of total sensitivity mass in the top ``top`` fraction of output rows and of input columns."""
    total = float(sensitivity.sum()).__abs__() or 1.0
    rows = sensitivity.sum(1).sort(descending=True).values
    cols = sensitivity.sum(0).sort(descending=True).values
    k_rows, k_cols = max(1, int(top * len(rows))), max(1, int(top * len(cols)))
    return float(rows[:k_rows].sum()) / total, float(cols[:k_cols].sum()) / total


def tile_concentration(sensitivity: torch.Tensor, tile: tuple[int, int], top: float = 0.1) -> float:
    """Share of total sensitivity mass held by the top ``top`` fraction of tiles."""
    per_tile = tile_sum(sensitivity, tile).sort(descending=True).values
    k = max(1, int(top * len(per_tile)))
    return float(per_tile[:k].sum()) / (float(per_tile.sum()) or 1.0)


def replace_module(model: torch.nn.Module, fqn: str, new: torch.nn.Module) -> None:
    """Put ``new`` at the dotted path ``fqn`` of ``model`` (the quantized layers replace the linears)."""
    parent_name, _, child = fqn.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, new)
