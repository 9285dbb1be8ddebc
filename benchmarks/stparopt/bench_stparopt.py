"""STParOpt speed targets (issue 31), on one core. Not collected by pytest.

1. gated analysis (profile only loops with H_s > tau) vs profiling every loop: wall time (fresh compile
   cache, so gcc is included) and accuracy of both;
2. the static path per loop (parse + graph + GNN) vs Polly's analysis time per loop;
3. the instrumented run vs the plain run at 1e6 iterations (target <= 10x);
4. GNN forward time at 4 graph sizes (target: linear in nodes).

    OMP_NUM_THREADS=1 python benchmarks/stparopt/bench_stparopt.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch


def _time(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def gated_vs_all(n_test: int = 56) -> dict:
    from neurips26.methods.stparopt import profiler
    from neurips26.methods.stparopt.dataset import build_loopset
    from neurips26.methods.stparopt.experiment import STParOptExperimentConfig, _data, _stparopt_model
    from neurips26.methods.stparopt.model import make_batch

    config = STParOptExperimentConfig(n_train=196, n_test=n_test)
    config.method.epochs = 20
    train, _ = _data(config, 0)
    model = _stparopt_model(config, 0, train)
    test = build_loopset(n_test, 99_001, profile_runs=2)
    items = [(p.source, p.function, 0, p.args) for p in test.programs]
    with torch.no_grad():
        start = time.perf_counter()
        static = model(make_batch(test.graphs(with_profiles=False)), use_dynamic=False)
        static_seconds = time.perf_counter() - start
    uncertain = [k for k, h in enumerate(static["entropy"]) if float(h) > model.tau]
    timings = {}
    for name, chosen in (("gated", uncertain), ("all", list(range(len(items))))):
        with tempfile.TemporaryDirectory() as tmp:  # a cold compile cache: gcc time counts
            os.environ["STPAROPT_CACHE"] = tmp
            start = time.perf_counter()
            profiler.profile_loops([items[k] for k in chosen], n=512, runs=2, seed=5) if chosen else None
            timings[name] = static_seconds + time.perf_counter() - start
            os.environ.pop("STPAROPT_CACHE")
    accuracy = {}
    with torch.no_grad():
        for name, mask in (
            ("gated", [k in uncertain for k in range(len(items))]),
            ("all", [True] * len(items)),
        ):
            model.tau = model.tau if name == "gated" else 0.0
            logits = model(make_batch(test.graphs(profiled=mask)))["logits"]
            accuracy[name] = float((logits.argmax(-1) == test.labels).float().mean())
            model.tau = config.method.tau
    return {
        "loops": len(items),
        "profiled_gated": len(uncertain),
        "seconds_gated": timings["gated"],
        "seconds_all": timings["all"],
        "time_ratio": timings["gated"] / timings["all"],
        "accuracy_gated": accuracy["gated"],
        "accuracy_all": accuracy["all"],
    }


def static_vs_polly(n: int = 56) -> dict:
    from neurips26.methods.stparopt.baselines import polly
    from neurips26.methods.stparopt.frontend import parse_function
    from neurips26.methods.stparopt.loopgen import generate_dataset
    from neurips26.methods.stparopt.model import StaticGNN, make_batch
    from neurips26.methods.stparopt.pipeline import example_graph

    programs = generate_dataset(n, 31_337)
    model = StaticGNN().eval()

    def static_path() -> None:
        graphs = []
        for p in programs:
            f = parse_function(p.source)
            graphs.append(example_graph(f, f.loops[0], None))
        with torch.no_grad():
            model(make_batch(graphs))

    ours = _time(static_path) / n
    single = []
    for p in programs[:6]:  # Polly on one loop at a time: clang + 2 opt calls per loop
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["STPAROPT_CACHE"] = tmp
            start = time.perf_counter()
            polly([p.source], [p.function])
            single.append(time.perf_counter() - start)
            os.environ.pop("STPAROPT_CACHE")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["STPAROPT_CACHE"] = tmp
        _, batch_seconds = polly([p.source for p in programs], [p.function for p in programs])
        os.environ.pop("STPAROPT_CACHE")
    return {
        "static_ms_per_loop": 1000 * ours,
        "polly_ms_per_loop_single": 1000 * statistics.median(single),
        "polly_ms_per_loop_batched": 1000 * batch_seconds / n,
    }


def instrumented_vs_plain(n: int = 1_000_000) -> dict:
    from neurips26.methods.stparopt.frontend import parse_function
    from neurips26.methods.stparopt.profiler import RUNTIME_DIR, instrument_loop
    from neurips26.methods.stparopt.programs import ArgSpec, argument_setup

    cases = {
        "map": (
            "void f(int n, float *a, const float *b, const float *c) "
            "{ for (int i = 0; i < n; i++) a[i] = b[i] * 2.0f + c[i]; }",
            [
                ArgSpec("n", "int", "size"),
                ArgSpec("a", "float", "array"),
                ArgSpec("b", "float", "array"),
                ArgSpec("c", "float", "array"),
            ],
        ),
        "scan": (
            "void f(int n, float *a, const float *b) { for (int i = 0; i < n; i++) a[i + 1] = a[i] + b[i]; }",
            [
                ArgSpec("n", "int", "size"),
                ArgSpec("a", "float", "array", pad=1),
                ArgSpec("b", "float", "array"),
            ],
        ),
        "scatter": (
            "void f(int n, float *a, const int *idx, const float *b) "
            "{ for (int i = 0; i < n; i++) a[idx[i]] += b[i]; }",
            [
                ArgSpec("n", "int", "size"),
                ArgSpec("a", "float", "array"),
                ArgSpec("idx", "int", "repeats"),
                ArgSpec("b", "float", "array"),
            ],
        ),
    }
    out = {}
    for name, (source, args) in cases.items():
        parsed = parse_function(source)
        setup, call = argument_setup(args, n, 1)
        body = instrument_loop(parsed, parsed.loops[0], "g")
        code = (
            '#include "stp_inputs.h"\n#include "stp_profile.h"\n#include <time.h>\n'
            + body
            + "\nint main(void) {\n"
            + setup
            + "\nstp_reset();\nstruct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);\n"
            + f"g({', '.join(call)});\nclock_gettime(CLOCK_MONOTONIC, &t1);\n"
            + 'printf("%.9f\\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));\nreturn 0;\n}\n'
        )
        seconds = {}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "b.c"
            path.write_text(code)
            for mode, flags in (("plain", ["-DSTP_PLAIN"]), ("instrumented", [])):
                binary = Path(tmp) / mode
                subprocess.run(
                    ["gcc", "-O2", "-w", f"-I{RUNTIME_DIR}", *flags, str(path), "-o", str(binary), "-lm"],
                    check=True,
                )
                runs = [
                    float(subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout)
                    for _ in range(3)
                ]
                seconds[mode] = min(runs)
        out[name] = {**seconds, "ratio": seconds["instrumented"] / seconds["plain"]}
    return out


def gnn_linear() -> dict:
    from neurips26.methods.stparopt.frontend import parse_function
    from neurips26.methods.stparopt.model import StaticGNN, make_batch
    from neurips26.methods.stparopt.pipeline import example_graph

    model = StaticGNN().eval()
    rows = []
    for statements in (4, 16, 64, 256):
        body = " ".join(f"a[i] = a[i] + b[i + {k % 7}] * {k}.0f;" for k in range(statements))
        source = f"void f(int n, float *a, const float *b) {{ for (int i = 0; i < n; i++) {{ {body} }} }}"
        f = parse_function(source)
        graph = example_graph(f, f.loops[0], None)
        batch = make_batch([graph])
        with torch.no_grad():
            seconds = _time(lambda b=batch: model(b), repeats=5)
        rows.append(
            {
                "statements": statements,
                "nodes": graph.num_nodes,
                "edges": int(graph.edge_index.shape[1]),
                "ms": 1000 * seconds,
                "us_per_node": 1e6 * seconds / graph.num_nodes,
            }
        )
    return {"sizes": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {
        "instrumented_vs_plain_1e6": instrumented_vs_plain(),
        "gnn_linear": gnn_linear(),
        "static_vs_polly": static_vs_polly(),
        "gated_vs_all": gated_vs_all(),
    }
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
