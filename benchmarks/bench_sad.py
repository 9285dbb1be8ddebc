"""SAD speed: batched candidate execution vs a per-candidate loop, SAD vs SL update, search scaling.

    OMP_NUM_THREADS=1 flock /tmp/cpu.lock .venv/bin/python benchmarks/bench_sad.py [--quick]

1. Execute every candidate statement (1,070) on a program state over 3 examples: one vectorised batch
   (``executor.execute``) vs the interpreter called once per candidate and example.
2. One training update on a batch of 64 step records: SL (``L_sup``) vs SAD (adds sampling, greedy
   decoding and two frozen-synthesizer passes), same model sizes.
3. End-to-end search time per task as the beam grows.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from neurips26.methods.sad import dsl
from neurips26.methods.sad.config import SADConfig
from neurips26.methods.sad.executor import CANDIDATES, execute, make_states
from neurips26.methods.sad.models import Decomposer, Synthesizer
from neurips26.methods.sad.sampler import sample_tasks, step_records
from neurips26.methods.sad.search import synthesize
from neurips26.methods.sad.training import encode_records, train_sad, train_supervised


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_execution(repeats: int, num_states: int = 64) -> None:
    """All type-correct candidates of ``num_states`` states (as in one search round) in one call."""
    tasks = sample_tasks(np.random.default_rng(0), num_states, (3,))
    traces = [t.trace() for t in tasks]
    width = max(len(t[0]) for t in traces)
    traces = [t for t in traces if len(t[0]) == width]  # one batch needs equal variable counts per state
    states = make_states(traces)
    rows, cands = np.nonzero(CANDIDATES.type_mask(states.kinds))
    batched = best_of(lambda: execute(states, rows, cands), repeats)
    envs = [[{f"x{i}": v for i, v in enumerate(row)} for row in trace] for trace in traces]
    statements = [CANDIDATES.statement(c, "x9") for c in range(len(CANDIDATES))]

    def loop() -> None:
        for r, c in zip(rows, cands, strict=True):
            for env in envs[r]:
                dsl.run_statement(statements[c], env)

    looped = best_of(loop, max(1, repeats // 2))
    n = len(rows)
    print(
        f"execute {n} (state, candidate) rows x 3 examples ({len(traces)} states): batched "
        f"{1e3 * batched:.1f} ms, per-candidate interpreter loop {1e3 * looped:.1f} ms, "
        f"speed-up {looped / batched:.1f}x"
    )


def bench_updates(repeats: int) -> None:
    data = encode_records(step_records(sample_tasks(np.random.default_rng(1), 100, (1, 2, 3, 4))))
    torch.manual_seed(0)
    synth, dec = Synthesizer().eval(), Decomposer()
    sl = best_of(lambda: train_supervised(dec, data, steps=3, batch_size=64), repeats) / 3
    sad = best_of(lambda: train_sad(dec, synth, data, SADConfig(steps=3, batch_size=64)), repeats) / 3
    print(f"update (batch 64, d=64): SL {1e3 * sl:.0f} ms, SAD {1e3 * sad:.0f} ms, ratio {sad / sl:.2f}x")


def bench_search() -> None:
    tasks = sample_tasks(np.random.default_rng(2), 20, (3,))
    torch.manual_seed(0)
    synth, dec = Synthesizer().eval(), Decomposer().eval()
    for beam in (1, 2, 4):
        start = time.perf_counter()
        synthesize(tasks, synth, dec, "decompose", state_beam=beam, subgoal_beam=beam, statement_beam=3)
        per_task = (time.perf_counter() - start) / len(tasks)
        print(f"search, length-3 tasks, state beam = subgoal beam = {beam}: {1e3 * per_task:.0f} ms per task")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 2 if args.quick else 5
    bench_execution(repeats)
    bench_updates(1 if args.quick else 2)
    bench_search()


if __name__ == "__main__":
    main()
