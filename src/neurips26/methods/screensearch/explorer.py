"""The exploration loop: observe, deduplicate into the graph, choose, act; replay-start with verification.

One :class:`Explorer` drives one backend with one policy over one :class:`StateGraph`. Episodes end at a
dead end (no actions: an irreversible action was taken), after ``max_episode_steps`` or when the policy
asks for a replay-start: reset the app, replay the shortest known path to the target state action by
action (each replayed action counts against the budget and is recorded like any other), and verify arrival
by dedup: the state reached must be the target's state id. Failures are counted, never hidden.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurips26.methods.screensearch.ambiguity import AmbiguityEstimator
from neurips26.methods.screensearch.backends import Backend, BackendCrashed
from neurips26.methods.screensearch.config import ScreenSearchConfig
from neurips26.methods.screensearch.graph import StateGraph
from neurips26.methods.screensearch.prior import ProposalPrior
from neurips26.methods.screensearch.screen import Action, Screen, structural_tokens, structure_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Act:
    """Perform ``action`` on the current screen."""

    action: Action


@dataclass(frozen=True)
class Replay:
    """Reset, then replay the shortest known path to ``target`` (``None``: stay at the initial screen)."""

    target: int | None


@dataclass
class ExploreStats:
    """What one exploration run did: counts, curves (at ``checkpoints``) and the action trace."""

    actions: int = 0
    replays: int = 0
    replay_failures: int = 0
    restarts: int = 0
    crashes: int = 0
    seconds: float = 0.0
    checkpoints: list[int] = field(default_factory=list)
    states_curve: list[int] = field(default_factory=list)
    mass_curve: list[float] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)

    @property
    def replay_success(self) -> float:
        return 1.0 - self.replay_failures / self.replays if self.replays else 1.0


class Explorer:
    """Explore ``backend`` with ``policy``, writing every screen and transition to ``graph``.

    Parameters
    ----------
    backend: any :class:`~neurips26.methods.screensearch.backends.Backend`.
    policy: an object with ``decide(explorer) -> Act | Replay`` and ``restart(explorer) -> Replay``.
    graph: the shared state graph (a fresh in-memory one when omitted).
    config: token, dedup, ambiguity and episode settings.
    seed: the policy's random seed.
    worker: a name written with each observation.
    keep_events: also keep an event log (every screen and transition) for a remote graph store.
    """

    def __init__(
        self,
        backend: Backend,
        policy: Any,
        graph: StateGraph | None = None,
        config: ScreenSearchConfig | None = None,
        seed: int = 0,
        worker: str = "",
        keep_events: bool = False,
    ) -> None:
        self.config = config or ScreenSearchConfig()
        c = self.config
        self.backend = backend
        self.policy = policy
        self.graph = graph or StateGraph(dedup_threshold=c.dedup_threshold, num_perm=c.num_perm)
        self.estimator = AmbiguityEstimator(
            self.graph, c.neighbours, c.min_similarity, c.separate_noise, c.min_probes, c.mask_content
        )
        self.prior = ProposalPrior(c.prior, seed=seed)
        self.rng = np.random.default_rng(seed)
        self.worker = worker
        self.stats = ExploreStats()
        self.root: int | None = None
        self.state: int = -1
        self.screen: Screen | None = None
        self.current_actions: list[Action] = []
        self.history: list[str] = []
        self.episode_steps = 0
        self.budget = 0
        self.events: list[tuple] | None = [] if keep_events else None

    # ------------------------------------------------------------------ observation
    def tokens(self, screen: Screen) -> list[str]:
        return structural_tokens(screen, grid=self.config.grid, filter_volatile=self.config.filter_volatile)

    def _observe(self, screen: Screen) -> tuple[int, bool]:
        self.screen = screen
        tokens = self.tokens(screen)
        state, is_new = self.graph.add_screen(screen, tokens, self.worker)
        if is_new and self.config.mask_content:
            shape = structure_key(screen, self.config.grid, self.config.filter_volatile)
            self.estimator.set_shape(state, shape)
        if self.events is not None:
            self.events.append(("screen", screen.tree, screen.app, screen.window, dict(screen.truth), tokens))
        unique: dict[str, Action] = {}
        for action in self.backend.actions(screen):
            unique.setdefault(action.signature, action)
        self.current_actions = list(unique.values())
        self.state = state
        return state, is_new

    def _reset(self) -> None:
        try:
            screen = self.backend.reset()
        except BackendCrashed as error:
            log.warning("backend %s crashed on reset (%s); restarting", self.backend.name, error)
            self.stats.crashes += 1
            screen = self.backend.reset()
        self.stats.restarts += 1
        self.history = []
        self.episode_steps = 0
        state, _ = self._observe(screen)
        if self.root is None:
            self.root = state

    # ------------------------------------------------------------------ acting
    def step(self, action: Action) -> tuple[int, bool]:
        """Perform ``action``, record the transition and return ``(next state, is_new)``."""
        src = self.state
        try:
            screen = self.backend.act(action)
        except BackendCrashed as error:  # the graph survives; the app is restarted from scratch
            log.warning(
                "backend %s crashed on %s (%s); restarting", self.backend.name, action.signature, error
            )
            self.stats.crashes += 1
            self.stats.actions += 1
            self._reset()
            return self.state, False
        self.stats.actions += 1
        self.episode_steps += 1
        history = hashlib.blake2b("\n".join(self.history).encode(), digest_size=8).hexdigest()
        dst, is_new = self._observe(screen)
        self.graph.record(src, action.signature, dst, history)
        if self.events is not None:  # the two screens are the last two "screen" events
            self.events.append(("edge", action.signature, history))
        self.history.append(action.signature)
        self.prior.observe(action, is_new)
        self.stats.trace.append(action.signature)
        self._checkpoint()
        return dst, is_new

    def replay(self, target: int | None) -> bool:
        """Reset and replay the shortest known path to ``target``; True when dedup confirms arrival."""
        self._reset()
        if target is None or target == self.state:
            return True
        self.stats.replays += 1
        rng = self.rng if self.config.vary_replay_path else None
        path = self.graph.shortest_path(self.root, target, rng)
        ok = path is not None
        for signature in path or ():
            if self.stats.actions >= self.budget:
                ok = False
                break
            action = next((a for a in self.current_actions if a.signature == signature), None)
            if action is None:
                ok = False
                break
            self.step(action)
        ok = ok and self.state == target
        if not ok:
            self.stats.replay_failures += 1
        return ok

    def _checkpoint(self) -> None:
        every = max(1, self.budget // self.config.curve_points)
        if self.stats.actions % every == 0:
            self.stats.checkpoints.append(self.stats.actions)
            self.stats.states_curve.append(self.graph.num_states)
            self.stats.mass_curve.append(self.estimator.mass() if self.config.track_mass else float("nan"))

    def run(self, budget: int) -> ExploreStats:
        """Explore for ``budget`` actions (replayed actions included)."""
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise ValueError(f"budget must be a positive integer number of actions, got {budget!r}")
        self.budget = self.stats.actions + budget
        start = time.perf_counter()
        if self.root is None or self.screen is None:
            self._reset()
        idle = 0
        while self.stats.actions < self.budget:
            if not self.current_actions and self.episode_steps == 0:
                raise RuntimeError(f"backend {self.backend.name!r} offers no action on its initial screen")
            if not self.current_actions or self.episode_steps >= self.config.max_episode_steps:
                decision = self.policy.restart(self)
            else:
                decision = self.policy.decide(self)
            if isinstance(decision, Replay) and idle >= 2 and self.current_actions:
                # two replays in a row that moved nowhere: take a random action so the loop progresses
                decision = Act(self.current_actions[int(self.rng.integers(len(self.current_actions)))])
            before = self.stats.actions
            if isinstance(decision, Act):
                self.step(decision.action)
            elif isinstance(decision, Replay):
                self.replay(decision.target)
            else:
                raise TypeError(f"policy returned {decision!r}; expected Act or Replay")
            idle = idle + 1 if self.stats.actions == before else 0
        self.graph.commit()
        self.stats.seconds += time.perf_counter() - start
        return self.stats
