"""Is the default worker count ever slower than one worker on a small run? (issue #42, item 7)

Runs the smoke profiles of a few cheap methods (all cells recomputed) under each worker mode, each mode in
a fresh interpreter so that no mode inherits another's imports, and prints the wall time of the whole run
and its ratio to one worker:

  jobs=1                    every cell in the driver process
  jobs=2, pool per method   a fresh spawn pool for each method (the harness before issue #42)
  jobs=2, shared pool       one spawn pool reused by every method (``neurips26 run --jobs 2`` now)
  auto                      ``--jobs auto`` (the default): in-process below a minute of budget, else a
                            shared pool of one worker per core

Measured 2026-12-04 on the default slugs (2 cores, load 10-13 from other sessions, so wall times drift
between modes; ``auto`` takes the jobs=1 path here since every smoke budget is under a minute):
  forward order:  jobs=1 1.00x, pool per method 2.25x, shared pool 0.99x, auto 0.57x
  reversed order: jobs=1 1.00x, pool per method 4.38x, shared pool 3.33x, auto 2.70x (tests ran beside)
  forward, quiet: jobs=1 1.00x, pool per method 2.85x, shared pool 1.64x, auto 0.44x
(auto and jobs=1 run the same code; their spread is the load and which mode warms the file cache first.
A pool per method is 2.3-4.4x slower than one process, as issue #42 measured; a shared pool is 1.0-3.3x.)

Usage: PYTHONPATH=src python benchmarks/bench_jobs.py [--reverse] [SLUG ...]
(default slugs: screensearch samhybrid poes; --reverse runs the modes in the opposite order, so that a
drift of the machine's load between modes shows as a difference between the two orders)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

MODES = ("jobs=1", "jobs=2, pool per method", "jobs=2, shared pool", "auto")
DEFAULT_SLUGS = ("screensearch", "samhybrid", "poes")


def run_mode(mode: str, slugs: list[str]) -> float:
    """Run every slug's smoke profile under ``mode`` in this process; the wall time in seconds."""
    from neurips26.bench.pool import CellPool
    from neurips26.bench.runner import run_experiment
    from neurips26.registry import get_spec

    jobs: int | str = {"jobs=1": 1, "auto": "auto"}.get(mode, 2)
    shared = mode in ("jobs=2, shared pool", "auto")
    pool = CellPool(2 if jobs == 2 else max(2, os.cpu_count() or 1)) if shared else None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        for slug in slugs:
            spec = get_spec(slug)
            experiment = spec.load_experiment()
            run_experiment(
                experiment,
                spec.experiment,
                f"{out}/{slug}",
                profile="smoke",
                jobs=jobs,
                pool=pool,
                force=True,
            )
    if pool is not None:
        pool.close()
    return time.perf_counter() - start


def main(args: list[str]) -> int:
    reverse = "--reverse" in args
    slugs = [arg for arg in args if arg != "--reverse"] or list(DEFAULT_SLUGS)
    walls = {}
    for mode in reversed(MODES) if reverse else MODES:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, *slugs], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            print(f"{mode}: failed\n{done.stderr[-2000:]}")
            return 1
        walls[mode] = (json.loads(done.stdout.strip().splitlines()[-1]), time.perf_counter() - start)
        print(
            f"{mode:24s} run {walls[mode][0]:6.1f} s, with interpreter start {walls[mode][1]:6.1f} s",
            flush=True,
        )
    base = walls["jobs=1"][0]
    print(f"\nsmoke profiles of {', '.join(slugs)}; ratio to jobs=1 (lower is faster):")
    for mode in MODES:
        wall = walls[mode][0]
        print(f"  {mode:24s} {wall / base:5.2f}x")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--mode":
        print(json.dumps(run_mode(sys.argv[2], sys.argv[3:])))
        raise SystemExit(0)
    raise SystemExit(main(sys.argv[1:]))
