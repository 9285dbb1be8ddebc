"""SP-CACW speed: the weight solve at 8/32/128/512 peers, a round against a FedAvg round, 200 digits rounds.

Run: ``/work/notes/cpurun .venv/bin/python benchmarks/spcacw/bench_spcacw.py`` (one core, in-process, never
through Ray). ``--quick`` runs fewer repeats.

Rounds are timed interleaved (FedAvg, SP-CACW, ... in turn), each run of 200 rounds several times, and the
minimum is kept: the machine is shared, and the minimum is the least disturbed run. Two FedAvg rounds
are timed: the baseline of the experiment (``baselines.run_baseline("fedavg")``: every client steps from
the global model, the server averages the models) and a lean one written for this benchmark (one
sample-weighted average of the gradients, ``theta <- theta - eta sum_i p_i g_i`` in one call), the
fastest FedAvg round this engine can run at one local step. Both use the same minibatch sampler and the
same gradient kernel as SP-CACW.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from neurips26.methods.spcacw import SPCACWConfig, choose_weights
from neurips26.methods.spcacw.baselines import BaselineConfig, run_baseline
from neurips26.methods.spcacw.batched import batch_weights
from neurips26.methods.spcacw.engine import FlatMLP, run_weighted, weighted_accuracy
from neurips26.methods.spcacw.federated import ClientData, digits_federation


def time_solve(n: int, form: str, solver: str, repeats: int) -> float:
    """Seconds per ``choose_weights`` call (one target, validation included) for ``n`` clients."""
    rng = np.random.default_rng(n)
    variance = rng.uniform(0.1, 2.0, n)
    bias = rng.uniform(0.0, 1.0, n) ** 2
    bias[0] = 0.0
    choose_weights(variance, bias, scale=1.0, bias_form=form, solver=solver)
    start = time.perf_counter()
    for _ in range(repeats):
        choose_weights(variance, bias, scale=1.0, bias_form=form, solver=solver)
    return (time.perf_counter() - start) / repeats


def time_round_kernel(n: int, targets: int, compiled: bool, repeats: int) -> float:
    """Seconds per bookkeeping step of the engine (estimates, exact linear solve, update), T targets."""
    from neurips26.methods.spcacw.batched import BiasEstimators
    from neurips26.methods.spcacw.kernels import linear_round

    rng = np.random.default_rng(n)
    est = BiasEstimators(n, np.arange(targets) % n, 0.9)  # 16 targets of 8 clients: each one twice
    d, s = rng.uniform(0, 1, (targets, n)), rng.uniform(0.1, 2, (targets, n))
    valid = np.ones((targets, n), bool)

    def step() -> None:
        if compiled:
            e = est
            linear_round(
                e.distance, e.noise, e.weight, e.spread, e.spread_weight, e.targets, d, s, True, valid,
                e.decay, 1.0, False,
            )  # fmt: skip
        else:
            variance, bias = est.variance(), est.estimate()
            batch_weights(variance, bias, 1.0, "linear")
            est.update(d, s, valid, variance)

    step()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def fedavg_lean(
    data: ClientData, model: FlatMLP, lr: float, rounds: int, batch: int, seed: int
) -> torch.Tensor:
    """FedAvg at one local step as lean as this engine allows: one gradient pass and one fused update."""
    generator = torch.Generator().manual_seed(seed)
    theta = model.init(1, generator)[0]
    counts = data.count.double()
    weights = (counts / counts.sum()).float()
    for _ in range(rounds):
        x, y = data.sample_batch(batch, generator)
        g, _ = model.gradient_and_variance(theta.expand(data.n_clients, -1), x, y, 1)
        theta = torch.addmv(theta, g.T, weights, alpha=-lr)
    weighted_accuracy(model, theta[None], data, [0])  # the evaluation the other runs end with
    return theta


def time_rounds(rounds: int, hidden: int, repeats: int, all_targets: bool) -> dict[str, float]:
    """Seconds per round (minimum over interleaved repeats) and the solve share of the SP-CACW runs."""
    data = digits_federation(seed=0)
    model = FlatMLP((64, hidden, 10))
    config = SPCACWConfig()
    common = {"rounds": rounds, "batch": 32, "seed": 0, "eval_every": rounds}
    runs: dict[str, Callable] = {
        "fedavg (experiment baseline)": lambda: run_baseline(
            BaselineConfig("fedavg"), data, model, lr=config.lr, local_steps=1, targets=[0], **common
        ),
        "fedavg (lean)": lambda: fedavg_lean(data, model, config.lr, rounds, 32, 0),
        "spcacw (1 target)": lambda: run_weighted(data, model, config, targets=[0], **common),
        "spcacw (1 target, numpy bookkeeping)": lambda: run_weighted(
            data, model, config, targets=[0], compiled=False, **common
        ),
        "spcacw (1 target, s every round)": lambda: run_weighted(
            data, model, replace(config, variance_every=1), targets=[0], **common
        ),
    }
    if all_targets:
        runs["spcacw (16 targets)"] = lambda: run_weighted(data, model, config, **common)
    best = dict.fromkeys(runs, float("inf"))
    share: dict[str, float] = {}
    for fn in runs.values():
        fn()  # warm-up (and numba's compile or cache load)
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            if elapsed < best[name]:
                best[name] = elapsed
                if hasattr(result, "solve_seconds"):
                    share[name] = result.solve_seconds / elapsed
    return {"seconds": {k: v / rounds for k, v in best.items()}, "share": share, "total": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 5 if args.quick else 11
    print("weight solve, ms per call (one target; choose_weights validates its input)")
    print(f"{'peers':>6} {'exact/linear':>13} {'exact/squared':>14} {'osqp/linear':>12} {'osqp/squared':>13}")
    pairs = [(s, f) for s in ("exact", "osqp") for f in ("linear", "squared")]
    for n in (8, 32, 128, 512):
        row = [time_solve(n, f, s, 200 if s == "exact" else 3) * 1e3 for s, f in pairs]
        print(f"{n:>6} {row[0]:>13.3f} {row[1]:>14.3f} {row[2]:>12.2f} {row[3]:>13.2f}")
    print("\nengine bookkeeping per round (estimates + exact linear solve + update), us")
    print(f"{'peers':>6} {'compiled, 1 target':>19} {'numpy, 1 target':>16} {'compiled, 16 targets':>21}")
    for n in (8, 32, 128, 512):
        row = [time_round_kernel(n, t, c, 2000) * 1e6 for c, t in ((True, 1), (False, 1), (True, 16))]
        print(f"{n:>6} {row[0]:>19.1f} {row[1]:>16.1f} {row[2]:>21.1f}")
    for hidden in (32, 256):
        print(f"\ndigits round, MLP 64-{hidden}-10, 16 clients, batch 32, best of {repeats} runs of 200")
        out = time_rounds(200, hidden, repeats, all_targets=hidden <= 64)
        base, lean = out["seconds"]["fedavg (experiment baseline)"], out["seconds"]["fedavg (lean)"]
        for name, value in out["seconds"].items():
            solve = f"solve share {out['share'][name]:.3f}" if name in out["share"] else ""
            ratios = f"x{value / base:5.2f} baseline  x{value / lean:5.2f} lean"
            print(f"  {name:<40} {value * 1e3:7.3f} ms  {ratios}  {solve}")
        for name in ("spcacw (1 target)", "spcacw (16 targets)"):
            if name in out["total"]:
                print(f"  200 rounds of {name}: {out['total'][name]:.2f} s")


if __name__ == "__main__":
    main()
