"""The routing-map figure of each pair of the ``real`` profile, beside its numbers.

For every pair of ``experiment.REAL_PAIRS`` (seed s runs pair s) writes
``results/styleroute/real_<content>_<style>.png``: content | style | routing map over the content (red =
inject texture, blue = protect structure, white = SLIC borders) | StyleRoute at budget 0.5 | SDEdit at
t0 = 0.3. StyleRoute's panel is the experiment's own mid-sweep output of that seed (same prior, size,
seeds and shared route inputs as ``experiment.generate``), and the mean of r is printed per pair. The
PNGs are palette-quantised (256 colours) to stay small.

    OMP_NUM_THREADS=1 python benchmarks/styleroute/styleroute_real_figures.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from neurips26.methods.styleroute import baselines
from neurips26.methods.styleroute import experiment as E
from neurips26.methods.styleroute.data import load_content, load_style
from neurips26.methods.styleroute.pipeline import StyleRoutePipeline
from neurips26.methods.styleroute.training import load_prior, make_scheduler

OUT = Path(__file__).resolve().parents[2] / "results" / "styleroute"
BUDGET = 0.5  # the experiment's mid-sweep point (budgets 0.1, 0.3, 0.5, 0.75)
SDEDIT_T0 = 0.3


def routing_overlay(content: np.ndarray, r: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The content half-blended with r in red and 1 - r in blue, SLIC borders in white."""
    from skimage.segmentation import find_boundaries

    overlay = 0.5 * content + 0.5 * np.stack([r, np.zeros_like(r), 1 - r], -1)
    overlay[find_boundaries(labels)] = 1.0
    return overlay


def pair_figure(config: E.StyleRouteExperimentConfig, seed: int) -> tuple[str, np.ndarray, float]:
    """Seed ``seed``'s pair name, its panel row and its routing map's mean r."""
    style_name, (content_name,) = E.seed_assignment(config, seed)
    content = load_content(content_name, config.size)
    style = load_style(style_name, root=config.painting_root)
    pipe = StyleRoutePipeline(load_prior(style_name), make_scheduler(), config.method)
    inputs = pipe.route_inputs(content[None], style, torch.Generator().manual_seed(seed + 77))
    out = pipe(
        content[None],
        style,
        budget=BUDGET,
        generator=torch.Generator().manual_seed(seed),
        route_inputs=inputs,
    )
    sdedit = baselines.global_sdedit(
        pipe.denoiser,
        content[None],
        SDEDIT_T0,
        config.method.num_inference_steps,
        torch.Generator().manual_seed(seed),
    )[0]
    r = out.routing_map[0]
    panels = [
        content,
        load_style(style_name, config.size, root=config.painting_root),
        routing_overlay(content, r, out.labels[0]),
        out.images[0],
        sdedit,
    ]
    return f"{content_name}_{style_name}", np.concatenate(panels, 1), float(r.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from PIL import Image

    profile = E.EXPERIMENT.profile("real")
    config = E.EXPERIMENT.config_for(profile, {}, {})
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in range(profile.seeds):
        name, row, mean_r = pair_figure(config, seed)
        path = args.out / f"real_{name}.png"
        image = Image.fromarray((np.clip(row, 0, 1) * 255).astype(np.uint8))
        image.quantize(256).save(path, optimize=True)
        print(f"seed {seed}: wrote {path} ({path.stat().st_size // 1024} KB), mean r {mean_r:.3f}")


if __name__ == "__main__":
    main()
