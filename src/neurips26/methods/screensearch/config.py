"""ScreenSearchConfig: every knob of retrieval, dedup, ambiguity and the PUCT policy, with its source.

The abstract gives no constant; every default below is ours and says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.methods.screensearch.prior import PRIORS


@dataclass
class ScreenSearchConfig:
    """Settings of one ScreenSearch explorer (tokens, dedup, ambiguity, PUCT, episodes)."""

    grid: int = param(4, "ours: 4x4 location cells; a one-pixel shift keeps the cell")
    filter_volatile: bool = param(True, "issue: clocks, counters and focus filtered before tokenisation")
    dedup_threshold: float = param(
        0.85, "ours: Jaccard >= 0.85 is one state (two toast lines cost <= 14% on a small page, a panel ~25%)"
    )
    num_perm: int = param(64, "ours: MinHash permutations; LSH recall ~1 at Jaccard >= 0.9 (tests)")
    neighbours: int = param(8, "ours: K matched screens besides s")
    min_similarity: float = param(0.7, "ours: matched screens need Jaccard >= 0.7 (below the dedup 0.85)")
    separate_noise: bool = param(True, "issue: repeat probes separate nondeterminism from aliasing")
    min_probes: int = param(2, "ours: a history probed twice counts as resolved")
    mask_content: bool = param(
        True, "ours: a change of an app's content elements alone (a display value) reads as 'stay'"
    )
    frontier_weight: float = param(1.0, "ours: weight of the frontier reward in Q (0: ambiguity-only)")
    beta: float = param(0.5, "ours: ambiguity weight in Q = frontier + beta * ambiguity (0: frontier-only)")
    c_puct: float = param(1.0, "ours: the PUCT exploration constant (AlphaZero's order of magnitude)")
    gamma: float = param(0.9, "ours: discount of frontier states by known-path distance")
    prior: str = param("heuristic", f"ours: proposal prior, one of {PRIORS}")
    vary_replay_path: bool = param(
        True,
        "ours: replay a random one of the shortest paths, so probes reach a state under several histories",
    )
    max_episode_steps: int = param(25, "ours: reset after 25 actions (deeper than every synthetic page)")
    curve_points: int = param(10, "ours: checkpoints of the discovery and ambiguity-mass curves")
    track_mass: bool = param(True, "ours: compute ambiguity mass at each checkpoint")

    def __post_init__(self) -> None:
        if self.grid < 1:
            raise ValueError(f"grid must be >= 1, got {self.grid}")
        for name in ("dedup_threshold", "min_similarity"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must lie in (0, 1], got {value}")
        for name in ("num_perm", "min_probes", "max_episode_steps", "curve_points"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.neighbours < 0:
            raise ValueError(f"neighbours must be >= 0, got {self.neighbours}")
        for name in ("frontier_weight", "beta", "c_puct"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma}")
        if self.prior not in PRIORS:
            raise ValueError(f"prior={self.prior!r} unknown; choose one of {PRIORS}")
