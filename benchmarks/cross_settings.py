"""Does a smoke cell give the same non-timing values under other settings? (issue #49), for every method.

For each ready method: ours and one baseline at the smoke profile's first point, seed 0, run in fresh
processes under
  A: one process, OMP_NUM_THREADS=1, baseline then ours (ours runs after another cell: order),
  B: ours alone in a fresh process, OMP_NUM_THREADS=2 (``--jobs 2`` runs each cell in such a spawned
     worker; a pool is not started here because spawning three interpreters per method on a loaded
     2-core machine cost minutes; tests/bench/test_cross_settings.py does use one),
  C: as A with torch's deterministic algorithms off (how the published results were made).
Prints, per method, the wall time of each setting and every metric that differs A vs B and A vs C.
Metrics the experiment declares ``timing=True`` are left out.

Measured 2026-12-04 (2-core machine at load ~12): all 19 methods identical A vs B and A vs C on every
non-timing value; the only values that differed were the wall-time metrics now declared timing (samhybrid
train_seconds, screensearch seconds/actions_per_s, styleroute seconds_per_image). So torch's deterministic
algorithms moved no smoke value (published numbers stay). Smoke cells over 20 s there: spectralkv-static
137 s (its first cell computes every system), sast zero_shot 67 s, scalebits 38/21 s, solexecbench 36 s,
snapmla bf16 31 s, semfas concat_erm 21 s; the whole check took about 30 minutes. Usage:

    PYTHONPATH=src python benchmarks/cross_settings.py [SLUG ...]
"""

from __future__ import annotations

import sys
import time

from neurips26.registry import METHODS
from neurips26.testing.reproducibility import cells_under, non_timing_values, smoke_cells


def differing(first: dict, second: dict) -> list[str]:
    out = []
    for key in sorted(set(first) & set(second)):
        (status_a, values_a), (status_b, values_b) = first.get(key, (None, {})), second.get(key, (None, {}))
        if status_a != status_b:
            out.append(f"{key}: status {status_a} vs {status_b}")
        out += [
            f"{key} {name}: {values_a.get(name)!r} vs {values_b.get(name)!r}"
            for name in sorted(set(values_a) | set(values_b))
            if values_a.get(name) != values_b.get(name)
        ]
    return out


def check(spec) -> None:
    experiment = spec.load_experiment()
    timing = [m.name for m in experiment.metrics if m.timing]
    ours, other = smoke_cells(experiment)
    settings = {
        "A": dict(cells=[other, ours], jobs=1, omp_threads=1),
        "B": dict(cells=[ours], jobs=1, omp_threads=2),
        "C": dict(cells=[other, ours], jobs=1, omp_threads=1, deterministic=False),
    }
    values, walls = {}, {}
    for name, setting in settings.items():
        start = time.perf_counter()
        cells = cells_under(spec.experiment, "smoke", setting.pop("cells"), **setting)
        walls[name] = time.perf_counter() - start
        values[name] = non_timing_values(cells, timing)
        cell_s = {c["system"]: round(c["wall_s"] or 0.0, 1) for c in cells}
        print(f"  {spec.slug} {name}: {walls[name]:.1f} s wall, cells {cell_s}", flush=True)
    for pair in ("AB", "AC"):
        diff = differing(values[pair[0]], values[pair[1]])
        print(f"{spec.slug} {pair[0]} vs {pair[1]}: {'identical' if not diff else f'{len(diff)} differ'}")
        for line in diff:
            print(f"    {line}")
    sys.stdout.flush()


def main(slugs: list[str]) -> int:
    for spec in METHODS:
        if spec.status != "ready" or (slugs and spec.slug not in slugs):
            continue
        try:
            check(spec)
        except Exception as exc:  # one method failing must not hide the others
            print(f"{spec.slug}: error: {type(exc).__name__}: {str(exc)[-400:]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
