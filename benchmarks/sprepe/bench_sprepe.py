"""SpRePE: Spherical Reflection Position Embedding -- overhead vs RoPE and memory vs a geodesic bias.

For N = 256, 1024, 4096 tokens at random positions on the sphere and head_dim 64, this times

* applying SpRePE ('sh', degree 3: 4 blocks of 16; 'xyz': 16 blocks of 4) to q and k,
* applying RoPE to q and k (rotary-embedding-torch's ``apply_rotary_emb``, the anchor's own kernel),
  both with their per-position tables precomputed (reflectors u / rotation angles) -- the steady state of
  a model whose token grid is fixed -- and from raw positions (table computation included);
* one SDPA attention call with SpRePE-encoded q, k versus one with the geodesic bias as ``attn_mask``,

and reports the extra tensors each position embedding materialises: SpRePE's reflectors are O(N d),
the bias is O(H N^2). Run: ``OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/sprepe/bench_sprepe.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

from neurips26.methods.sprepe import AxialRoPE, GeodesicBiasPE, SpRePE
from neurips26.methods.sprepe.core import apply_householder


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def random_xyz(n: int, generator: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(n, 3, generator=generator), dim=-1)


def bench_tokens(n: int, batch: int, heads: int, head_dim: int, repeats: int) -> dict[str, float]:
    generator = torch.Generator().manual_seed(n)
    q = torch.randn(batch, heads, n, head_dim, generator=generator)
    k = torch.randn(batch, heads, n, head_dim, generator=generator)
    v = torch.randn(batch, heads, n, head_dim, generator=generator)
    xyz = random_xyz(n, generator)
    sprepe_sh, sprepe_xyz = SpRePE(head_dim, "sh", degree=3), SpRePE(head_dim, "xyz")
    rope = RotaryEmbedding(dim=head_dim)
    axial = AxialRoPE(head_dim)
    bias_pe = GeodesicBiasPE(heads * head_dim, heads)
    row: dict[str, float] = {"tokens": n}
    with torch.no_grad():
        u_sh, u_xyz = sprepe_sh.reflectors(xyz), sprepe_xyz.reflectors(xyz)
        freqs = rope(torch.arange(n, dtype=torch.float32))  # (N, head_dim) angles, the usual cached table
        cases = {
            "rope_table_ms": lambda: (apply_rotary_emb(freqs, q), apply_rotary_emb(freqs, k)),
            "sprepe_sh_table_ms": lambda: (apply_householder(q, u_sh), apply_householder(k, u_sh)),
            "sprepe_xyz_table_ms": lambda: (apply_householder(q, u_xyz), apply_householder(k, u_xyz)),
            "axial_rope_positions_ms": lambda: (axial.encode(q, xyz), axial.encode(k, xyz)),
            "sprepe_sh_positions_ms": lambda: sprepe_sh.encode_qk(q, k, xyz=xyz),
            "sprepe_xyz_positions_ms": lambda: sprepe_xyz.encode_qk(q, k, xyz=xyz),
        }
        for name, fn in cases.items():
            row[name] = 1e3 * median_seconds(fn, repeats)
        q_enc, k_enc = sprepe_sh.encode_qk(q, k, xyz=xyz)
        row["sdpa_sprepe_ms"] = 1e3 * median_seconds(
            lambda: F.scaled_dot_product_attention(*sprepe_sh.encode_qk(q, k, xyz=xyz), v),
            max(3, repeats // 3),
        )
        row["sdpa_geodesic_bias_ms"] = 1e3 * median_seconds(
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias_pe.attention_bias(xyz, xyz)),
            max(3, repeats // 3),
        )
        bias = bias_pe.attention_bias(xyz, xyz)
        row["sprepe_extra_mb"] = u_sh.numel() * u_sh.element_size() / 2**20
        row["geodesic_bias_extra_mb"] = bias.numel() * bias.element_size() / 2**20
        del q_enc, k_enc, bias
    row["sh_over_rope"] = row["sprepe_sh_table_ms"] / row["rope_table_ms"]
    row["xyz_over_rope"] = row["sprepe_xyz_table_ms"] / row["rope_table_ms"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=str, default="", help="also write the rows to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [bench_tokens(n, args.batch, args.heads, args.head_dim, args.repeats) for n in args.tokens]
    columns = list(rows[0])
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(f"{row[c]:.3g}" for c in columns))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
