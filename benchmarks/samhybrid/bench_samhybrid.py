"""Cost of one SAMHybrid step versus one ERM (Adam) step on the experiment's hybrid model.

Run: ``python benchmarks/samhybrid/bench_samhybrid.py``. SAM needs two forward/backward passes, so the \
    target is a
ratio of about 2 and no more.
"""

from __future__ import annotations

import torch

from neurips26.methods.samhybrid.dynamics import get_system, make_splits
from neurips26.methods.samhybrid.experiment import EXPERIMENT, SAMHybridExperimentConfig, train_system

REPEATS = 5
ITERATIONS = 100


def seconds_per_step(system_name: str, config: SAMHybridExperimentConfig) -> float:
    """Best of ``REPEATS`` trainings of ``ITERATIONS`` steps, per step."""
    data = make_splits(get_system(config.ode_system), config.n_train, config.n_test, config.noise_std, seed=0)
    times = [
        train_system(EXPERIMENT.build_system(system_name, config), config, seed, data.train, data.times)[1]
        for seed in range(REPEATS)
    ]
    return min(times) / config.iterations


def main() -> None:
    torch.set_num_threads(1)
    for shape in ("additive", "non_additive"):
        config = SAMHybridExperimentConfig(shape=shape, iterations=ITERATIONS)
        erm = seconds_per_step("erm", config)
        print(f"{shape:14s} ERM {erm * 1e3:6.2f} ms/step", end="")
        for name in ("sam_ml", "sam_all", "asam_ml"):
            cost = seconds_per_step(name, config)
            print(f" | {name} {cost * 1e3:6.2f} ms ({cost / erm:.2f}x)", end="")
        print()


if __name__ == "__main__":
    main()
