"""SP-CACW's packaged Flower App on the Simulation Engine (Ray), compared with the in-process engine.

Runs :func:`neurips26.methods.spcacw.flower_app.simulate` on a federation (default: Fashion-MNIST, 20
clients, Dirichlet(0.1), 5 rounds; needs ``apt-get install dataset-fashion-mnist``), then
:func:`~neurips26.methods.spcacw.flower_app.engine_reference` with the same run config, and prints both
weight tables, the largest absolute differences and the wall times. Exit status 0 when they agree (weights
within 1e-5, model within 1e-4, as ``spcacw_loopback.py``), 1 otherwise.

Run: ``.venv/bin/python benchmarks/spcacw/spcacw_simulation.py [--federation fmnist] [--clients 20]
[--dirichlet 0.1] [--rounds 5] [--data-seed 0] [--num-cpus 2]``. Needs the ``flower`` extra.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from spcacw_loopback import compare  # this folder (the script's own) is first on sys.path


def main(argv: list[str] | None = None) -> int:
    """Run the simulation and the engine; print both weight tables, the differences and the wall times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--federation", default="fmnist", choices=("digits", "fmnist"))
    parser.add_argument("--clients", type=int, default=20, help="clients = SuperNodes (default 20)")
    parser.add_argument("--dirichlet", type=float, default=0.1, help="label-skew alpha (default 0.1)")
    parser.add_argument("--rounds", type=int, default=5, help="server rounds (default 5)")
    parser.add_argument("--data-seed", type=int, default=0, help="the federation's partition seed")
    parser.add_argument("--num-cpus", type=int, default=2, help="Ray's cores, one per ClientApp (default 2)")
    args = parser.parse_args(argv)
    from neurips26.methods.spcacw.flower_app import engine_reference, simulate

    run = {"federation": args.federation, "n-clients": args.clients, "dirichlet": args.dirichlet,
           "num-server-rounds": args.rounds, "data-seed": args.data_seed}  # fmt: skip
    start = time.perf_counter()
    flower = simulate(run, num_cpus=args.num_cpus)
    flower_wall = time.perf_counter() - start
    start = time.perf_counter()
    engine = engine_reference(run)
    engine_wall = time.perf_counter() - start
    d_alpha, d_theta = compare(flower, engine)
    np.set_printoptions(precision=3, suppress=True, linewidth=160)
    print(f"run config: {run}")
    print(f"run_simulation: {flower_wall:.1f} s wall ({args.num_cpus} Ray cores); in-process engine: "
          f"{engine_wall:.1f} s (federation build included)")  # fmt: skip
    print("weights per round (Flower):\n", np.asarray(flower["alpha"]))
    print("weights per round (in-process engine):\n", np.asarray(engine["alpha"]))
    print("better off alone (Flower, engine):", flower["better_off_alone"], engine["better_off_alone"])
    size = len(engine["theta"])
    print(f"max |alpha diff| = {d_alpha:.2e}, max |theta diff| = {d_theta:.2e} ({size} parameters)")
    ok = d_alpha <= 1e-5 and d_theta <= 1e-4 and flower["better_off_alone"] == engine["better_off_alone"]
    print("AGREE" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
