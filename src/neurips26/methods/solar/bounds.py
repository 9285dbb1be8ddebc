"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the analytical backend (multi-fidelity bounds).

With ``C = Σ_dtype 2·MACs_dtype / peak_dtype`` (tensor MACs only; other FLOPs are memory-bound and left
out, as in SOLAR, which keeps every bound a lower bound) and ``BW`` the DRAM bandwidth:

* ``flop_only   = C``
* ``fused       = max(C, Q_compulsory / BW)`` — only program inputs, weights (read once) and outputs move.
* ``cache_aware = max(C, max(Q_compulsory, Q_HK) / BW)`` with the Irony–Toledo–Tiskin form for every
  matmul-like contraction together, ``Q_HK = w·(Σ MACs / (2√2·√S) − S)`` words of ``w`` bytes for an
  on-chip capacity of ``S`` words. Segments of ``S`` transfers hold at most ``2S`` words per operand role,
  and Loomis–Whitney plus Cauchy–Schwarz bound the MACs of *all* contractions in a segment by
  ``(2S)^{3/2}``, so the aggregate form is valid; it is never below compulsory traffic.
* ``unfused     = Σ_op max(C_op, bytes_op / BW)`` — every op round-trips DRAM: a bound only for
  implementations that run each op as its own kernel (caches can still beat it).
* ``target``   — attainable within a searched single-level tiling mapspace (tile sizes x three
  stationarities per matmul-like contraction, footprint ≤ S); a *target*, not a bound.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neurips26.methods.solar.hardware import HardwareSpec
from neurips26.methods.solar.ir import EinsumNode, IRGraph, dtype_bytes

FIDELITIES = ("flop_only", "fused", "cache_aware", "unfused")


def compute_seconds(macs: Mapping[str, int], hw: HardwareSpec) -> float:
    """``Σ_dtype 2·MACs / peak_flops[dtype]``."""
    return sum(2.0 * n / hw.flops_rate(d) for d, n in macs.items() if n)


def matmul_like_nodes(graph: IRGraph) -> list[EinsumNode]:
    return [n for n in graph.nodes if isinstance(n, EinsumNode) and n.is_matmul_like()]


def _node_itemsize(graph: IRGraph, node: EinsumNode) -> int:
    names = [*node.inputs, node.output]
    return min(dtype_bytes(graph.values[n].dtype) if n in graph.values else 4 for n in names)


def hong_kung_bytes(graph: IRGraph, hw: HardwareSpec) -> int:
    """Aggregate Irony–Toledo–Tiskin traffic lower bound (bytes) over the matmul-like contractions."""
    nodes = matmul_like_nodes(graph)
    if not nodes:
        return 0
    itemsize = min(_node_itemsize(graph, n) for n in nodes)
    s_words = hw.onchip_bytes / itemsize
    macs = sum(n.points() for n in nodes)
    words = macs / (2.0 * math.sqrt(2.0) * math.sqrt(s_words)) - s_words
    return max(0, int(words * itemsize))


def _tile_candidates(extent: int) -> list[int]:
    out = {extent}
    t = 1
    while t < extent:
        out.add(t)
        t *= 2
    return sorted(out)


@dataclass(frozen=True)
class Tiling:
    """The best single-level tiling found for one matmul-like contraction."""

    node: str
    tile: tuple[int, int, int]
    stationary: str
    traffic_bytes: int
    compulsory_bytes: int


def best_tiling(node: EinsumNode, itemsize: int, onchip_bytes: int) -> Tiling:
    """Search tile sizes ``(tm, tn, tk)`` and the C/A/B-stationary loop orders for the least DRAM traffic.

    Traffic (words) for ``M x N x K`` with batch ``Bt`` and guard density ``f`` (points / box):
    C-stationary ``MK⌈N/tn⌉ + KN⌈M/tm⌉ + MN``; A-stationary ``MK + KN⌈M/tm⌉ + MN(2⌈K/tk⌉-1)``;
    B-stationary symmetric. Footprint ``tm·tk + tk·tn + tm·tn ≤ S``.
    """
    a_set = {a.ranks[0] for a in node.operands[0].index}
    b_set = {a.ranks[0] for a in node.operands[1].index}
    c_set = {r for group in node.out_ranks for r in group}
    dims = {"batch": 1, "m": 1, "n": 1, "k": 1}
    for r, e in node.ranks.items():
        key = (
            "batch"
            if r in a_set and r in b_set and r in c_set
            else "m"
            if r in a_set and r in c_set
            else "n"
            if r in b_set and r in c_set
            else "k"
        )
        dims[key] *= e
    m, n, k, bt = dims["m"], dims["n"], dims["k"], dims["batch"]
    density = node.points() / max(1, m * n * k * bt)
    s_words = onchip_bytes // itemsize
    compulsory = (m * k + k * n + m * n) * bt
    best = search_tiling(m, n, k, s_words)
    words = best[0] if math.isfinite(best[0]) else float(compulsory)
    traffic = max(compulsory, words) * bt * max(density, 0.0) if density < 1 else max(compulsory, words) * bt
    return Tiling(node.name, best[1], best[2], int(traffic * itemsize), int(compulsory * bt * itemsize))


@functools.lru_cache(maxsize=4096)
def search_tiling(m: int, n: int, k: int, s_words: int) -> tuple[float, tuple[int, int, int], str]:
    """Least words over the tile grid and the C/A/B orders: ``(words, (tm, tn, tk), order)``, ``inf`` words
    when no tile fits. Vectorised over the grid; ties go to the first candidate in ``(tm, tn, tk, C/A/B)``
    order. Cached: a model repeats its layers' shapes (GPT-2 small: 73 contractions, 6 shapes)."""
    tm, tn, tk = (np.array(_tile_candidates(e), dtype=np.int64) for e in (m, n, k))
    if max(m * k, k * n, m * n) * 2 * max(m, n, k) >= 2**62:  # int64 could overflow: exact Python ints
        return _search_tiling_loop(m, n, k, s_words)
    tm, tn, tk = tm[:, None, None], tn[None, :, None], tk[None, None, :]
    fits = tm * tk + tk * tn + tm * tn <= s_words
    up_m, up_n, up_k = -(-m // tm), -(-n // tn), -(-k // tk)  # ceil divisions
    options = np.stack(
        np.broadcast_arrays(
            m * k * up_n + k * n * up_m + m * n,  # C-stationary
            m * k + k * n * up_m + m * n * (2 * up_k - 1),  # A-stationary
            k * n + m * k * up_n + m * n * (2 * up_k - 1),  # B-stationary
        ),
        axis=-1,
    )
    if not fits.any():
        return (math.inf, (m, n, k), "C")
    options = np.where(fits[..., None], options, np.iinfo(np.int64).max)
    i, j, l, o = np.unravel_index(int(np.argmin(options)), options.shape)
    tile = (int(tm[i, 0, 0]), int(tn[0, j, 0]), int(tk[0, 0, l]))
    return (int(options[i, j, l, o]), tile, "CAB"[o])


def _search_tiling_loop(m: int, n: int, k: int, s_words: int) -> tuple[float, tuple[int, int, int], str]:
    best: tuple[float, tuple[int, int, int], str] = (math.inf, (m, n, k), "C")
    for tm in _tile_candidates(m):
        for tn in _tile_candidates(n):
            for tk in _tile_candidates(k):
                if tm * tk + tk * tn + tm * tn > s_words:
                    continue
                options = {
                    "C": m * k * math.ceil(n / tn) + k * n * math.ceil(m / tm) + m * n,
                    "A": m * k + k * n * math.ceil(m / tm) + m * n * (2 * math.ceil(k / tk) - 1),
                    "B": k * n + m * k * math.ceil(n / tn) + m * n * (2 * math.ceil(k / tk) - 1),
                }
                for order, words in options.items():
                    if words < best[0]:
                        best = (words, (tm, tn, tk), order)
    return best


def target_bytes(graph: IRGraph, compulsory: int, hw: HardwareSpec) -> tuple[int, list[Tiling]]:
    """Compulsory traffic plus the extra traffic the best found tilings need beyond their operands."""
    tilings = [best_tiling(n, _node_itemsize(graph, n), hw.onchip_bytes) for n in matmul_like_nodes(graph)]
    extra = sum(max(0, t.traffic_bytes - t.compulsory_bytes) for t in tilings)
    return compulsory + extra, tilings


@dataclass(frozen=True)
class Bounds:
    """Seconds per fidelity plus the byte counts behind them."""

    flop_only: float
    fused: float
    cache_aware: float
    unfused: float
    target: float
    compulsory_bytes: int
    cache_aware_bytes: int
    unfused_bytes: int
    target_bytes: int

    def as_dict(self) -> dict[str, float]:
        return {
            "flop_only": self.flop_only,
            "fused": self.fused,
            "cache_aware": self.cache_aware,
            "unfused": self.unfused,
            "target": self.target,
        }


def compute_bounds(
    ops: Sequence[object],
    graph: IRGraph,
    compulsory: int,
    hw: HardwareSpec,
) -> tuple[Bounds, list[Tiling]]:
    """All fidelities for one traced program on ``hw`` (``ops`` are ``OpRecord``-like)."""
    macs: dict[str, int] = {}
    for op in ops:
        for d, n in op.macs.items():  # type: ignore[attr-defined]
            macs[d] = macs.get(d, 0) + n
    c_total = compute_seconds(macs, hw)
    bw = hw.dram_bandwidth_Bps
    unfused = sum(max(compute_seconds(op.macs, hw), op.bytes / bw) for op in ops)  # type: ignore[attr-defined]
    unfused_bytes = sum(op.bytes for op in ops)  # type: ignore[attr-defined]
    hk = hong_kung_bytes(graph, hw)
    cache_bytes = max(compulsory, hk)
    tgt_bytes, tilings = target_bytes(graph, compulsory, hw)
    tgt_bytes = max(tgt_bytes, cache_bytes)
    bounds = Bounds(
        flop_only=c_total,
        fused=max(c_total, compulsory / bw),
        cache_aware=max(c_total, cache_bytes / bw),
        unfused=unfused,
        target=max(c_total, tgt_bytes / bw),
        compulsory_bytes=int(compulsory),
        cache_aware_bytes=int(cache_bytes),
        unfused_bytes=int(unfused_bytes),
        target_bytes=int(tgt_bytes),
    )
    return bounds, tilings


def total_macs(ops: Iterable[object]) -> dict[str, int]:
    macs: dict[str, int] = {}
    for op in ops:
        for d, n in op.macs.items():  # type: ignore[attr-defined]
            macs[d] = macs.get(d, 0) + n
    return macs


def total_conventional_macs(ops: Iterable[object]) -> dict[str, int]:
    """MACs by dtype as FlopCounterMode/fvcore count them (padded taps, masked attention included)."""
    macs: dict[str, int] = {}
    for op in ops:
        for d, n in op.conventional_macs.items():  # type: ignore[attr-defined]
            macs[d] = macs.get(d, 0) + n
    return macs
