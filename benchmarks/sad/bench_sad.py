"""SAD speed: batched candidate execution vs a per-candidate loop, SAD vs SL update, search scaling.

    OMP_NUM_THREADS=1 flock /tmp/cpu.lock .venv/bin/python benchmarks/sad/bench_sad.py [--quick]

1. Execute every candidate statement (1,070) on a program state over 3 examples: one vectorised batch
   (``executor.execute``) vs the interpreter called once per candidate and example.
2. One training update on a batch of 64 step records: SL (``L_sup``) vs SAD (adds sampling, greedy
   decoding and two frozen-synthesizer passes), same model sizes.
3. End-to-end search time per task as the beam grows.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections import defaultdict

import numpy as np
import torch

from neurips26.methods.sad import dsl
from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.checkpoints import WEIGHTS_DIR, load_bundle, model_from
from neurips26.methods.sad.config import SADConfig
from neurips26.methods.sad.executor import CANDIDATES, execute, make_states
from neurips26.methods.sad.models import MAX_SUBGOAL_TOKENS, Decomposer, Synthesizer
from neurips26.methods.sad.policy import sup_and_policy_terms
from neurips26.methods.sad.sampler import sample_tasks, step_records
from neurips26.methods.sad.search import synthesize
from neurips26.methods.sad.training import (
    batch_indices,
    encode_records,
    paired_rewards,
    sad_loss,
    scst_advantage,
    supervised_loss,
    train_sad,
    train_supervised,
)


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


def _update_models() -> tuple[Synthesizer, Decomposer, str]:
    """The committed bundle's synthesizer and SL decomposer (realistic subgoal lengths), else fresh ones."""
    path = WEIGHTS_DIR / "sad_default.pt"
    if path.exists():
        bundle = load_bundle(path)
        return model_from(bundle, "synthesizer"), model_from(bundle, "sl_base"), "committed bundle"
    torch.manual_seed(0)
    return Synthesizer().eval(), Decomposer(), "untrained d=64 (no bundle)"


def bench_updates(repeats: int, steps: int = 5) -> None:
    """SL vs SAD update time, and where a SAD update's extra time goes."""
    data = encode_records(step_records(sample_tasks(np.random.default_rng(1), 200, (1, 2, 3, 4))))
    synth, base, source = _update_models()
    config = SADConfig(steps=steps, batch_size=64)

    def sl() -> None:
        train_supervised(copy.deepcopy(base), data, steps, 64, config.lr)

    def sad() -> None:
        train_sad(copy.deepcopy(base), synth, data, config)

    # interleaved, so that a slow spell of the shared machine hits both; paired ratios per round
    sl(), sad()  # warm-up (first calls allocate)
    sl_times, sad_times = [], []
    for _ in range(max(repeats, 7)):
        sl_times.append(best_of(sl, 1) / steps)
        sad_times.append(best_of(sad, 1) / steps)
    ratios = np.array(sad_times) / np.array(sl_times)
    print(
        f"update (batch 64, {source}, {len(ratios)} interleaved rounds of {steps} updates): SL median "
        f"{1e3 * np.median(sl_times):.0f} ms (best {1e3 * min(sl_times):.0f}), SAD median "
        f"{1e3 * np.median(sad_times):.0f} ms (best {1e3 * min(sad_times):.0f}); ratio of medians "
        f"{np.median(sad_times) / np.median(sl_times):.2f}x, of bests {min(sad_times) / min(sl_times):.2f}x, "
        f"paired ratios {ratios.min():.2f}-{ratios.max():.2f}x (median {np.median(ratios):.2f}x)"
    )
    # the parts of a SAD update on one batch
    dec = copy.deepcopy(base)
    rows = torch.arange(64)
    context = data.decomposer_input(rows)
    generator = torch.Generator().manual_seed(0)
    greedy = torch.arange(128) >= 64
    dec.train()  # as in train_sad (in eval mode nn.TransformerEncoder's padded fast path is slower)
    encoded = dec.encode(context)  # shared with L_sup and the policy terms, not part of the rollouts
    t_gen = best_of(lambda: dec.generate(context, greedy, generator, repeat=2, encoded=encoded), repeats)
    pair = dec.generate(context, greedy, generator, repeat=2, encoded=encoded)
    sc, st = data.context.index(rows), data.statement[rows]
    t_rew = best_of(lambda: paired_rewards(synth, sc, pair[:64], pair[64:], st), repeats)

    @torch.no_grad()
    def two_passes() -> None:  # sample and greedy scored separately, every sample rescored
        for o in (0, 64):
            synth.score(sc, pair[o : o + 64], st)

    t_two = best_of(two_passes, repeats)
    t_old = best_of(
        lambda: _generate_uncached(dec, torch.cat([context, context]), greedy, generator), repeats
    )
    same = float((pair[:64] == pair[64:]).all(1).float().mean())
    print(
        f"  SAD parts: rollouts (sample + greedy, one encoder pass, KV cache, shared packed memory) "
        f"{1e3 * t_gen:.0f} ms (uncached full-prefix decoding: {1e3 * t_old:.0f} ms); frozen-synthesizer "
        f"rewards in one pass {1e3 * t_rew:.0f} ms (two passes: {1e3 * t_two:.0f} ms; {same:.0%} of "
        f"samples equal the greedy decode and are not rescored)"
    )
    _update_parts(dec, synth, data, repeats)


def _best_parts(dec: Decomposer, data, repeats: int, steps: int, forward) -> dict[str, float]:
    """Best-of-``repeats`` wall time per update of each named part. ``forward(model, rows, lap)`` returns
    the loss and calls ``lap(name)`` after each of its parts; backward and Adam are timed here."""
    config = SADConfig(batch_size=64)
    best: dict[str, float] = {}
    for _ in range(repeats):
        parts: dict[str, float] = defaultdict(float)
        model = copy.deepcopy(dec)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        for rows in batch_indices(len(data), 64, steps, 0):
            clock = [time.perf_counter()]

            def lap(name: str, clock: list[float] = clock, parts: dict[str, float] = parts) -> None:
                now = time.perf_counter()
                parts[name] += now - clock[0]
                clock[0] = now

            loss = forward(model, rows, lap)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            lap("backward + step")
        for k, v in parts.items():
            best[k] = min(best.get(k, float("inf")), v / steps)
    return best


def _update_parts(dec: Decomposer, synth: Synthesizer, data, repeats: int, steps: int = 5) -> None:
    """Wall time of each part of a SAD update and of an SL update on the same batches."""
    config = SADConfig(batch_size=64)
    generator = torch.Generator().manual_seed(0)

    def sad(model: Decomposer, rows: torch.Tensor, lap) -> torch.Tensor:
        context, n = data.decomposer_input(rows), len(rows)
        encoded = model.encode(context)
        lap("encode")
        pair = model.generate(context, torch.arange(2 * n) >= n, generator, repeat=2, encoded=encoded)
        lap("rollouts")
        r_s, r_g = paired_rewards(synth, data.context.index(rows), pair[:n], pair[n:], data.statement[rows])
        lap("rewards")
        # as train_sad: one grouped pass (GT subgoal + sample, shared memory K/V)
        sup, logp, entropy = sup_and_policy_terms(model, encoded, data.subgoal_seq[rows], pair[:n])
        loss, _ = sad_loss(sup, logp, entropy, scst_advantage(r_s, r_g), config)
        lap("L_sup + policy decode")
        return loss

    def sl(model: Decomposer, rows: torch.Tensor, lap) -> torch.Tensor:
        context = data.decomposer_input(rows)
        encoded = model.encode(context)
        lap("encode")
        loss = supervised_loss(model, context, data.subgoal_seq[rows], encoded)
        lap("L_sup decode")
        return loss

    for name, forward in (("SAD", sad), ("SL", sl)):
        best = _best_parts(dec, data, repeats, steps, forward)
        listed = ", ".join(f"{k} {1e3 * v:.0f}" for k, v in best.items())
        print(f"  {name} update parts (ms, best of runs): {listed}")


@torch.no_grad()
def _generate_uncached(
    dec: Decomposer, context: torch.Tensor, greedy: torch.Tensor, generator
) -> torch.Tensor:
    """The decoding the package used before the KV cache: the decoder re-run over the whole prefix."""
    memory, pad = dec.encode(context)
    prefix = torch.full((context.shape[0], 1), tok.BOS, dtype=torch.long)
    done = torch.zeros(context.shape[0], dtype=torch.bool)
    for _ in range(MAX_SUBGOAL_TOKENS):
        logits = dec.decode(memory, pad, prefix)[:, -1]
        sampled = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(1)
        nxt = torch.where(greedy, logits.argmax(-1), sampled)
        done = done | (nxt == tok.EOS)
        prefix = torch.cat([prefix, nxt[:, None]], 1)
        if bool(done.all()):
            break
    return prefix


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
    parser.add_argument("--only", choices=("execution", "updates", "search"), default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 2 if args.quick else 5
    if args.only in (None, "execution"):
        bench_execution(repeats)
    if args.only in (None, "updates"):
        bench_updates(2 if args.quick else 3)
    if args.only in (None, "search"):
        bench_search()


if __name__ == "__main__":
    main()
