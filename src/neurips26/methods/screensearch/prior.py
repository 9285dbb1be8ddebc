"""Proposal priors ``P(s, a)`` over a screen's actions (ours; the abstract only says "proposal priors").

``heuristic``: a role/action table (buttons, links and menu items first; static labels, icons and images
last) with a penalty for names that end a session or undo progress (quit, delete, close, back, cancel).
``learned``: the heuristic times a per-(role, action name, first label word) rate of "this action led
somewhere new" learned on the corpus so far (Beta(1, 1) smoothing). ``uniform``: no prior.
``shuffled``: the heuristic's values permuted among the screen's actions (a negative control: the same
numbers, no information).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from neurips26.methods.screensearch.screen import Action

PRIORS = ("heuristic", "learned", "uniform", "shuffled")

# ours: how likely a control of this role is to change the screen, roughly, from common GTK/ARIA usage
ROLE_WEIGHT = {
    "push button": 1.0,
    "button": 1.0,
    "link": 1.0,
    "menu item": 0.8,
    "tab": 0.8,
    "page tab": 0.8,
    "check box": 0.7,
    "checkbox": 0.7,
    "toggle button": 0.7,
    "radio button": 0.6,
    "radio": 0.6,
    "combo box": 0.6,
    "combobox": 0.6,
    "spin button": 0.3,
    "text": 0.3,
    "entry": 0.3,
    "textbox": 0.3,
    "label": 0.05,
    "icon": 0.05,
    "image": 0.05,
    "img": 0.05,
    "heading": 0.05,
}
# ours: words that end a session, destroy state or return to known screens
PENALTY = {
    "quit": 0.05,
    "exit": 0.05,
    "delete": 0.05,
    "remove": 0.1,
    "reset": 0.1,
    "close": 0.1,
    "logout": 0.05,
    "back": 0.3,
    "cancel": 0.3,
    "home": 0.5,
    "help": 0.5,
}


def heuristic_weight(action: Action) -> float:
    """Role weight times the strongest name penalty (unknown roles: 0.5)."""
    weight = ROLE_WEIGHT.get(action.role, 0.5)
    for word in action.label.split():
        weight *= PENALTY.get(word.strip(".:!"), 1.0)
    return weight


class ProposalPrior:
    """``P(s, a)`` for the actions of one screen, normalised to sum 1.

    Parameters
    ----------
    kind: one of ``heuristic``, ``learned``, ``uniform``, ``shuffled``.
    seed: the permutation seed of ``shuffled``.
    """

    def __init__(self, kind: str = "heuristic", seed: int = 0) -> None:
        if kind not in PRIORS:
            raise ValueError(f"prior={kind!r} unknown; choose one of {PRIORS}")
        self.kind = kind
        self._rng = np.random.default_rng(seed)
        self._novel: Counter[str] = Counter()
        self._tries: Counter[str] = Counter()

    @staticmethod
    def _key(action: Action) -> str:
        first = action.label.split()[0] if action.label else ""
        return f"{action.role}|{action.name}|{first}"

    def observe(self, action: Action, discovered: bool) -> None:
        """Learn from one outcome (``learned`` only uses it)."""
        key = self._key(action)
        self._tries[key] += 1
        self._novel[key] += int(discovered)

    def __call__(self, actions: Sequence[Action]) -> np.ndarray:
        if not actions:
            return np.zeros(0)
        if self.kind == "uniform":
            weights = np.ones(len(actions))
        else:
            weights = np.array([heuristic_weight(a) for a in actions], dtype=float)
            if self.kind == "learned":
                keys = [self._key(a) for a in actions]
                rate = np.array([(self._novel[k] + 1.0) / (self._tries[k] + 2.0) for k in keys])
                weights = weights * rate
            elif self.kind == "shuffled":
                weights = weights[self._rng.permutation(len(weights))]
        return weights / weights.sum()
