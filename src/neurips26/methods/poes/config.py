"""POES's own configuration; each default says where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_in_range, check_int, check_positive


@dataclass
class POESConfig:
    """Settings of the scheduler (IRT fit, leader set, objective, warm start, controller).

    The abstract fixes the parts (1PL IRT, discrimination among the strongest candidates, facility-location
    coverage, bounded swaps with a switching cost, an adaptive controller); every number below is ours.
    """

    n_leaders: int = param(
        4, "ours: the top-K prompts by ability; an evolutionary optimizer keeps ~4 parents"
    )
    prior_theta_sd: float = param(1.0, "ours: standard-normal ability prior of 1PL MAP (Rasch convention)")
    prior_difficulty_sd: float = param(1.5, "ours: item difficulties spread wider than abilities")
    max_swaps: int = param(2, "ours: m swaps per round bounds drift (paper: bounded subset updates)")
    switching_cost: float = param(
        0.05, "ours: a swap must raise the objective by 5% of one perfect item's discrimination weight"
    )
    discrimination_weight: float = param(
        0.5, "ours: lambda without the controller (equal discrimination and coverage)"
    )
    min_weight: float = param(
        0.2, "ours: lambda (discrimination share) at a zero lead; a stall scales it down further"
    )
    max_weight: float = param(0.9, "ours: ... and <= 0.9, so coverage always keeps 10%")
    margin_midpoint: float = param(1.0, "ours: lambda is halfway at a one-sd lead of the top prompt")
    patience: int = param(3, "ours: rounds without a new best ability before the controller explores")
    stall_factor: float = param(0.5, "ours: a stall halves lambda (back toward coverage)")
    use_discrimination: bool = param(True, "paper: discrimination term (switch off for the ablation)")
    use_coverage: bool = param(True, "paper: coverage term (switch off for the ablation)")
    use_controller: bool = param(True, "paper: adaptive controller (off: fixed discrimination_weight)")
    bound_swaps: bool = param(True, "paper: bounded warm-start updates (off: re-run greedy every round)")
    rank_by_ability: bool = param(True, "paper: rank prompts by IRT ability (off: raw mean accuracy)")

    def __post_init__(self) -> None:
        check_int("n_leaders", self.n_leaders, 1)
        check_int("max_swaps", self.max_swaps, 0)
        check_int("patience", self.patience, 1)
        check_positive("prior_theta_sd", self.prior_theta_sd)
        check_positive("prior_difficulty_sd", self.prior_difficulty_sd)
        check_positive("switching_cost", self.switching_cost, allow_zero=True)
        check_positive("margin_midpoint", self.margin_midpoint, allow_zero=True)
        for name in ("discrimination_weight", "min_weight", "max_weight", "stall_factor"):
            check_in_range(name, getattr(self, name), 0.0, 1.0)
        if self.min_weight > self.max_weight:
            raise ValueError(f"min_weight ({self.min_weight}) must not exceed max_weight ({self.max_weight})")
        if not (self.use_discrimination or self.use_coverage):
            raise ValueError("use_discrimination and use_coverage cannot both be False: nothing to select")
