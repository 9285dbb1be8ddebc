"""Baseline exploration policies (all re-implemented here; none is a library's code).

- :class:`RandomPolicy`: a uniformly random action; restarts at the initial screen.
- :class:`BFSPolicy` / :class:`DFSPolicy`: DroidBot-like systematic exploration over untried actions in
  screen order (re-implemented after DroidBot's ``bfs_naive`` / ``dfs_naive`` strategies, which restart the
  app instead of pressing Back: replay-start plays that role here). BFS always works on the shallowest state
  that still has an untried action; DFS tries the current state's next untried action and otherwise walks
  known edges to the nearest such state, or replays to the deepest one.
- :class:`NoveltyUCTPolicy`: count-based novelty UCT: ``1 / sqrt(1 + visits(next))`` as the reward
  (1 for an untried action) plus ``c sqrt(ln(N(s) + 1) / (1 + N(s, a)))``; restarts at the initial screen.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from neurips26.methods.screensearch.explorer import Act, Replay

if TYPE_CHECKING:
    from neurips26.methods.screensearch.explorer import Explorer


class RandomPolicy:
    """A uniformly random action of the current screen."""

    name = "random"

    def decide(self, ex: Explorer) -> Act:
        return Act(ex.current_actions[int(ex.rng.integers(len(ex.current_actions)))])

    def restart(self, ex: Explorer) -> Replay:
        return Replay(None)


def _first_untried(ex: Explorer):
    for action in ex.current_actions:
        if (ex.state, action.signature) not in ex.graph.outcomes:
            return action
    return None


class BFSPolicy:
    """Breadth first: the shallowest state with an untried action, its first untried action."""

    name = "bfs"

    def _target(self, ex: Explorer) -> int | None:
        paths = ex.graph.shortest_paths(ex.root)
        frontier = [(len(p), s) for s, p in paths.items() if ex.graph.untried(s)]
        return min(frontier)[1] if frontier else None

    def decide(self, ex: Explorer) -> Act | Replay:
        target = self._target(ex)
        if target is None:
            return Act(ex.current_actions[int(ex.rng.integers(len(ex.current_actions)))])
        action = _first_untried(ex) if target == ex.state else None
        return Act(action) if action is not None else Replay(target)

    def restart(self, ex: Explorer) -> Replay:
        return Replay(self._target(ex))


class DFSPolicy:
    """Depth first: the current state's next untried action, else the nearest frontier along known edges."""

    name = "dfs"

    def decide(self, ex: Explorer) -> Act | Replay:
        action = _first_untried(ex)
        if action is not None:
            return Act(action)
        step = self._step_towards_frontier(ex)
        if step is not None:
            return Act(step)
        return self.restart(ex)

    def _step_towards_frontier(self, ex: Explorer):
        graph = ex.graph
        first: dict[int, str] = {ex.state: ""}
        queue = deque([ex.state])
        while queue:
            state = queue.popleft()
            if state != ex.state and graph.untried(state):
                signature = first[state]
                return next((a for a in ex.current_actions if a.signature == signature), None)
            for action in graph.actions(state):
                for dst in graph.outcomes.get((state, action.signature), {}):
                    if dst not in first:
                        first[dst] = first[state] or action.signature
                        queue.append(dst)
        return None

    def restart(self, ex: Explorer) -> Replay:
        paths = ex.graph.shortest_paths(ex.root)
        frontier = [(-len(p), s) for s, p in paths.items() if ex.graph.untried(s)]
        return Replay(min(frontier)[1] if frontier else None)


class NoveltyUCTPolicy:
    """Count-based novelty UCT over (state, action); restarts at the initial screen."""

    name = "novelty_uct"

    def decide(self, ex: Explorer) -> Act:
        graph = ex.graph
        actions = ex.current_actions
        n = np.array([graph.tried(ex.state, a.signature) for a in actions], dtype=float)
        reward = np.ones(len(actions))
        for i, action in enumerate(actions):
            counts = graph.outcomes.get((ex.state, action.signature))
            if counts:
                total = sum(counts.values())
                reward[i] = sum(k / total / math.sqrt(1 + graph.visits[o]) for o, k in counts.items())
        score = reward + ex.config.c_puct * np.sqrt(np.log(n.sum() + 1.0) / (1.0 + n))
        best = np.flatnonzero(score >= score.max() - 1e-12)  # ties: uniformly at random (seeded)
        return Act(actions[int(best[0] if len(best) == 1 else ex.rng.choice(best))])

    def restart(self, ex: Explorer) -> Replay:
        return Replay(None)
