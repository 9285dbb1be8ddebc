"""StyleRoute's cost against global SDEdit at equal steps and size (issue #29: <= 3x), with a breakdown.

For each size the brick prior stylises one content image: global SDEdit at t0 = t_max and StyleRoute at
budget 0.5 with the same DDIM grid (20 steps over the schedule, so both run the steps at or below t_max).
The ratio is paired: each repeat times SDEdit and one end-to-end StyleRoute call (SLIC, inversion error,
probes, routing, routed sampling with guidance and projection) back to back, alternating which goes
first; the reported ratio is the median of the per-repeat ratios, with their min-max range, their
interquartile range and a distribution-free 95% interval of the median (order statistics, binomial), all
robust to load drift on a shared machine. The same is reported on process CPU time (one thread, so it is
the work done, without the time other processes held the core). The style-only caches (the guidance
Grams of the style, its tiles' Lab histograms) are warm after the warm-up call, as they are for every
call after a style's first; their one-off cost is the ``style cache`` column.

The breakdown times each part on its own (medians): SLIC; the router's parts — S pixel maps (structure
tensor, Canny), T features (LBP, high-frequency ratio, style compatibility), region graph + smoothing
operator, and the rest of ``route`` (rank-normalised region means, bias bisection, feathering); the
DDIM-inversion error; the probes (the D evidence); the routed sampling. Guidance is what switching
``use_guidance`` off removes from the probes and from the sampling. ``--inversion-scale`` and
``--probe-scale`` set the evidence grids (defaults 2 and 1, the shipped config). One thread; peak RSS is
the process's after all runs. The µs/px column tests linearity in pixels.

    OMP_NUM_THREADS=1 python benchmarks/styleroute/bench_styleroute.py --sizes 64 96 128 192 --repeats 21
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from neurips26.core.measure import peak_rss_mb
from neurips26.methods.styleroute import RegionRouter, StyleRoutePipeline, load_prior, make_scheduler
from neurips26.methods.styleroute import router as router_module
from neurips26.methods.styleroute.data import load_content, load_style
from neurips26.methods.styleroute.guidance import style_targets
from neurips26.methods.styleroute.pipeline import to_tensor
from neurips26.methods.styleroute.sampler import sdedit


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _time_both(fn) -> tuple[float, float]:
    """(wall, process CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def median_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median: the order statistics x_(k), x_(n+1-k) (1-indexed) with k
    the largest rank whose tail P(Bin(n, 1/2) <= k - 1) is at most (1 - level) / 2; (min, max) if none."""
    from scipy.stats import binom

    x, n = np.sort(values), len(values)
    ranks = [k for k in range(1, n // 2 + 1) if binom.cdf(k - 1, n, 0.5) <= (1 - level) / 2]
    if not ranks:
        return float(x[0]), float(x[-1])
    k = ranks[-1]
    return float(x[k - 1]), float(x[n - k])


def _median_time(fn, repeats: int) -> float:
    return statistics.median(_time(fn) for _ in range(repeats))


def measure(
    size: int, repeats: int, part_repeats: int, inversion_scale: int = 2, probe_scale: int = 1
) -> dict[str, float]:
    pipe = StyleRoutePipeline(load_prior("brick"), make_scheduler())
    pipe = pipe.with_config(inversion_scale=inversion_scale, probe_scale=probe_scale)
    cfg = pipe.route_config
    content, style = load_content("astronaut", size), load_style("brick")
    c, s = to_tensor(content[None]), to_tensor(style[None])
    noise = torch.randn(c.shape, generator=torch.Generator().manual_seed(0))

    def run_sdedit() -> object:
        with torch.no_grad():
            return sdedit(pipe.denoiser, c, cfg.t_max, cfg.num_inference_steps, noise)

    def run(p: StyleRoutePipeline, i: object = None) -> object:
        return p(content, style, budget=0.5, generator=torch.Generator().manual_seed(0), route_inputs=i)

    def style_cache_fill() -> None:  # what a style's first call computes once
        router_module._STYLE_TILE_CACHE.clear()
        router_module.style_tile_histograms(style)
        style_targets(pipe.bank, s)

    run_sdedit(), run(pipe)  # warm-up (first-call allocations, lazy imports, the style caches)
    pairs = []
    for index in range(repeats):
        if index % 2:
            t_route = _time_both(lambda: run(pipe))
            t_sd = _time_both(run_sdedit)
        else:
            t_sd = _time_both(run_sdedit)
            t_route = _time_both(lambda: run(pipe))
        pairs.append((t_sd, t_route))
    ratios = np.array([b[0] / a[0] for a, b in pairs])
    cpu_ratios = np.array([b[1] / a[1] for a, b in pairs])
    low, high = median_interval(ratios)
    cpu_low, cpu_high = median_interval(cpu_ratios)
    repeats = part_repeats
    router = RegionRouter(cfg)
    labels = router.segment(content)
    n = int(labels.max()) + 1
    t_route_all = _median_time(lambda: router.route(content, style, 0.5, labels=labels), repeats)
    t_s_maps = _median_time(lambda: router.structure_maps(content), repeats)
    t_t_feats = _median_time(lambda: router.texture_features(content, style, labels), repeats)
    t_graph = _median_time(lambda: router._smoother(router_module.region_adjacency(labels, n)), repeats)
    t_inversion = _median_time(lambda: pipe.inversion_error(c), repeats)
    t_probes = _median_time(lambda: pipe.probes(c, s, torch.Generator().manual_seed(0)), repeats)
    no_guidance = pipe.with_config(use_guidance=False)
    t_probes_plain = _median_time(lambda: no_guidance.probes(c, s, torch.Generator().manual_seed(0)), repeats)
    inputs = pipe.route_inputs(content, style, torch.Generator().manual_seed(0))
    t_sampling = _median_time(lambda: run(pipe, inputs), repeats) - t_route_all
    t_sampling_plain = _median_time(lambda: run(no_guidance, inputs), repeats) - t_route_all
    t_style_cache = _median_time(style_cache_fill, repeats)
    t_total = statistics.median(p[1][0] for p in pairs)
    t_sdedit = statistics.median(p[0][0] for p in pairs)
    return {
        "size": size,
        "repeats": len(pairs),
        "part_repeats": part_repeats,
        "inversion_scale": inversion_scale,
        "probe_scale": probe_scale,
        "sdedit_s": t_sdedit,
        "styleroute_s": t_total,
        "ratio": float(np.median(ratios)),
        "ratio_min": float(ratios.min()),
        "ratio_max": float(ratios.max()),
        "ratio_q1": float(np.quantile(ratios, 0.25)),
        "ratio_q3": float(np.quantile(ratios, 0.75)),
        "ratio_ci_low": low,
        "ratio_ci_high": high,
        "cpu_ratio": float(np.median(cpu_ratios)),
        "cpu_ratio_min": float(cpu_ratios.min()),
        "cpu_ratio_max": float(cpu_ratios.max()),
        "cpu_ratio_ci_low": cpu_low,
        "cpu_ratio_ci_high": cpu_high,
        "segment_s": _median_time(lambda: router.segment(content), repeats),
        "routing_s": t_route_all,
        "structure_maps_s": t_s_maps,
        "texture_features_s": t_t_feats,
        "graph_s": t_graph,
        "routing_rest_s": t_route_all - t_s_maps - t_t_feats - t_graph,
        "inversion_s": t_inversion,
        "probes_s": t_probes,
        "sampling_s": t_sampling,
        "guidance_s": (t_sampling - t_sampling_plain) + (t_probes - t_probes_plain),
        "guidance_probes_s": t_probes - t_probes_plain,
        "style_cache_s": t_style_cache,
        "us_per_pixel": 1e6 * t_total / size**2,
        "sdedit_us_per_pixel": 1e6 * t_sdedit / size**2,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 96, 128, 192])
    parser.add_argument("--repeats", type=int, default=21, help="paired end-to-end repeats")
    parser.add_argument("--part-repeats", type=int, default=7, help="repeats of each breakdown part")
    parser.add_argument("--inversion-scale", type=int, default=2)
    parser.add_argument("--probe-scale", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for size in args.sizes:
        rows.append(measure(size, args.repeats, args.part_repeats, args.inversion_scale, args.probe_scale))
        print(json.dumps({k: round(v, 4) for k, v in rows[-1].items()}), flush=True)
    print(
        "\n| px | SDEdit s | StyleRoute s | wall ratio: median (95% CI of median) [min, max] | IQR "
        "| CPU-time ratio: median (95% CI) [min, max] | µs/px (SDEdit µs/px) | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['size']} | {r['sdedit_s']:.3f} | {r['styleroute_s']:.3f} | "
            f"**{r['ratio']:.2f}x** ({r['ratio_ci_low']:.2f}–{r['ratio_ci_high']:.2f}) "
            f"[{r['ratio_min']:.2f}, {r['ratio_max']:.2f}] | {r['ratio_q1']:.2f}–{r['ratio_q3']:.2f} | "
            f"{r['cpu_ratio']:.2f}x ({r['cpu_ratio_ci_low']:.2f}–{r['cpu_ratio_ci_high']:.2f}) "
            f"[{r['cpu_ratio_min']:.2f}, {r['cpu_ratio_max']:.2f}] | "
            f"{r['us_per_pixel']:.1f} ({r['sdedit_us_per_pixel']:.1f}) | {r['peak_rss_mb']:.0f} |"
        )
    print(
        "\n| px | SLIC | routing: S maps / T feats / graph / rest = total | inversion | probes | sampling "
        "| guidance: sampling + probes | style cache, once |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms = {k: 1e3 * v for k, v in r.items() if k.endswith("_s")}
        print(
            f"| {r['size']} | {ms['segment_s']:.1f} | {ms['structure_maps_s']:.1f} / "
            f"{ms['texture_features_s']:.1f} / {ms['graph_s']:.1f} / {ms['routing_rest_s']:.1f} = "
            f"{ms['routing_s']:.1f} | {ms['inversion_s']:.0f} | {ms['probes_s']:.0f} | "
            f"{ms['sampling_s']:.0f} | "
            f"{ms['guidance_s'] - ms['guidance_probes_s']:.0f} + {ms['guidance_probes_s']:.0f} | "
            f"{ms['style_cache_s']:.1f} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
