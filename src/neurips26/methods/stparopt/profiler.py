"""The dynamic branch: instrument every access of a loop at source level, compile with gcc, run.

Each access ``a[e]`` of the profiled loop becomes ``(*STP_ACC(site, kind, &(a[e])))`` (the runtime
header ``runtime/stp_profile.h`` records the address and returns it), and ``STP_ITER()`` opens every
iteration. Many loops are batched into one C file (one gcc call), and binaries are cached on disk by
the hash of their source, so repeated experiments never recompile.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurips26.methods.stparopt.frontend import CFunction, Loop, parse_function
from neurips26.methods.stparopt.programs import ArgSpec, argument_free, argument_setup, validate_args

RUNTIME_DIR = Path(__file__).parent / "runtime"
KIND_CODES = {"read": 0, "write": 1, "update": 2, "rw": 3}


def cache_dir() -> Path:
    """Where compiled binaries are cached (``STPAROPT_CACHE`` or ``~/.cache/neurips26/stparopt``)."""
    path = Path(os.environ.get("STPAROPT_CACHE", Path.home() / ".cache" / "neurips26" / "stparopt"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def runtime_fingerprint() -> str:
    """A hash of the runtime headers: cached binaries are rebuilt when a header changes."""
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(RUNTIME_DIR.glob("*.h")))).hexdigest()


def require_tool(name: str, purpose: str) -> str:
    """The path of ``name``; raises ``RuntimeError`` naming the tool and the step it blocks."""
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"{name} is missing: {purpose} is unavailable (install it, e.g. apt-get install {name})"
        )
    return path


def _rewrite(node: Any, source: bytes, sites: dict[tuple[int, int], tuple[int, int]], body_id: int) -> str:
    """The text of ``node`` with every access site (by start/end bytes) wrapped in STP_ACC and
    ``STP_ITER()`` opening the loop body (node id ``body_id``)."""
    pieces, cursor = [], node.start_byte
    for child in node.children:
        pieces.append(source[cursor : child.start_byte].decode())
        pieces.append(_rewrite(child, source, sites, body_id))
        cursor = child.end_byte
    pieces.append(source[cursor : node.end_byte].decode())
    text = "".join(pieces)
    key = (node.start_byte, node.end_byte)
    if key in sites and node.type in ("subscript_expression", "pointer_expression", "field_expression"):
        site, kind = sites[key]
        text = f"(*STP_ACC({site}, {kind}, &({text})))"
    if node.id == body_id:
        text = (
            "{ STP_ITER();" + text[1:]
            if node.type == "compound_statement"
            else "{ STP_ITER(); " + text + " }"
        )
    return text


def instrument_loop(function: CFunction, loop: Loop, new_name: str) -> str:
    """The function's source renamed to ``new_name`` with loop ``loop`` instrumented."""
    source = function.source
    sites = {(s.start, s.end): (s.site, KIND_CODES[s.kind]) for s in loop.sites}
    text = (
        source[function.node.start_byte : loop.node.start_byte].decode()
        + _rewrite(loop.node, source, sites, loop.body.id)
        + source[loop.node.end_byte : function.node.end_byte].decode()
    )
    return text.replace(f"{function.name}(", f"{new_name}(", 1)


@functools.lru_cache(maxsize=4096)
def _parsed(source: str, function: str) -> CFunction:
    return parse_function(source, function)


@dataclass
class ProfileJob:
    """One run of one instrumented loop on inputs built from ``args`` with trip count ``n`` and ``seed``."""

    key: str
    source: str
    function: str
    loop: int
    args: list[ArgSpec]
    n: int
    seed: int


@dataclass
class LoopProfile:
    """What one or more runs saw: trips, sampled dependence counts (rescaled), per-site statistics."""

    trips: float
    rate: float
    raw: float
    war: float
    waw: float
    min_dist: float  # -1 when no dependence was seen
    sites: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 1
    observed: float = 0.0  # iterations traced (all up to STP_WARM, then bursts)

    @property
    def conflicts(self) -> float:
        return self.raw + self.war + self.waw


def _compile(code: str, flags: tuple[str, ...]) -> Path:
    gcc = require_tool("gcc", "execution profiling")
    digest = hashlib.sha256((code + "\0" + " ".join(flags) + runtime_fingerprint()).encode()).hexdigest()[:24]
    binary = cache_dir() / f"prof_{digest}"
    if binary.exists():
        return binary
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prog.c"
        path.write_text(code)
        out = Path(tmp) / "prog"
        done = subprocess.run(
            [gcc, "-O0", "-w", "-std=gnu11", f"-I{RUNTIME_DIR}", *flags, str(path), "-o", str(out), "-lm"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ValueError(f"gcc could not compile the instrumented loop: {done.stderr.strip()[-600:]}")
        shutil.move(str(out), binary)
    return binary


def build_batch(jobs: list[ProfileJob]) -> tuple[str, list[str]]:
    """One C program with a runner per distinct loop (arguments built from n and seed at run time),
    and the job lines it reads from stdin (``runner n seed key``); ``prog [exhaustive]`` prints one
    JSON line per job. The program depends on the loops only, so labels and profiles share it."""
    runners: dict[tuple[str, str, int, str], int] = {}
    parts = ['#include "stp_inputs.h"', '#include "stp_profile.h"', "#include <math.h>"]
    for job in jobs:
        key = (job.source, job.function, job.loop, repr(job.args))
        if key not in runners:
            number = runners[key] = len(runners)
            parsed = _parsed(job.source, job.function)
            validate_args(parsed.params, job.args)
            parts.append(instrument_loop(parsed, parsed.loops[job.loop], f"stp_fn{number}"))
            setup, call = argument_setup(job.args, "stp_n", "stp_seed")
            parts.append(
                f"static void stp_run{number}(long stp_n, long stp_seed, const char *stp_key) {{\n"
                f"{setup}\nstp_reset();\n"
                f"stp_fn{number}({', '.join(call)});\n"
                f"stp_dump(stdout, stp_key, {len(parsed.loops[job.loop].sites)});\n"
                f"{argument_free(job.args)}\n}}"
            )
    dispatch = "\n".join(f"case {k}: stp_run{k}(n, seed, key); break;" for k in range(len(runners)))
    parts.append(
        "int main(int argc, char **argv) {\n"
        '  if (argc > 1 && !strcmp(argv[1], "exhaustive")) stp_exhaustive = 1;\n'
        "  int runner; long n, seed; char key[128];\n"
        '  while (scanf("%d %ld %ld %127s", &runner, &n, &seed, key) == 4) {\n'
        f"    switch (runner) {{\n{dispatch}\n    }}\n    fflush(stdout);\n  }}\n  return 0;\n}}"
    )
    return "\n\n".join(parts), [
        f"{runners[(j.source, j.function, j.loop, repr(j.args))]} {j.n} {j.seed} {j.key}" for j in jobs
    ]


def run_jobs(
    jobs: list[ProfileJob],
    *,
    exhaustive: bool = False,
    reservoir: int = 32,
    shadow: int = 4096,
    timeout: float = 120.0,
) -> dict[str, dict[str, Any] | None]:
    """Compile (cached) and run ``jobs``; job key -> parsed JSON record (None when that job crashed)."""
    if not jobs:
        return {}
    most_sites = max(len(_parsed(j.source, j.function).loops[j.loop].sites) for j in jobs)
    flags = (
        f"-DSTP_RESERVOIR={reservoir}",
        f"-DSTP_SHADOW={shadow}",
        f"-DSTP_MAX_SITES={max(64, most_sites + 1)}",
    )
    code, lines = build_batch(jobs)
    binary = _compile(code, flags)
    mode = ["exhaustive"] if exhaustive else []
    records: dict[str, dict[str, Any] | None] = {}
    pending = list(range(len(jobs)))
    while pending:  # a crashing job stops the run: record it as None and go on after it
        done = subprocess.run(
            [str(binary), *mode],
            input="\n".join(lines[k] for k in pending) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                records[record["loop"]] = record
        finished = [k for k in pending if jobs[k].key in records]
        if done.returncode == 0 or len(finished) == len(pending):
            break
        crashed = pending[len(finished)]
        records[jobs[crashed].key] = None
        pending = pending[len(finished) + 1 :]
    return records


def merge_records(records: list[dict[str, Any]]) -> LoopProfile:
    """Combine several runs of one loop: counts are rescaled by each run's sampling rate and summed."""
    if not records:
        raise ValueError("records must hold at least one profiling run")
    scale = [1.0 / max(r["rate"], 1e-12) for r in records]
    dists = [r["min_dist"] for r in records if r["min_dist"] >= 0]
    sites = []
    for index in range(len(records[0]["sites"])):
        merged: dict[str, Any] = {}
        for r in records:
            s = r["sites"][index]
            for k in ("count", "span", "sample", "distinct"):
                merged[k] = merged.get(k, 0) + s[k]
            for k in ("kinds", "hist"):
                merged[k] = [x + y for x, y in zip(merged.get(k, [0] * len(s[k])), s[k], strict=True)]
        sites.append(merged)
    return LoopProfile(
        trips=sum(r["trips"] for r in records) / len(records),
        rate=min(r["rate"] for r in records),
        raw=sum(r["raw"] * s for r, s in zip(records, scale, strict=True)),
        war=sum(r["war"] * s for r, s in zip(records, scale, strict=True)),
        waw=sum(r["waw"] * s for r, s in zip(records, scale, strict=True)),
        min_dist=float(min(dists)) if dists else -1.0,
        sites=sites,
        runs=len(records),
        observed=sum(r["observed"] for r in records) / len(records),
    )


def profile_loops(
    items: list[tuple[str, str, int, list[ArgSpec]]],
    *,
    n: int,
    runs: int,
    seed: int,
    reservoir: int = 32,
    shadow: int = 4096,
) -> list[LoopProfile | None]:
    """Profile each ``(source, function, loop index, args)`` ``runs`` times on fresh inputs.

    ``seed`` picks the profiling inputs; callers keep it disjoint from labelling seeds.
    """
    jobs = [
        ProfileJob(f"{k}_{r}", src, fn, loop, args, n, seed * 1000 + r + 17 * k)
        for k, (src, fn, loop, args) in enumerate(items)
        for r in range(runs)
    ]
    records = run_jobs(jobs, reservoir=reservoir, shadow=shadow)
    profiles: list[LoopProfile | None] = []
    for k in range(len(items)):
        got = [records.get(f"{k}_{r}") for r in range(runs)]
        profiles.append(merge_records([g for g in got if g]) if all(got) else None)
    return profiles


def exhaustive_labels(
    items: list[tuple[str, str, int, list[ArgSpec]]], *, n: int, seeds: tuple[int, ...]
) -> list[int]:
    """The exact verdict on labelling inputs: 1 when no run shows a cross-iteration conflict (other
    than commutative updates) and the loop carries no scalar; 0 otherwise."""
    jobs = [
        ProfileJob(f"{k}_{s}", src, fn, loop, args, n, s)
        for k, (src, fn, loop, args) in enumerate(items)
        for s in seeds
    ]
    records = run_jobs(jobs, exhaustive=True)
    labels = []
    for k, (src, fn, loop, _) in enumerate(items):
        carried = _parsed(src, fn).loops[loop].carried_scalars
        conflicts = sum(r["raw"] + r["war"] + r["waw"] for s in seeds if (r := records.get(f"{k}_{s}")))
        labels.append(int(conflicts == 0 and not carried))
    return labels
