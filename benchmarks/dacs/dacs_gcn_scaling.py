"""Is the per-edge cost step from 10k to 30k nodes in DACS, or in PyG's GCNConv itself?

Times one ``torch_geometric.nn.GCNConv`` (64 -> 64, the width DACS uses) forward + backward on a random
graph with 10 edges per node, alone, on one thread: the median of 7 runs after 2 warm-ups, per edge, with
the edges in random order and sorted by target node. No DACS, no DANN: if the per-edge time steps up
here too, the step ``benchmarks/dacs/bench_dacs.py`` shows for both trainers is PyG's propagation.

    OMP_NUM_THREADS=1 python benchmarks/dacs/dacs_gcn_scaling.py --sizes 1000 3000 10000 30000 60000
"""

from __future__ import annotations

import argparse
import time

import torch
from torch_geometric.nn import GCNConv


def median_seconds(conv: GCNConv, x: torch.Tensor, edge_index: torch.Tensor, runs: int = 7) -> float:
    """Median wall time of ``conv(x, edge_index).sum().backward()`` over ``runs`` runs (2 warm-ups)."""
    for _ in range(2):
        conv(x, edge_index).sum().backward()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        conv(x, edge_index).sum().backward()
        times.append(time.perf_counter() - start)
    return sorted(times)[runs // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000, 30000, 60000])
    parser.add_argument("--degree", type=int, default=10)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print("nodes   edges    fwd+bwd ms  ns/edge (random order)  ns/edge (sorted by target)")
    for n in args.sizes:
        edges = args.degree * n
        edge_index = torch.randint(0, n, (2, edges))
        x = torch.randn(n, args.width, requires_grad=True)
        conv = GCNConv(args.width, args.width)
        shuffled = median_seconds(conv, x, edge_index)
        ordered = median_seconds(conv, x, edge_index[:, torch.argsort(edge_index[1])])
        print(
            f"{n:>6}  {edges:>7}  {1000 * shuffled:>10.1f}  {1e9 * shuffled / edges:>22.0f}"
            f"  {1e9 * ordered / edges:>26.0f}"
        )


if __name__ == "__main__":
    main()
