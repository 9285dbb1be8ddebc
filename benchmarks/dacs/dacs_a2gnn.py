"""A2GNN against DANN-GCN (and source-only) on the DACS experiment's cells, seed by seed.

Runs the experiment's own cell (``neurips26.methods.dacs.experiment.run``: same data, network, epochs and
target-validation checkpoint selection as every published DACS result) for each system, setting and seed
of a profile's config, and prints each system's target accuracy per seed, its mean, and A2GNN minus
DANN-GCN paired by seed. Nothing is saved or published.

    OMP_NUM_THREADS=1 python benchmarks/dacs/dacs_a2gnn.py --profile default --seeds 0 1 2 3 4 \
        --settings fs fcss coupled coupled_score
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

SYSTEMS = ("source_only", "dann_gcn", "a2gnn")


def main() -> None:
    from neurips26.bench.experiment import SilentProgress
    from neurips26.methods.dacs.experiment import EXPERIMENT, run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default", help="whose overrides (nodes, epochs) to use")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--settings", nargs="+", default=["fs", "fcss", "coupled", "coupled_score"])
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=sorted(EXPERIMENT.systems))
    args = parser.parse_args()
    torch.set_num_threads(1)
    profile = EXPERIMENT.profiles[args.profile]
    print(f"profile {args.profile} overrides {profile.overrides}; seeds {args.seeds}")
    print("| setting | system | target accuracy per seed | mean | s |")
    print("|---|---|---|---|---|")
    for setting in args.settings:
        config = EXPERIMENT.config_for(profile, {"setting": setting}, {})
        scores: dict[str, np.ndarray] = {}
        for name in args.systems:
            start = time.perf_counter()
            system = EXPERIMENT.build_system(name, config)
            cells = [run(system, config, profile, seed, SilentProgress()) for seed in args.seeds]
            scores[name] = np.array([cell["target_accuracy"] for cell in cells])
            per_seed = " ".join(f"{value:.3f}" for value in scores[name])
            seconds = time.perf_counter() - start
            mean = scores[name].mean()
            print(f"| {setting} | {name} | {per_seed} | {mean:.3f} | {seconds:.0f} |", flush=True)
        if "a2gnn" in scores and "dann_gcn" in scores:
            gap = scores["a2gnn"] - scores["dann_gcn"]
            per_seed = " ".join(f"{d:+.3f}" for d in gap)
            print(f"| {setting} | a2gnn - dann_gcn | {per_seed} | {gap.mean():+.3f} | |")


if __name__ == "__main__":
    main()
