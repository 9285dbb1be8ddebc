"""End-to-end search: decomposer beam -> synthesizer beam -> execute -> repeat, batched over tasks.

Each live hypothesis is a program state (all variables on every example). One round: the decomposer
proposes its ``subgoal_beam`` best next subgoals for every hypothesis (or the GT subgoal for the oracle,
or none for the no-decomposition synthesizer, which reads the task output instead; ``kbest`` decoding
takes the GT subgoal whenever it is among the decomposer's ``subgoal_beam`` best, with the beam's best
score, and the decomposer's own beam otherwise: perfect ranking within the beam's coverage); the synthesizer
scores every candidate statement for each (state, subgoal) and keeps its ``statement_beam`` best; all
kept statements execute in one vectorised batch. A task is solved as soon as a new variable equals the
task's outputs on every example. Hypotheses are ranked by summed log-probabilities and the best
``state_beam`` distinct states per task survive. At most ``length + 1`` rounds (ExeDec's budget).

The enumerative baseline (:func:`enumerative_search`) spends the same number of statement executions
without any model: breadth-first over type-correct statements, pruning failed and redundant ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.executor import (
    CANDIDATES,
    KIND_INT,
    StateBatch,
    append_results,
    execute,
    make_states,
    redundant,
)
from neurips26.methods.sad.models import Decomposer, SynthContext, Synthesizer
from neurips26.methods.sad.sampler import Task

MODES = ("decompose", "kbest", "no_decomposition", "oracle")


@dataclass
class SearchResult:
    """Per task: ``solved``, the number of rounds used and of statements executed; plus per-round logs."""

    solved: np.ndarray
    rounds: np.ndarray
    executions: np.ndarray
    programs: list[list[int] | None] = field(default_factory=list)


def state_contexts(states: StateBatch, width: int) -> SynthContext:
    """Tokenise every state of a batch (the synthesizer's context)."""
    n, e = states.kinds.shape[0], states.num_examples
    state = np.zeros((n, e, width), dtype=np.int64)
    count = states.num_variables()
    for b in range(n):
        rows = [[states.value(b, ex, v) for v in range(count[b])] for ex in range(e)]
        state[b] = tok.state_tokens(rows, width)
    return SynthContext(torch.as_tensor(state), torch.as_tensor(states.kinds.copy()))


def _targets(tasks: list[Task]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    out = make_states([[[o] for o in t.outputs] for t in tasks])
    return out.values[:, :, 0], out.lengths[:, :, 0], out.kinds[:, 0]


def _gt_subgoal_tokens(task: Task, step: int) -> list[int] | None:
    if step >= len(task.program):
        return None
    n_in = len(task.program.inputs)
    return tok.subgoal_tokens(tuple(row[n_in + step] for row in task.trace()))


def _gt_if_in_beam(
    subgoals: torch.Tensor, sub_lp: torch.Tensor, tasks: list[Task], step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """k-best decoding: rows whose beam ``[H, K, L]`` holds the GT subgoal of ``step`` use only it (every
    beam slot, with the beam's best log-probability); other rows keep the decomposer's beam."""
    subgoals, sub_lp = subgoals.clone(), sub_lp.clone()
    for h, task in enumerate(tasks):
        gt = _gt_subgoal_tokens(task, step)
        if gt is None or len(gt) > subgoals.shape[2]:
            continue
        row = torch.full((subgoals.shape[2],), tok.PAD, dtype=torch.long)
        row[: len(gt)] = torch.as_tensor(gt)
        if bool((subgoals[h] == row).all(1).any()):
            subgoals[h] = row
            sub_lp[h] = sub_lp[h].max()
    return subgoals, sub_lp


def synthesize(
    tasks: list[Task],
    synthesizer: Synthesizer,
    decomposer: Decomposer | None = None,
    mode: str = "decompose",
    state_beam: int = 2,
    subgoal_beam: int = 2,
    statement_beam: int = 3,
    extra_rounds: int = 1,
) -> SearchResult:
    """Run the end-to-end search on ``tasks`` (see the module doc); all tasks share one batch."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode in ("decompose", "kbest") and decomposer is None:
        raise ValueError(f"mode={mode!r} needs a decomposer")
    for name, value in (
        ("state_beam", state_beam),
        ("subgoal_beam", subgoal_beam),
        ("statement_beam", statement_beam),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    num_examples = {len(t.inputs) for t in tasks}
    if len(num_examples) != 1:
        raise ValueError(f"all tasks need the same number of examples, got {sorted(num_examples)}")
    n_tasks = len(tasks)
    max_rounds = np.array([len(t.program) + extra_rounds for t in tasks])
    target_values, target_lengths, target_kind = _targets(tasks)
    out_block = torch.as_tensor(np.stack([tok.target_block(t.outputs) for t in tasks]))
    states = make_states([[list(ins) for ins in t.inputs] for t in tasks])
    owner = np.arange(n_tasks)
    scores = np.zeros(n_tasks)
    solved = np.zeros(n_tasks, dtype=bool)
    rounds = np.zeros(n_tasks, dtype=np.int64)
    executions = np.zeros(n_tasks, dtype=np.int64)
    width = tok.state_width(int(max_rounds.max()) + 2 + 1)
    for step in range(int(max_rounds.max())):
        live = ~solved[owner] & (step < max_rounds[owner]) & (states.num_variables() < 10)
        if not live.any():
            break
        states, owner, scores = states.take(np.nonzero(live)[0]), owner[live], scores[live]
        rounds[np.unique(owner)] = step + 1
        context = state_contexts(states, width)
        with torch.no_grad():
            if mode in ("decompose", "kbest"):
                dec_in = torch.cat([context.state, out_block[owner]], 2)
                subgoals, sub_lp = decomposer.beam_search(dec_in, subgoal_beam)  # [H, K, L]
                if mode == "kbest":
                    subgoals, sub_lp = _gt_if_in_beam(subgoals, sub_lp, [tasks[o] for o in owner], step)
                k = subgoals.shape[1]
                target = tok.chunk_subgoal_tokens(
                    subgoals.reshape(-1, subgoals.shape[2]), states.num_examples
                )
                sub_lp = sub_lp.reshape(-1).numpy()
            elif mode == "oracle":
                k = 1
                seqs = [_gt_subgoal_tokens(tasks[o], step) or [tok.EOS] for o in owner]
                padded = torch.full((len(seqs), max(map(len, seqs))), tok.PAD, dtype=torch.long)
                for i, s in enumerate(seqs):
                    padded[i, : len(s)] = torch.as_tensor(s)
                target = tok.chunk_subgoal_tokens(padded, states.num_examples)
                sub_lp = np.zeros(len(owner))
            else:
                k = 1
                target = out_block[owner]
                sub_lp = np.zeros(len(owner))
            hyp = np.repeat(np.arange(len(owner)), k)
            lp = synthesizer.log_probs(context.index(torch.as_tensor(hyp)), target)
            top_lp, top_c = lp.topk(min(statement_beam, lp.shape[1]), dim=1)
        top_lp, top_c = top_lp.numpy(), top_c.numpy()
        valid = np.isfinite(top_lp)
        rows_h = np.repeat(hyp, top_c.shape[1])[valid.reshape(-1)]
        rows_sub = np.repeat(np.arange(len(hyp)), top_c.shape[1])[valid.reshape(-1)]
        cand = top_c.reshape(-1)[valid.reshape(-1)]
        total = scores[rows_h] + sub_lp[rows_sub] + top_lp.reshape(-1)[valid.reshape(-1)]
        # one execution per distinct (state, statement): several subgoals may pick the same statement
        key = rows_h * len(CANDIDATES) + cand
        uniq, first = np.unique(key, return_index=True)
        best = np.full(len(uniq), -np.inf)
        np.maximum.at(best, np.searchsorted(uniq, key), total)
        rows_h, cand, total = rows_h[first], cand[first], best
        results = execute(states, rows_h, cand)
        np.add.at(executions, owner[rows_h], 1)
        ok = results.ok.all(-1) & ~redundant(states, rows_h, results)
        hit = (
            ok
            & (results.values == target_values[owner[rows_h]]).all((-1, -2))
            & (results.lengths == target_lengths[owner[rows_h]]).all(-1)
            & (results.kind == target_kind[owner[rows_h]])
        )
        solved[owner[rows_h[hit]]] = True
        keep = np.nonzero(ok & ~hit & ~solved[owner[rows_h]])[0]
        if len(keep) == 0:
            states = states.take(np.zeros(0, dtype=np.int64))
            owner, scores = owner[:0], scores[:0]
            continue
        # best `state_beam` distinct new states per task
        order = keep[np.lexsort((-total[keep], owner[rows_h[keep]]))]
        chosen, seen, count = [], set(), {}
        for i in order:
            t = owner[rows_h[i]]
            if count.get(t, 0) >= state_beam:
                continue
            state_sig = (
                t,
                states.values[rows_h[i]].tobytes(),
                results.values[i].tobytes(),
                results.lengths[i].tobytes(),
                int(results.kind[i]),
            )
            if state_sig in seen:
                continue
            seen.add(state_sig)
            count[t] = count.get(t, 0) + 1
            chosen.append(i)
        chosen = np.array(chosen, dtype=np.int64)
        sub = type(results)(
            results.values[chosen], results.lengths[chosen], results.kind[chosen], results.ok[chosen]
        )
        states = append_results(states, rows_h[chosen], sub)
        owner, scores = owner[rows_h[chosen]], total[chosen]
    return SearchResult(solved, rounds, executions)


def enumerative_search(
    tasks: list[Task], budget: np.ndarray | int, extra_rounds: int = 1, frontier_cap: int = 64, seed: int = 0
) -> SearchResult:
    """DeepCoder-style enumerative baseline (re-implemented): breadth-first over type-correct statements
    in a random order, executing at most ``budget`` statements per task (same unit as :func:`synthesize`).
    At most ``frontier_cap`` states per task survive a round (a uniform random subset)."""
    rng = np.random.default_rng(seed)
    budgets = np.broadcast_to(np.asarray(budget), (len(tasks),)).astype(np.int64)
    solved = np.zeros(len(tasks), dtype=bool)
    rounds = np.zeros(len(tasks), dtype=np.int64)
    executions = np.zeros(len(tasks), dtype=np.int64)
    for i, task in enumerate(tasks):
        target = make_states([[[o] for o in task.outputs]])
        states = make_states([[list(ins) for ins in task.inputs]])
        for step in range(len(task.program) + extra_rounds):
            left = budgets[i] - executions[i]
            if left <= 0 or len(states.kinds) == 0:
                break
            rounds[i] = step + 1
            mask = CANDIDATES.type_mask(states.kinds)
            h, c = np.nonzero(mask)
            perm = rng.permutation(len(h))[:left]
            h, c = h[perm], c[perm]
            res = execute(states, h, c)
            executions[i] += len(h)
            ok = res.ok.all(-1) & ~redundant(states, h, res)
            hit = (
                ok
                & (res.values == target.values[0, :, 0]).all((-1, -2))
                & (res.lengths == target.lengths[0, :, 0]).all(-1)
                & (res.kind == target.kinds[0, 0])
            )
            if hit.any():
                solved[i] = True
                break
            keep = np.nonzero(ok)[0]
            if step + 1 >= len(task.program) + extra_rounds or states.num_variables().max() >= 9:
                break
            keep = rng.permutation(keep)[:frontier_cap]
            sub = type(res)(res.values[keep], res.lengths[keep], res.kind[keep], res.ok[keep])
            states = append_results(states, h[keep], sub)
    return SearchResult(solved, rounds, executions)


def is_int_kind(kind: int) -> bool:
    return kind == KIND_INT
