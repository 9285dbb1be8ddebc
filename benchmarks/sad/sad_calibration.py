"""SAD calibration before RL: the frozen synthesizer's step accuracy given GT subgoals, and whether its
reward ranks GT subgoals above perturbed ones.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sad/sad_calibration.py [--bundle PATH] [--tasks 200]

On held-out tasks of lengths 1-4 (the bundle's data seed + 1, as the bundle builder logs them): top-1 and
top-3 exact match of the GT statement, top-1 *realises* the GT subgoal (an equivalent statement counts),
the share of steps whose top-1 has the GT statement's operation and lambda, the mean CE of the GT
statement; then the reward ``R = log p(GT statement | context, subgoal)`` of the GT subgoal against the
same subgoal with every integer token replaced by a random one (structure kept), and against the greedy
subgoals of the bundle's SL decomposer.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.checkpoints import WEIGHTS_DIR, load_bundle, model_from
from neurips26.methods.sad.executor import CANDIDATES, execute, make_states
from neurips26.methods.sad.sampler import sample_tasks, step_records
from neurips26.methods.sad.training import encode_records, subgoal_reward


def realised(records, top: np.ndarray) -> np.ndarray:
    """``[N]`` bool: candidate ``top[n]`` executed on record ``n``'s state yields its GT subgoal."""
    out = np.zeros(len(records), dtype=bool)
    by_width: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        by_width.setdefault(len(r.state[0]), []).append(i)
    for index in by_width.values():
        res = execute(make_states([records[i].state for i in index]), np.arange(len(index)), top[index])
        for j, i in enumerate(index):
            values = [
                int(res.values[j, e, 0])
                if res.kind[j] == 1
                else tuple(int(v) for v in res.values[j, e, : res.lengths[j, e]])
                for e in range(len(records[i].outputs))
            ]
            out[i] = bool(res.ok[j].all()) and tuple(values) == tuple(records[i].subgoal)
    return out


def equivalents(records) -> np.ndarray:
    """``[N]``: how many type-correct candidate statements realise record ``n``'s GT subgoal on every
    example (1 = the GT statement is the only one; more = an exact-match miss can be a correct answer)."""
    out = np.zeros(len(records), dtype=np.int64)
    by_width: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        by_width.setdefault(len(r.state[0]), []).append(i)
    for index in by_width.values():
        states = make_states([records[i].state for i in index])
        rows, cands = np.nonzero(CANDIDATES.type_mask(states.kinds))
        res = execute(states, rows, cands)
        goal = make_states([[[v] for v in records[i].subgoal] for i in index])
        hit = (
            res.ok.all(1)
            & (res.kind == goal.kinds[rows, 0])
            & (res.lengths == goal.lengths[rows, :, 0]).all(1)
            & (res.values == goal.values[rows, :, 0]).all((1, 2))
        )
        out[index] = np.bincount(rows[hit], minlength=len(index))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", default=str(WEIGHTS_DIR / "sad_default.pt"))
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    bundle = load_bundle(args.bundle)
    spec = bundle["spec"]
    synth = model_from(bundle, "synthesizer")
    tasks = sample_tasks(
        np.random.default_rng(spec["data_seed"] + 1), args.tasks, tuple(spec["train_lengths"])
    )
    records = step_records(tasks)
    data = encode_records(records)
    with torch.no_grad():
        lp = synth.log_probs(data.context, data.subgoal_block)
    top = lp.topk(3, 1).indices.numpy()
    gt = data.statement.numpy()
    print(
        f"synthesizer given GT subgoals, {len(records)} held-out steps ({args.tasks} tasks, lengths "
        f"{spec['train_lengths']}; relation features: {spec.get('relations', False)}): "
        f"top-1 {np.mean(top[:, 0] == gt):.3f}, top-3 {np.mean((top == gt[:, None]).any(1)):.3f}, "
        f"top-1 realises the subgoal {realised(records, top[:, 0]).mean():.3f}, "
        f"top-1 operation+lambda {np.mean(CANDIDATES.function[top[:, 0]] == CANDIDATES.function[gt]):.3f}, "
        f"CE of the GT statement {float(-lp.gather(1, data.statement[:, None]).mean()):.3f} nats"
    )
    count = equivalents(records)
    assert count.min() >= 1, "the GT statement must realise its own subgoal"
    print(
        f"  steps whose GT subgoal several statements realise: {np.mean(count > 1):.3f} "
        f"(mean {count.mean():.2f} realising statements per step; an exact-match top-1 above "
        f"{np.mean(1.0 / np.maximum(count, 1)):.3f} needs more than picking among them at random)"
    )
    generator = torch.Generator().manual_seed(0)
    perturbed = data.subgoal_seq.clone()
    ints = perturbed >= tok.INT0
    perturbed[ints] = torch.randint(tok.INT0, tok.VOCAB_SIZE, (int(ints.sum()),), generator=generator)
    r_gt = subgoal_reward(synth, data.context, data.subgoal_seq, data.statement)
    r_pert = subgoal_reward(synth, data.context, perturbed, data.statement)
    with torch.no_grad():
        greedy = model_from(bundle, "sl_base").generate(data.decomposer_input(), greedy=True)
    r_sl = subgoal_reward(synth, data.context, greedy, data.statement)
    off_gt = (greedy != data.subgoal_seq[:, : greedy.shape[1]]).any(1)
    print(
        f"reward (log p of the GT statement): GT subgoal {float(r_gt.mean()):.2f}, perturbed "
        f"{float(r_pert.mean()):.2f} (GT higher on {float((r_gt > r_pert).float().mean()):.1%} of steps); "
        f"SL decomposer's greedy subgoal {float(r_sl.mean()):.2f}, on the {int(off_gt.sum())} steps where "
        f"it differs from GT {float(r_sl[off_gt].mean()):.2f} vs GT {float(r_gt[off_gt].mean()):.2f}"
    )


if __name__ == "__main__":
    main()
