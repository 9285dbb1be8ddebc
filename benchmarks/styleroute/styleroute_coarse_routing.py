"""Does the coarse routing evidence (issue #29 speed fix) change StyleRoute's routing maps materially?

The DDIM-inversion error and the two route-disagreement probes can run on grids downsampled by
``inversion_scale`` / ``probe_scale`` and are upsampled before their region means feed S and D. This script
routes every experiment content (8, at the experiment's 64 px) with every committed prior (5 styles) at
the experiment's budgets, once with all evidence at full resolution and once with the given scales
(defaults 2 and 1, the shipped defaults), both from the same probe seed, and reports per style:

- ``r px``: Pearson correlation of the pixel routing maps r(x) (mean over contents and budgets, and min);
- ``r reg``: the same on the region values r_R;
- ``|dr|``: mean absolute difference of r(x);
- ``D``, ``inv``: Spearman correlation of the region means of the disagreement and the inversion error;
- yardsticks: ``r px`` between two *full-resolution* routings whose probes use different noise seeds (the
  routing's own seed noise), and between the full routing and the same region values shuffled over the
  regions (the ``random_r`` control: what a material change looks like).

    OMP_NUM_THREADS=1 python benchmarks/styleroute/styleroute_coarse_routing.py --inversion-scale 2 \
        --probe-scale 1
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from scipy.stats import spearmanr

from neurips26.methods.styleroute import experiment as E
from neurips26.methods.styleroute.data import CONTENTS, load_content, load_style
from neurips26.methods.styleroute.pipeline import StyleRoutePipeline
from neurips26.methods.styleroute.router import RegionRouter, region_means
from neurips26.methods.styleroute.training import load_prior, make_scheduler


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a.reshape(-1), b.reshape(-1))[0, 1])


def compare(
    style: str, size: int, budgets: list[float], inversion_scale: int, probe_scale: int, seed: int = 77
) -> list[dict[str, float]]:
    pipe = StyleRoutePipeline(load_prior(style), make_scheduler())
    full = pipe.with_config(inversion_scale=1, probe_scale=1)
    coarse = pipe.with_config(inversion_scale=inversion_scale, probe_scale=probe_scale)
    contents = np.stack([load_content(name, size) for name in CONTENTS])
    style_image = load_style(style)
    evidence = {
        "full": full.route_inputs(contents, style_image, torch.Generator().manual_seed(seed)),
        "coarse": coarse.route_inputs(contents, style_image, torch.Generator().manual_seed(seed)),
        "reseeded": full.route_inputs(contents, style_image, torch.Generator().manual_seed(seed + 1)),
    }
    router = RegionRouter(full.route_config)
    rows = []
    for i, name in enumerate(CONTENTS):
        labels = evidence["full"].labels[i]
        n = int(labels.max()) + 1

        def route(kind: str, budget: float, i: int = i, labels: np.ndarray = labels) -> object:
            ev = evidence[kind]
            return router.route(
                contents[i],
                style_image,
                budget,
                labels=labels,
                inversion_error=ev.inversion_error[i],
                disagreement=ev.disagreement[i],
            )

        d_corr = spearmanr(
            region_means(evidence["full"].disagreement[i], labels, n),
            region_means(evidence["coarse"].disagreement[i], labels, n),
        )[0]
        inv_corr = spearmanr(
            region_means(evidence["full"].inversion_error[i], labels, n),
            region_means(evidence["coarse"].inversion_error[i], labels, n),
        )[0]
        for budget in budgets:
            a, b, c = route("full", budget), route("coarse", budget), route("reseeded", budget)
            shuffled = a.region_r[np.random.default_rng(i).permutation(n)]
            basis = router._feather_basis(labels, n)
            rows.append(
                {
                    "style": style,
                    "content": name,
                    "budget": budget,
                    "r_px": _pearson(a.map, b.map),
                    "r_region": _pearson(a.region_r, b.region_r),
                    "abs_dr": float(np.abs(a.map - b.map).mean()),
                    "D_spearman": float(d_corr),
                    "inv_spearman": float(inv_corr),
                    "r_px_reseeded": _pearson(a.map, c.map),
                    "r_px_shuffled": _pearson(a.map, np.tensordot(shuffled, basis, axes=1)),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.75])
    parser.add_argument("--inversion-scale", type=int, default=2)
    parser.add_argument("--probe-scale", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [
        row
        for style in E.PRIOR_STYLES
        for row in compare(style, args.size, args.budgets, args.inversion_scale, args.probe_scale)
    ]
    keys = ("r_px", "r_region", "abs_dr", "D_spearman", "inv_spearman", "r_px_reseeded", "r_px_shuffled")
    print(
        "| style | r px coarse vs full (min) | r reg | abs dr | D (Spearman) | inv (Spearman) "
        "| r px full vs full, other probe seed | r px full vs shuffled |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for style in (*E.PRIOR_STYLES, "all"):
        sel = [r for r in rows if style in ("all", r["style"])]
        mean = {k: float(np.mean([r[k] for r in sel])) for k in keys}
        low = float(np.min([r["r_px"] for r in sel]))
        print(
            f"| {style} | {mean['r_px']:.3f} ({low:.3f}) | {mean['r_region']:.3f} | {mean['abs_dr']:.3f} | "
            f"{mean['D_spearman']:.3f} | {mean['inv_spearman']:.3f} | {mean['r_px_reseeded']:.3f} | "
            f"{mean['r_px_shuffled']:.3f} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
