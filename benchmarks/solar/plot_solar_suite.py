"""Figure: SOL bounds vs measured eager CPU time on the authored suite (cold and warm caches).

Points below the diagonal are valid bounds; points above it are violations. Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/solar/plot_solar_suite.py [--out path.png]
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from neurips26.bench.experiment import SilentProgress
from neurips26.bench.setup import build_context
from neurips26.methods.solar.experiment import EXPERIMENT, evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/solar/bounds_vs_measured.png")
    args = parser.parse_args()
    profile = EXPERIMENT.profile("default")
    config = EXPERIMENT.config_for(profile, {}, {})
    shared = build_context(EXPERIMENT, config, profile, 0)  # every system on one spec and measurement
    rows = {
        name: evaluate(
            EXPERIMENT.systems[name](config).on(shared.spec), config, SilentProgress(), shared.timings
        )[1]
        for name in ("solar", "naive_roofline", "flopcounter_meta")
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), sharey=True)
    styles = {
        "solar": ("tab:red", "o", "ours (cache-aware)"),
        "naive_roofline": ("tab:green", "^", "naive per-op"),
        "flopcounter_meta": ("tab:gray", "s", "FlopCounterMode (meta) / peak"),
    }
    for ax, timing in zip(axes, ("cold", "warm"), strict=True):
        lo, hi = 1e-7, 1e-1
        for name, data in rows.items():
            color, marker, label = styles[name]
            bounds = [max(r["bound"], lo) for r in data]
            times = [r[timing] for r in data]
            violations = sum(b > t for b, t in zip(bounds, times, strict=True))
            ax.scatter(
                times,
                bounds,
                c=color,
                marker=marker,
                s=40 if name == "solar" else 22,
                label=f"{label}: {violations} above",
                alpha=0.85,
                edgecolors="black" if name == "solar" else None,
            )
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(5e-5, 5e-2)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"measured eager CPU time, {timing} cache (s)")
        ax.set_title(f"{timing} cache: bound vs measured (36 programs)")
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("bound (s), cpu-local spec")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
