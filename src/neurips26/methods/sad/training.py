"""Training: the synthesizer and SL decomposer (supervised), and SAD fine-tuning (``train_sad``).

SAD (Solver-Aware Decomposition) keeps supervised training on GT subgoals as a scaffold and adds direct
feedback from a frozen synthesizer::

    L = w_sup * L_sup + w_rl * L_RL - lambda * H(pi_theta)
    L_sup = CE(GT subgoal tokens)                        (token mean, EOS included)
    R(O)  = -CE_synth(GT statement | context, O) = log p_synth(GT | context, O)
    A_i   = R(O_i^sample) - R(O_i^greedy);  A_i <- A_i - mean_j A_j      (SCST, centred)
    L_RL  = -mean_i A_i * log pi(O_i^sample)
    H     = mean_i (mean over generated steps of the policy's entropy)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.config import SADConfig
from neurips26.methods.sad.models import (
    MAX_SUBGOAL_TOKENS,
    Decomposer,
    SolverScorer,
    SynthContext,
    Synthesizer,
)
from neurips26.methods.sad.policy import grouped_teacher_forced_logits, sup_and_policy_terms
from neurips26.methods.sad.sampler import StepRecord


@dataclass
class StepTensors:
    """Single-step records as tensors: the synthesizer context, the task outputs' target block
    ``[N, E, 9]``, the GT subgoal's target block ``[N, E, 9]`` and decoder sequence ``[N, L]``, and the
    GT statement's candidate index ``[N]``."""

    context: SynthContext
    outputs: torch.Tensor
    subgoal_block: torch.Tensor
    subgoal_seq: torch.Tensor
    statement: torch.Tensor

    def __len__(self) -> int:
        return len(self.statement)

    def decomposer_input(self, rows: torch.Tensor | slice = slice(None)) -> torch.Tensor:
        """``[N, E, S + 9]``: each example's state followed by ``OUT`` and its output."""
        return torch.cat([self.context.state[rows], self.outputs[rows]], dim=2)

    def index(self, rows: torch.Tensor) -> StepTensors:
        return StepTensors(
            self.context.index(rows),
            self.outputs[rows],
            self.subgoal_block[rows],
            self.subgoal_seq[rows],
            self.statement[rows],
        )


def encode_records(records: list[StepRecord], width: int | None = None) -> StepTensors:
    """Tensors for ``records``; ``width`` is the state token width (default: the widest state)."""
    if not records:
        raise ValueError("records must not be empty")
    num_examples = len(records[0].outputs)
    if any(len(r.outputs) != num_examples or len(r.state) != num_examples for r in records):
        raise ValueError("every record needs the same number of examples")
    if width is None:
        width = tok.state_width(max(len(r.state[0]) for r in records))
    n = len(records)
    state = np.zeros((n, num_examples, width), dtype=np.int64)
    kinds = np.zeros((n, 10), dtype=np.int64)
    outputs = np.zeros((n, num_examples, 1 + tok.TARGET_TOKENS), dtype=np.int64)
    sub_block = np.zeros_like(outputs)
    sub_seq = np.zeros((n, MAX_SUBGOAL_TOKENS), dtype=np.int64)
    for i, r in enumerate(records):
        state[i] = tok.state_tokens(r.state, width)
        kinds[i, : len(r.state[0])] = [1 if isinstance(v, int) else 2 for v in r.state[0]]
        outputs[i] = tok.target_block(r.outputs)
        sub_block[i] = tok.target_block(r.subgoal)
        seq = tok.subgoal_tokens(r.subgoal)
        sub_seq[i, : len(seq)] = seq
    t = torch.as_tensor
    return StepTensors(
        SynthContext(t(state), t(kinds)),
        t(outputs),
        t(sub_block),
        t(sub_seq),
        t(np.array([r.statement for r in records])),
    )


def batch_indices(n: int, batch_size: int, steps: int, seed: int) -> Iterator[torch.Tensor]:
    """``steps`` mini-batches of indices, epochs reshuffled by a generator seeded with ``seed``."""
    if n < 1:
        raise ValueError("the training set is empty")
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=generator)
    cursor = 0
    for _ in range(steps):
        if cursor + batch_size > n:
            order = torch.randperm(n, generator=generator)
            cursor = 0
        yield order[cursor : cursor + min(batch_size, n)]
        cursor += batch_size


@dataclass
class History:
    """Per-step training log (losses and, for SAD, rewards), plus the wall time."""

    rows: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0

    def mean(self, key: str, last: int = 50) -> float:
        values = [r[key] for r in self.rows[-last:] if key in r]
        return float(np.mean(values)) if values else float("nan")


def train_synthesizer(
    model: Synthesizer,
    data: StepTensors,
    target: str = "subgoal",
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
    cosine: bool = False,
) -> History:
    """Supervised CE of the GT statement given the state and the GT subgoal (``target="subgoal"``) or
    the task output (``target="output"``, the no-decomposition baseline); ``cosine`` decays the learning
    rate from ``lr`` to 0 over the run (half a cosine)."""
    if target not in ("subgoal", "output"):
        raise ValueError(f"target must be 'subgoal' or 'output', got {target!r}")
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1.0 + math.cos(math.pi * min(s, steps) / steps)) if cosine else 1.0
    )
    history = History()
    start = time.perf_counter()
    model.train()
    for step, rows in enumerate(batch_indices(len(data), batch_size, steps, seed)):
        block = (data.subgoal_block if target == "subgoal" else data.outputs)[rows]
        lp = model.log_probs(data.context.index(rows), block)
        loss = -lp.gather(1, data.statement[rows, None]).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        history.rows.append({"loss": float(loss.detach())})
        if on_step:
            on_step(step)
    model.eval()
    history.seconds = time.perf_counter() - start
    return history


def supervised_loss(
    decomposer: Decomposer,
    context: torch.Tensor,
    target: torch.Tensor,
    encoded: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``L_sup``: token-mean cross-entropy of the GT subgoal sequence (EOS included, PAD ignored);
    ``encoded`` reuses the decomposer's encoding of ``context``. The decoder attends to the memory's
    live positions only (:func:`.policy.grouped_teacher_forced_logits`; ``teacher_forced_logits`` over
    the padded memory equals it to float rounding), the same pass SAD's fused update runs."""
    memory, pad = decomposer.encode(context) if encoded is None else encoded
    logits = grouped_teacher_forced_logits(decomposer, memory, pad, target[:, None])[:, 0]
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=tok.PAD)


def train_supervised(
    decomposer: Decomposer,
    data: StepTensors,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    grad_clip: float = 1.0,
    on_step: Callable[[int], None] | None = None,
) -> History:
    """The solver-blind decomposer (ExeDec's recipe): minimise ``L_sup`` only."""
    optimizer = torch.optim.Adam(decomposer.parameters(), lr=lr)
    history = History()
    start = time.perf_counter()
    decomposer.train()
    for step, rows in enumerate(batch_indices(len(data), batch_size, steps, seed)):
        loss = supervised_loss(decomposer, data.decomposer_input(rows), data.subgoal_seq[rows])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decomposer.parameters(), grad_clip)
        optimizer.step()
        history.rows.append({"loss": float(loss.detach()), "sup": float(loss.detach())})
        if on_step:
            on_step(step)
    decomposer.eval()
    history.seconds = time.perf_counter() - start
    return history


def scst_advantage(
    reward_sample: torch.Tensor, reward_greedy: torch.Tensor, center: bool = True
) -> torch.Tensor:
    """``A = R(sample) - R(greedy)``, centred over the batch when ``center`` (no std scaling)."""
    advantage = reward_sample - reward_greedy
    return advantage - advantage.mean() if center else advantage


def sad_loss(
    sup: torch.Tensor,
    logp_sample: torch.Tensor,
    entropy: torch.Tensor,
    advantage: torch.Tensor,
    config: SADConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``L = w_sup L_sup + w_rl L_RL - lambda H`` with ``L_RL = -mean(A * log pi(sample))``; returns
    ``(L, L_RL)``. ``advantage`` carries no gradient."""
    rl = -(advantage.detach() * logp_sample).mean()
    return config.sup_weight * sup + config.rl_weight * rl - config.entropy_coef * entropy.mean(), rl


def subgoal_reward(
    solver: SolverScorer, context: SynthContext, subgoal: torch.Tensor, statement: torch.Tensor
) -> torch.Tensor:
    """``R(O) = -CE_synth(GT statement | context, O)`` under the frozen solver (no gradient; computed in
    inference mode, returned as an ordinary tensor)."""
    with torch.inference_mode():
        reward = solver.score(context, subgoal, statement)
    return reward.clone()


def paired_rewards(
    solver: SolverScorer,
    context: SynthContext,
    sample: torch.Tensor,
    greedy: torch.Tensor,
    statement: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards of the sampled and the greedy subgoals ``[N, T]`` in **one** frozen-solver pass (no
    gradient): the greedy decodes plus only those samples that differ from their row's greedy decode (an
    equal sample has the equal reward, so it is not scored twice)."""
    differs = (sample != greedy).any(1)
    extra = torch.nonzero(differs).squeeze(1)
    rows = torch.cat([torch.arange(len(greedy)), extra])
    subgoals = torch.cat([greedy, sample[extra]])
    rewards = subgoal_reward(solver, context.index(rows), subgoals, statement[rows])
    reward_greedy = rewards[: len(greedy)]
    reward_sample = reward_greedy.clone()
    reward_sample[extra] = rewards[len(greedy) :]
    return reward_sample, reward_greedy


def train_sad(
    decomposer: Decomposer,
    solver: SolverScorer,
    data: StepTensors,
    config: SADConfig | None = None,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
    fused: bool = True,
) -> History:
    """Fine-tune ``decomposer`` with SAD against the frozen ``solver`` (see the module doc).

    With ``rl_weight = 0`` and ``entropy_coef = 0`` the policy terms are not computed and the parameters
    follow :func:`train_supervised` bit for bit (same batches, optimiser and clipping; sampling uses its
    own generator; the logged entropy is 0). ``fused`` computes ``L_sup`` and the policy terms in one
    grouped decoder pass (:func:`.policy.sup_and_policy_terms`, equal to float rounding);
    ``fused=False`` runs the reference passes (``supervised_loss`` and ``sequence_stats``).
    """
    config = config or SADConfig()
    if isinstance(solver, torch.nn.Module):
        solver.eval()
        for p in solver.parameters():
            p.requires_grad_(False)
    optimizer = torch.optim.Adam(decomposer.parameters(), lr=config.lr)
    sampler = torch.Generator().manual_seed(seed + 1_000_003)
    history = History()
    start = time.perf_counter()
    for step, rows in enumerate(batch_indices(len(data), config.batch_size, config.steps, seed)):
        context = data.decomposer_input(rows)
        synth_context = data.context.index(rows)
        statement = data.statement[rows]
        decomposer.train()  # no dropout anywhere: train and eval modes compute the same function
        n = len(rows)
        encoded = decomposer.encode(context)  # one encoder pass: rollouts (detached), L_sup, policy terms
        pair = decomposer.generate(  # rows :n sampled, n: greedy; cached decoding, no gradient
            context,
            greedy=torch.arange(2 * n) >= n,
            generator=sampler,
            temperature=config.temperature,
            repeat=2,
            encoded=encoded,
        )
        sample = pair[:n]
        reward_sample, reward_greedy = paired_rewards(solver, synth_context, pair[:n], pair[n:], statement)
        advantage = scst_advantage(reward_sample, reward_greedy, config.center_advantage)
        if config.rl_weight == 0 and config.entropy_coef == 0:  # the policy terms weigh nothing
            sup = supervised_loss(decomposer, context, data.subgoal_seq[rows], encoded)
            logp_sample = entropy = torch.zeros(n)  # not computed: the update is SL's, bit for bit
        elif fused:
            sup, logp_sample, entropy = sup_and_policy_terms(
                decomposer, encoded, data.subgoal_seq[rows], sample
            )
        else:
            sup = supervised_loss(decomposer, context, data.subgoal_seq[rows], encoded)
            logp_sample, entropy = decomposer.sequence_stats(context, sample, encoded)
        loss, rl = sad_loss(sup, logp_sample, entropy, advantage, config)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decomposer.parameters(), config.grad_clip)
        optimizer.step()
        history.rows.append(
            {
                "loss": float(loss.detach()),
                "sup": float(sup.detach()),
                "rl": float(rl.detach()),
                "entropy": float(entropy.detach().mean()),
                "reward_sample": float(reward_sample.mean()),
                "reward_greedy": float(reward_greedy.mean()),
            }
        )
        if on_step:
            on_step(step)
    decomposer.eval()
    history.seconds = time.perf_counter() - start
    return history
