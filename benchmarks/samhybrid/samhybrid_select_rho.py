"""Choose SAMHybrid's default rho without the true theta: lowest validation MSE on held-out seeds.

Run: ``python benchmarks/samhybrid/samhybrid_select_rho.py`` (about a minute on 2 cores). Seeds 100-101 \
    are disjoint
from the experiment's seeds 0-4, and the criterion sees validation trajectories only.
"""

from __future__ import annotations

import warnings

import torch

from neurips26.methods.samhybrid import HybridModel, SAMHybrid, identifiability_report
from neurips26.methods.samhybrid.dynamics import get_system, make_splits
from neurips26.methods.samhybrid.experiment import SAMHybridExperimentConfig
from neurips26.methods.samhybrid.integration import ml_io_sizes
from neurips26.methods.samhybrid.physics import build_physics
from neurips26.zoo.builders import tiny_mlp

RHOS = (0.05, 0.1, 0.2, 0.5)
SEEDS = (100, 101)


def main() -> None:
    torch.set_num_threads(1)
    config = SAMHybridExperimentConfig()
    system = get_system(config.ode_system)
    data = make_splits(system, config.n_train, config.n_test, config.noise_std, seed=100)
    ml_in, ml_out = ml_io_sizes(config.shape, system.state_dim)

    def build(rho: float, seed: int):
        model = HybridModel(
            build_physics(config.ode_system), tiny_mlp(ml_in, ml_out, config.hidden, 3, seed), config.shape
        )
        return model, SAMHybrid(model.param_groups(), torch.optim.Adam, rho=rho, lr=config.lr)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = identifiability_report(
            build,
            data.train,
            data.validation,
            data.times,
            RHOS,
            SEEDS,
            config.iterations,
            substeps=config.substeps,
            window=config.window,
        )
    print(report.summary())


if __name__ == "__main__":
    main()
