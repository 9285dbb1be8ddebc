"""DACS accuracy vs shift strength: the figure and the paired gains, from the published ``strength`` profile.

Reads ``results/dacs/strength.json`` (``neurips26 run dacs --profile strength --publish``) and prints:
each system's mean target accuracy on the feature_shift x structure_shift grid; DACS's paired gain (by
seed, 95% t-interval) over DANN-GCN and over stages 1+3 (DACS without stage 2) at every point; and how
much each gain grows from no structure shift to the strongest, per feature level. ``--figure PATH``
also draws the three-panel figure. The README's copy of the gains and the figure is the experiment's
``strength`` analysis (``neurips26 report --readme dacs --profile strength`` writes it, the figure to
``docs/dacs/strength_strength.png``).

    python benchmarks/dacs/dacs_strength.py results/dacs/strength.json
"""

from __future__ import annotations

import argparse
import json

from neurips26.methods.dacs.figures import cell_values, gain_growth, paired_gain, strength_figure


def _fmt(gain) -> str:
    return f"{gain.mean:+.3f} [{gain.low:+.3f}, {gain.high:+.3f}] n={gain.n}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", nargs="?", default="results/dacs/strength.json")
    parser.add_argument(
        "--figure", default="", help="also draw the figure here (the README's is in docs/dacs/)"
    )
    parser.add_argument("--metric", default="target_accuracy")
    parser.add_argument("--versus", nargs="+", default=["dann_gcn", "dacs_stage13"])
    args = parser.parse_args()
    with open(args.result, encoding="utf-8") as handle:
        result = json.load(handle)
    values = cell_values(result, args.metric)
    ours = result["run_info"]["ours"]
    features = sorted({key[1] for key in values})
    structures = sorted({key[2] for key in values})
    systems = [name for name in result["systems"] if any(key[0] == name for key in values)]

    print(f"mean {args.metric} (rows: feature_shift; columns: structure_shift {structures})")
    for name in systems:
        print(f"\n{name}")
        for feature in features:
            row = []
            for structure in structures:
                seeds = values.get((name, feature, structure), {})
                row.append(f"{sum(seeds.values()) / len(seeds):.3f}" if seeds else "  -  ")
            print(f"  fs {feature:<4g} " + "  ".join(row))

    for other in args.versus:
        print(f"\n{ours} - {other}, paired by seed (95% t-interval)")
        for feature in features:
            for structure in structures:
                gain = paired_gain(values, ours, other, feature, structure)
                print(f"  fs {feature:<4g} ss {structure:<4g} {_fmt(gain)}")
        low, high = structures[0], structures[-1]
        print(f"  growth of the gain from structure_shift {low:g} to {high:g}, per feature level:")
        for feature in features:
            print(f"    fs {feature:<4g} {_fmt(gain_growth(values, ours, other, feature, low, high))}")

    if args.figure:
        path = strength_figure(result, args.figure, metric=args.metric, versus=tuple(args.versus))
        print(f"\nfigure: {path}")


if __name__ == "__main__":
    main()
