"""STAR speed: scoring time versus the bare backbone on the same windows, linearity in series length,
trainable-parameter share, fine-tuning time.

    OMP_NUM_THREADS=1 python benchmarks/star/bench_star.py            # 10k / 50k / 200k steps
    OMP_NUM_THREADS=1 python benchmarks/star/bench_star.py --lengths 10000 --repeats 1

The issue's targets: scoring <= 1.5x the bare backbone; trainables <= 10% of the backbone; cost linear in
length; fine-tuning <= 2 minutes per run on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from neurips26.methods.star import STARDetector
from neurips26.methods.star.baselines import BackboneDetector
from neurips26.methods.star.integration import n_trainable, parameter_ratio
from neurips26.methods.star.plant_sim import STATE_VOCABULARIES as VOCAB
from neurips26.methods.star.plant_sim import PlantSimConfig, _run_plant
from neurips26.methods.star.tsfm import load_tiny_tsfm


def best_of_interleaved(fns, repeats: int) -> list[float]:
    """The best of ``repeats`` timings of each function, run in turn (a, b, a, b, ...) so that a slow
    spell of a shared machine hits both sides rather than one."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [min(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-steps", type=int, default=300, help="fine-tuning steps (the detector default)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    schema = {8 + i: v for i, v in enumerate(VOCAB.values())}
    rng = np.random.default_rng(0)
    train = _run_plant(8000, PlantSimConfig.steps_per_day, 0.02, rng)
    backbone = load_tiny_tsfm()
    start = time.perf_counter()
    star = STARDetector(schema, backbone, n_steps=args.n_steps).fit(train)
    fit_seconds = time.perf_counter() - start
    bare = BackboneDetector(schema, backbone, state_handling="drop", adapter="none", n_steps=0).fit(train)
    report = {
        "fit_seconds": fit_seconds,
        "fit_steps": args.n_steps,
        "trainable_params": n_trainable(star),
        "trainable_share_of_backbone": parameter_ratio(star),
        "scoring": [],
    }
    for length in args.lengths:
        series = _run_plant(length, PlantSimConfig.steps_per_day, 0.02, rng)
        t_star, t_bare = best_of_interleaved(
            [lambda s=series: star.decision_function(s), lambda s=series: bare.decision_function(s)],
            args.repeats,
        )
        report["scoring"].append(
            {
                "steps": length,
                "star_s": t_star,
                "backbone_s": t_bare,
                "ratio": t_star / t_bare,
                "star_us_per_step": 1e6 * t_star / length,
            }
        )
        print(json.dumps(report["scoring"][-1]), flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
