"""Does POES's gain concentrate where the baselines have headroom? (the paper's qualitative claim)

Per task of the tier-1 simulator: headroom = final accuracy with full evaluation (the most an evaluation
scheduler can give this optimizer) minus that of a fixed random subset; gain = POES minus the random
minibatch. The two differences share no term, so a correlation is not the regression-to-the-mean artefact
that "gain and headroom over the same baseline" would have. Tasks are split into headroom terciles.

Run: ``OMP_NUM_THREADS=1 python benchmarks/poes_headroom.py [n_tasks] [k]`` (default 45 tasks, k = 20;
seeds 20000+, disjoint from the experiment's and the tuning seeds).
"""

from __future__ import annotations

import sys

import numpy as np

from neurips26.methods.poes.experiment import POESExperimentConfig, System


def main(n_tasks: int = 45, k: int = 20) -> None:
    config = POESExperimentConfig(k=k)
    settings = config.settings()
    systems = {
        "poes": System("poes", "poes", config.method),
        "random_minibatch": System("random_minibatch", "random_minibatch"),
        "fixed_random": System("fixed_random", "fixed_random"),
        "full_evaluation": System("full_evaluation", "full"),
    }
    from neurips26.methods.poes.simulator import simulate

    final = {
        name: np.array([simulate(s.factory(k), settings, 20_000 + t).final_accuracy for t in range(n_tasks)])
        for name, s in systems.items()
    }
    headroom = final["full_evaluation"] - final["fixed_random"]
    gain = final["poes"] - final["random_minibatch"]
    order = np.argsort(headroom)
    print(f"{n_tasks} tasks, k = {k}; corr(headroom, gain) = {np.corrcoef(headroom, gain)[0, 1]:.2f}\n")
    print("| headroom tercile | mean headroom | mean POES gain over random minibatch |\n|---|---|---|")
    for name, part in zip(("low", "middle", "high"), np.array_split(order, 3), strict=True):
        print(f"| {name} | {headroom[part].mean():+.3f} | {gain[part].mean():+.3f} |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
