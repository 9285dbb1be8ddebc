"""Speed of a DACS epoch against a DANN-GCN epoch on the same CSBM graph (issue #23: <= 1.5x).

For each size (nodes per domain) both trainers run ``--epochs`` full-batch epochs on one thread; DACS
re-estimates stage 2's weights every ``reestimate_every`` epochs after the warm-up, as in training, so its
epoch time includes the re-estimation amortised over the period. The re-estimation (k-means + QP per
layer) is also reported on its own.

    OMP_NUM_THREADS=1 python benchmarks/bench_dacs.py --sizes 1000 3000 10000 30000

``--repeats R`` times each trainer R times (alternating) and keeps the fastest, which on a shared machine
is the one least disturbed by other jobs.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from neurips26.data.graph_shift import make_csbm_pair
from neurips26.methods.dacs import DACSConfig, DACSTrainer
from neurips26.methods.dacs.baselines import GDABaselineTrainer


def measure(n_nodes: int, epochs: int, seed: int = 0, repeats: int = 1) -> dict[str, float]:
    pair = make_csbm_pair(seed=seed, n_nodes=n_nodes, feature_shift=1.0, structure_shift=0.9)
    target = pair.target.clone()
    for key in ("y", "subcluster", "clean_x"):
        del target[key]
    config = DACSConfig(epochs=epochs, warmup_epochs=min(20, epochs // 5), reestimate_every=10)
    # one-off costs (sklearn import, cvxpy's compilation of the QP) are paid once per process, not per epoch
    warm = DACSConfig(epochs=2, warmup_epochs=0, reestimate_every=1)
    DACSTrainer(warm).fit(pair.source, target)
    # the two trainers alternate; each one's fastest repeat is kept (the least disturbed by other load)
    dann = dacs = float("inf")
    reestimation = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        GDABaselineTrainer("dann_gcn", config).fit(pair.source, target)
        dann = min(dann, (time.perf_counter() - start) / epochs)
        start = time.perf_counter()
        trainer = DACSTrainer(config).fit(pair.source, target)
        seconds = time.perf_counter() - start
        if seconds / epochs < dacs:
            dacs, reestimation = seconds / epochs, trainer.reestimation_seconds_
    n_reestimations = len(range(config.warmup_epochs, epochs, config.reestimate_every))
    return {
        "nodes_per_domain": n_nodes,
        "edges_source": int(pair.source.edge_index.shape[1]),
        "dann_gcn_epoch_ms": 1000 * dann,
        "dacs_epoch_ms": 1000 * dacs,
        "ratio": dacs / dann,
        "reestimation_ms": 1000 * reestimation / max(n_reestimations, 1),
        "dacs_epoch_ms_without_reestimation": 1000 * (dacs * epochs - reestimation) / epochs,
        "dacs_us_per_edge": 1e6 * dacs / int(pair.source.edge_index.shape[1]),
        "dann_gcn_us_per_edge": 1e6 * dann / int(pair.source.edge_index.shape[1]),
        "repeats": repeats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000, 30000])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=1, help="timed fits per trainer; the fastest is kept")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(n, args.epochs, repeats=args.repeats) for n in args.sizes]
    header = (
        "nodes/domain  edges(S)  DANN-GCN ms  DACS ms  ratio  re-estimation ms  DACS w/o re-est ms"
        "  DANN us/edge  DACS us/edge"
    )
    print(header)
    for r in rows:
        print(
            f"{r['nodes_per_domain']:>12}  {r['edges_source']:>8}  {r['dann_gcn_epoch_ms']:>11.1f}  "
            f"{r['dacs_epoch_ms']:>7.1f}  {r['ratio']:>5.2f}  {r['reestimation_ms']:>16.1f}  "
            f"{r['dacs_epoch_ms_without_reestimation']:>18.1f}  {r['dann_gcn_us_per_edge']:>12.2f}"
            f"  {r['dacs_us_per_edge']:>12.2f}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
