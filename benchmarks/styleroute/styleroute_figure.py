"""StyleRoute's figure (content | style | outputs | routing map) and one seed's frontier points.

Writes ``docs/styleroute/figure.png`` (96-px panels: content, style, StyleRoute at budget 0.5 with its
routing map, SDEdit at t0 = 0.3, StyleID-like at gamma = 0.75, region-matching AdaIN, Gatys) for two
content/style pairs, and prints each system's frontier points (style SWD relative to the content's,
structure score) on seed ``--seed``'s pair, the numbers behind one seed's hypervolumes.

    OMP_NUM_THREADS=1 python benchmarks/styleroute/styleroute_figure.py --seed 0
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from neurips26.bench.setup import build_context
from neurips26.methods.styleroute import baselines
from neurips26.methods.styleroute import experiment as E
from neurips26.methods.styleroute.data import load_content, load_style
from neurips26.methods.styleroute.pipeline import StyleRoutePipeline
from neurips26.methods.styleroute.training import load_prior, make_scheduler

OUT = Path(__file__).resolve().parents[2] / "docs" / "styleroute" / "figure.png"
PAIRS = (("astronaut", "stained_glass"), ("rocket", "hubble_deep_field"), ("coffee", "immunohistochemistry"))


def figure(size: int = 96) -> np.ndarray:
    rows = []
    for content_name, style_name in PAIRS:
        content, style = load_content(content_name, size), load_style(style_name)
        pipe = StyleRoutePipeline(load_prior(style_name), make_scheduler())
        out = pipe(content, style, budget=0.5, generator=torch.Generator().manual_seed(0))
        route = np.repeat(out.routing_map[0][..., None], 3, 2)
        panels = [
            content,
            load_style(style_name, size),
            out.images[0],
            route,
            baselines.global_sdedit(pipe.denoiser, content[None], 0.3, 20, torch.Generator().manual_seed(0))[
                0
            ],
            baselines.styleid_like(pipe.denoiser, content[None], style, 0.75)[0],
            baselines.region_adain_lab(content, style),
            baselines.gatys_random(content, style, 10.0),
        ]
        rows.append(np.concatenate(panels, 1))
    return np.concatenate(rows, 0)


def frontier(seed: int) -> None:
    config = E.StyleRouteExperimentConfig()
    style, names = E.pair_for_seed(seed, config.contents_per_seed)
    contents = np.stack([load_content(n, config.size) for n in names])
    style_image = load_style(style)
    print(f"seed {seed}: style {style}, contents {names}; points (style SWD / content's, structure)")
    context = build_context(E.EXPERIMENT, config, E.EXPERIMENT.profile("default"), seed)  # the style's prior
    for name in E.SYSTEMS:
        system = E.EXPERIMENT.build_system(name, config)
        outputs = E.generate(system, context.style.pipeline, contents, style_image, seed)
        cells = []
        for i, content_name in enumerate(names):
            mask = E.object_mask(content_name, config.size)
            base = E.score(contents[i], contents[i], style_image, mask)
            pts = [E.score(o[i], contents[i], style_image, mask) for o in outputs]
            cells.append(
                " ".join(f"({p['style_swd'] / base['style_swd']:.2f}, {p['structure']:.2f})" for p in pts)
            )
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-frontier", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from PIL import Image

    OUT.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((np.clip(figure(), 0, 1) * 255).astype(np.uint8)).save(OUT)
    print(f"wrote {OUT}")
    if not args.no_frontier:
        frontier(args.seed)


if __name__ == "__main__":
    main()
