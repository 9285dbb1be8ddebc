"""Cost of one SAMHybrid step versus one ERM (Adam) step on the experiment's hybrid model.

Run: ``python benchmarks/bench_samhybrid.py``. SAM needs two forward/backward passes, so the target is a
ratio of about 2 and no more.
"""

from __future__ import annotations

import time

import torch

from neurips26.data.dynamics import get_system, make_splits
from neurips26.methods.samhybrid import SAMHybridConfig, fit_hybrid
from neurips26.methods.samhybrid.baselines import make_optimizer
from neurips26.methods.samhybrid.experiment import RECIPES, build_model

REPEATS = 5


def seconds_per_step(kind: str, config: SAMHybridConfig, iterations: int = 100) -> float:
    system = get_system(config.ode_system)
    data = make_splits(system, config.n_train, config.n_test, config.noise_std, seed=0)
    best = float("inf")
    for repeat in range(REPEATS):
        model = build_model(RECIPES["erm"], config, seed=repeat)
        optimizer = make_optimizer(kind, model, config.lr, config.rho, config.rho_asam, config.l2_weight)
        start = time.perf_counter()
        fit_hybrid(
            model,
            data.train,
            data.times,
            optimizer,
            iterations,
            substeps=config.substeps,
            window=config.window,
        )
        best = min(best, (time.perf_counter() - start) / iterations)
    return best


def main() -> None:
    torch.set_num_threads(1)
    for shape in ("additive", "non_additive"):
        config = SAMHybridConfig(shape=shape)
        erm = seconds_per_step("adam", config)
        print(f"{shape:14s} ERM {erm * 1e3:6.2f} ms/step", end="")
        for kind in ("sam_ml", "sam_all", "asam_ml"):
            cost = seconds_per_step(kind, config)
            print(f" | {kind} {cost * 1e3:6.2f} ms ({cost / erm:.2f}x)", end="")
        print()


if __name__ == "__main__":
    main()
