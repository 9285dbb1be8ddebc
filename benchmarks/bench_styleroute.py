"""StyleRoute's cost against global SDEdit at equal steps and size (issue #29: <= 3x), with a breakdown.

For each size the brick prior stylises one content image: global SDEdit at t0 = t_max and StyleRoute at
budget 0.5 with the same DDIM grid (20 steps over the schedule, so both run the steps at or below t_max).
The ratio is paired: each repeat times SDEdit and then one end-to-end StyleRoute call (SLIC, inversion
error, probes, routing, routed sampling with guidance and projection), and the reported ratio is the
median of the per-repeat ratios (robust to load drift on a shared machine). The breakdown times each part
on its own: SLIC, routing (confidences + bias solve), the DDIM-inversion error, the two probes and the
routed sampling; a second routed run without guidance isolates the guidance cost. ``--inversion-scale``
and ``--probe-scale`` set the grids of the inversion error (default 2: half resolution) and of the batched
probes (default 1); ``--inversion-scale 1`` is the pre-#29-fix inversion. Medians of ``--repeats`` runs
on one thread; the peak RSS is the process's after all runs. The µs/px column tests linearity in pixels.

    OMP_NUM_THREADS=1 python benchmarks/bench_styleroute.py --sizes 64 96 128 192 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from neurips26.core.measure import peak_rss_mb
from neurips26.methods.styleroute import RegionRouter, StyleRoutePipeline, load_prior, make_scheduler
from neurips26.methods.styleroute.data import load_content, load_style
from neurips26.methods.styleroute.pipeline import to_tensor
from neurips26.methods.styleroute.sampler import sdedit


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _median_time(fn, repeats: int) -> float:
    return statistics.median(_time(fn) for _ in range(repeats))


def measure(size: int, repeats: int, inversion_scale: int = 2, probe_scale: int = 1) -> dict[str, float]:
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

    run_sdedit(), run(pipe)  # warm-up (first-call allocations, lazy imports)
    pairs = [(_time(run_sdedit), _time(lambda: run(pipe))) for _ in range(repeats)]
    t_sdedit = statistics.median(p[0] for p in pairs)
    t_total = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[1] / p[0] for p in pairs)
    router = RegionRouter(cfg)
    labels = router.segment(content)
    t_routing = _median_time(lambda: router.route(content, style, 0.5, labels=labels), repeats)
    t_segment = _median_time(lambda: router.segment(content), repeats)
    t_inversion = _median_time(lambda: pipe.inversion_error(c), repeats)
    t_probes = _median_time(lambda: pipe.probes(c, s, torch.Generator().manual_seed(0)), repeats)
    inputs = pipe.route_inputs(content, style, torch.Generator().manual_seed(0))
    t_sampling = _median_time(lambda: run(pipe, inputs), repeats) - t_routing
    no_guidance = pipe.with_config(use_guidance=False)
    t_sampling_plain = _median_time(lambda: run(no_guidance, inputs), repeats) - t_routing
    return {
        "size": size,
        "inversion_scale": inversion_scale,
        "probe_scale": probe_scale,
        "sdedit_s": t_sdedit,
        "styleroute_s": t_total,
        "ratio": ratio,
        "segment_s": t_segment,
        "routing_s": t_routing,
        "inversion_s": t_inversion,
        "probes_s": t_probes,
        "sampling_s": t_sampling,
        "guidance_s": t_sampling - t_sampling_plain,
        "us_per_pixel": 1e6 * t_total / size**2,
        "sdedit_us_per_pixel": 1e6 * t_sdedit / size**2,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 96, 128, 192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--inversion-scale", type=int, default=2)
    parser.add_argument("--probe-scale", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(size, args.repeats, args.inversion_scale, args.probe_scale) for size in args.sizes]
    print(
        "| px | SDEdit s | StyleRoute s | ratio | SLIC | routing | inversion | probes | sampling "
        "| of which guidance | µs/px (SDEdit µs/px) | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['size']} | {r['sdedit_s']:.3f} | {r['styleroute_s']:.3f} | {r['ratio']:.2f}x | "
            f"{r['segment_s']:.3f} | "
            f"{r['routing_s']:.3f} | {r['inversion_s']:.3f} | {r['probes_s']:.3f} | {r['sampling_s']:.3f} | "
            f"{r['guidance_s']:.3f} | {r['us_per_pixel']:.1f} ({r['sdedit_us_per_pixel']:.1f}) | "
            f"{r['peak_rss_mb']:.0f} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
