"""ScreenSearchPolicy: an ambiguity-aware PUCT graph bandit with replay-start.

Paper says: an "ambiguity-aware PUCT graph-bandit" driven by "frontier rewards" and the ambiguity signal,
with replay-start over the shared graph. We chose (issue #32), at the current state ``s``:

    Q(s, a)     = w_f F(s, a) + beta U(s, a)
    score(s, a) = Q(s, a) + c_puct P(s, a) sqrt(N(s) + 1) / (1 + N(s, a))

``F(s, a)`` is the frontier reward: 1 for an untried action, else ``sum_o p(o | s, a) gamma^(d(o) + 1)``
with ``d(o)`` the known-path distance from outcome ``o`` to the nearest state with an untried action.
``U(s, a)`` is the unresolved ambiguity (:mod:`.ambiguity`), ``P`` the proposal prior (:mod:`.prior`),
``N`` visit counts. When the best local ``Q`` is below the best *replay target* ``gamma^len(path(x))
max_a Q(x, a)`` (a state with an untried action or unresolved ambiguity), the policy replay-starts there.
Ties are broken uniformly at random with the explorer's seeded generator (ours: screen order would
favour the menu bar, a prior of its own), so runs are reproducible step for step.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from neurips26.methods.screensearch.screen import Action

if TYPE_CHECKING:
    from neurips26.methods.screensearch.explorer import Explorer
    from neurips26.methods.screensearch.graph import StateGraph

from neurips26.methods.screensearch.explorer import Act, Replay


def frontier_distance(graph: StateGraph) -> dict[int, int]:
    """Known-path distance from every state to the nearest state with an untried action (reverse BFS)."""
    reverse: dict[int, set[int]] = {}
    for (src, _), counts in graph.outcomes.items():
        for dst in counts:
            reverse.setdefault(dst, set()).add(src)
    dist = {s: 0 for s in graph.state_actions if graph.untried(s)}
    queue = deque(dist)
    while queue:
        state = queue.popleft()
        for src in reverse.get(state, ()):
            if src not in dist:
                dist[src] = dist[state] + 1
                queue.append(src)
    return dist


class ScreenSearchPolicy:
    """PUCT over (state, action) with ``Q = w_f * frontier + beta * ambiguity`` and replay-start.

    The weights come from the explorer's :class:`~neurips26.methods.screensearch.config.ScreenSearchConfig`
    (``frontier_weight``, ``beta``, ``c_puct``, ``gamma``): ``beta = 0`` is frontier-only PUCT,
    ``frontier_weight = 0`` is ambiguity-only.
    """

    name = "screensearch"

    def action_values(self, ex: Explorer, state: int, actions: list[Action], dist: dict[int, int]):
        """``(Q, N(s, a))`` arrays for ``actions`` at ``state``."""
        c, graph = ex.config, ex.graph
        q = np.zeros(len(actions))
        n = np.zeros(len(actions))
        for i, action in enumerate(actions):
            counts = graph.outcomes.get((state, action.signature))
            if not counts:
                q[i] = c.frontier_weight
                continue
            total = sum(counts.values())
            n[i] = total
            frontier = sum(k / total * c.gamma ** (dist[o] + 1) for o, k in counts.items() if o in dist)
            q[i] = c.frontier_weight * frontier
            if c.beta > 0:
                q[i] += c.beta * ex.estimator.unresolved(state, action.signature)
        return q, n

    def decide(self, ex: Explorer) -> Act | Replay:
        c = ex.config
        actions = ex.current_actions
        dist = frontier_distance(ex.graph)
        q, n = self.action_values(ex, ex.state, actions, dist)
        prior = ex.prior(actions)
        if (n > 0).all() or c.frontier_weight == 0:  # nothing untried here: is a replay target worth more?
            target, value = self.best_target(ex)
            if target is not None and target != ex.state and value > q.max() + 1e-12:
                return Replay(target)
        score = q + c.c_puct * prior * math.sqrt(n.sum() + 1.0) / (1.0 + n)
        best = np.flatnonzero(score >= score.max() - 1e-12)
        return Act(actions[int(best[0] if len(best) == 1 else ex.rng.choice(best))])

    def best_target(self, ex: Explorer) -> tuple[int | None, float]:
        """The replay target maximising ``gamma^len(path) * max_a Q(x, a)`` (untried or ambiguous)."""
        c, graph = ex.config, ex.graph
        best, best_value = None, 0.0
        for state, path in graph.shortest_paths(ex.root).items():
            discount = c.gamma ** len(path)
            value = c.frontier_weight if graph.untried(state) else 0.0
            if c.beta > 0:
                value += c.beta * max(
                    (
                        ex.estimator.unresolved(state, a.signature)
                        for a in graph.actions(state)
                        if (state, a.signature) in graph.outcomes
                    ),
                    default=0.0,
                )
            if discount * value > best_value + 1e-12:
                best, best_value = state, discount * value
        return best, best_value

    def restart(self, ex: Explorer) -> Replay:
        target, _ = self.best_target(ex)
        return Replay(target)
