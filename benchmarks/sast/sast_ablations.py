"""SAST ablations and flip curves at the default scale (UL, 5 seeds, six targets), outside the profiles.

Prints mean top-1 and flip rate (mean ± std over seeds) for SAST, its ablations (no SWIP, no text
refinement, fixed alpha), GRIP and CPL, and writes ``flip_curves.png`` (flip rate per epoch, mean over
targets and seeds) next to the method README.

    OMP_NUM_THREADS=1 MPLBACKEND=Agg .venv/bin/python benchmarks/sast/sast_ablations.py
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from neurips26.bench.setup import build_context
from neurips26.methods.sast import experiment as sx
from neurips26.methods.sast.trainer import CachedFeatures

SYSTEMS = ("sast", "sast_no_swip", "sast_no_refine", "sast_fixed_alpha", "grip", "cpl")
SEEDS = range(5)
OUT = Path(sx.__file__).parent / "flip_curves.png"


def main() -> None:
    import matplotlib.pyplot as plt

    torch.set_num_threads(1)
    config = sx.SASTExperimentConfig()
    accuracy = {s: [] for s in SYSTEMS}
    flips = {s: [] for s in SYSTEMS}
    curves = {s: [] for s in SYSTEMS}
    profile = sx.EXPERIMENT.profile("default")
    for seed in SEEDS:
        context = build_context(sx.EXPERIMENT, config, profile, seed)  # the seed's embedded targets
        for name in SYSTEMS:
            system = sx.SYSTEMS[name](config)
            accs, rates, per_target = [], [], []
            for target in config.targets:
                data = context.targets[target]
                trainer = sx.TRAINERS[system.trainer](
                    context.backbone, data.class_names, data.templates, replace(system.config, seed=seed)
                )
                classifier = trainer.adapt(CachedFeatures(data.raw, data.views), "UL")
                with torch.no_grad():
                    pred = classifier.logits_from_raw(data.test_raw).argmax(1)
                accs.append(float((pred == data.test_labels).float().mean()))
                rates.append(trainer.ledger.mean_flip_rate())
                per_target.append(trainer.ledger.flip_rates)
            accuracy[name].append(np.mean(accs))
            flips[name].append(np.mean(rates))
            curves[name].append(np.mean(per_target, axis=0))
    print("| system | top-1 (UL, mean over 6 targets) | flip rate |")
    print("|---|---|---|")
    for name in SYSTEMS:
        a, f = np.array(accuracy[name]), np.array(flips[name])
        print(f"| {name} | {a.mean():.3f} ± {a.std(ddof=1):.3f} | {f.mean():.4f} ± {f.std(ddof=1):.4f} |")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name in SYSTEMS:
        curve = np.mean(curves[name], axis=0)
        ax.plot(range(2, len(curve) + 2), curve, label=name, linewidth=2.5 if name == "sast" else 1.2)
    ax.set_xlabel("epoch")
    ax.set_ylabel("flip rate (UL, mean of 6 targets x 5 seeds)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
