"""StyleRoute's cost against global SDEdit at equal steps and size (issue #29: <= 3x), with a breakdown.

For each size the brick prior stylises one content image: global SDEdit at t0 = t_max and StyleRoute at
budget 0.5 with the same DDIM grid (20 steps over the schedule, so both run the steps at or below t_max).
StyleRoute's time is split into routing (SLIC + confidences), the DDIM-inversion error, the two probes
and the routed sampling (with guidance and projection); a second routed run without guidance isolates the
guidance cost. Each figure is the median of ``--repeats`` runs on one thread; the peak RSS is the
process's after all runs. Linear in pixels: the last column is microseconds per pixel.

    OMP_NUM_THREADS=1 python benchmarks/bench_styleroute.py --sizes 64 96 128 192
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


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(size: int, repeats: int) -> dict[str, float]:
    pipe = StyleRoutePipeline(load_prior("brick"), make_scheduler())
    cfg = pipe.route_config
    content, style = load_content("astronaut", size), load_style("brick")
    c, s = to_tensor(content[None]), to_tensor(style[None])
    noise = torch.randn(c.shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        t_sdedit = _median_time(
            lambda: sdedit(pipe.denoiser, c, cfg.t_max, cfg.num_inference_steps, noise), repeats
        )
    router = RegionRouter(cfg)
    labels = router.segment(content)
    t_routing = _median_time(lambda: router.route(content, style, 0.5, labels=labels), repeats)
    t_segment = _median_time(lambda: router.segment(content), repeats)
    t_inversion = _median_time(lambda: pipe.inversion_error(c), repeats)
    t_probes = _median_time(lambda: pipe.probes(c, s, torch.Generator().manual_seed(0)), repeats)
    inputs = pipe.route_inputs(content, style, torch.Generator().manual_seed(0))

    def run(p: StyleRoutePipeline, i: object) -> object:
        return p(content, style, budget=0.5, generator=torch.Generator().manual_seed(0), route_inputs=i)

    t_sampling = _median_time(lambda: run(pipe, inputs), repeats) - t_routing
    no_guidance = pipe.with_config(use_guidance=False)
    t_sampling_plain = _median_time(lambda: run(no_guidance, inputs), repeats) - t_routing
    total = t_segment + t_routing + t_inversion + t_probes + t_sampling
    row = {
        "size": size,
        "sdedit_s": t_sdedit,
        "styleroute_s": total,
        "ratio": total / t_sdedit,
        "segment_s": t_segment,
        "routing_s": t_routing,
        "inversion_s": t_inversion,
        "probes_s": t_probes,
        "sampling_s": t_sampling,
        "guidance_s": t_sampling - t_sampling_plain,
        "us_per_pixel": 1e6 * total / size**2,
        "peak_rss_mb": peak_rss_mb(),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 96, 128, 192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(size, args.repeats) for size in args.sizes]
    print(
        "| px | SDEdit s | StyleRoute s | ratio | SLIC | routing | inversion | probes | sampling "
        "| of which guidance | us/px | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['size']} | {r['sdedit_s']:.3f} | {r['styleroute_s']:.3f} | {r['ratio']:.2f}x | "
            f"{r['segment_s']:.3f} | "
            f"{r['routing_s']:.3f} | {r['inversion_s']:.3f} | {r['probes_s']:.3f} | {r['sampling_s']:.3f} | "
            f"{r['guidance_s']:.3f} | {r['us_per_pixel']:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
