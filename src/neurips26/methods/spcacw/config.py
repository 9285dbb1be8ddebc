"""Configuration of SP-CACW's weighting rule; each default says where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_in_range, check_int, check_positive

BIAS_FORMS = ("squared", "linear")
SOLVERS = ("exact", "osqp")
UPDATES = ("gradient", "delta")


@dataclass
class SPCACWConfig:
    """Settings of the convergence-aware weighting of one target client (the bound is ours, see README).

    The bound minimised each round over the simplex is
    ``Phi(alpha) = L eta sum_i alpha_i^2 sigma_i^2 / b_i + B(alpha)`` with ``B = (sum_i alpha_i zeta_i)^2``
    (``bias_form="squared"``) or ``B = sum_i alpha_i zeta_i^2`` (``"linear"``).
    """

    lr: float = param(0.1, "ours: the SGD step eta of the target's update that trains the digits MLP stably")
    smoothness: float = param(
        10.0,
        "ours: L = 1/eta, the largest smoothness for which the SGD bound's step condition eta <= 1/L holds",
    )
    bias_form: str = param(
        "linear",
        "ours: sum alpha_i zeta_i^2 bounds the squared form (Jensen) and is the only one of the two that can "
        "certify 'better off alone': the squared form always gives the least-biased peer a positive weight",
    )
    solver: str = param(
        "exact", "ours: the sort-based KKT solution (exact, O(N log N)); osqp cross-checks it"
    )
    bias_decay: float = param(
        0.9, "ours: EMA factor of ||g_i - g_0||^2; ~10 rounds of memory smooth minibatch noise out"
    )
    variance_groups: int = param(
        4, "ours: micro-batches per minibatch for the within-client variance (unbiased from 2 up)"
    )
    variance_every: int = param(
        4,
        "ours: the in-process engine re-estimates s_i every 4th round (the EMA of s_i has ~10 rounds of "
        "memory); other rounds run the plain gradient and subtract the EMA of s_i in the bias estimate",
    )
    update: str = param(
        "gradient", "paper: peers' stochastic gradients; 'delta' uses local-step model deltas"
    )
    local_steps: int = param(1, "ours: one step per round in gradient mode; >1 only with update='delta'")
    warmup_rounds: int = param(
        1, "ours: rounds of local-only steps while the bias EMA has no observation yet"
    )

    def __post_init__(self) -> None:
        check_positive("lr", self.lr)
        check_positive("smoothness", self.smoothness)
        check_choice("bias_form", self.bias_form, BIAS_FORMS)
        check_choice("solver", self.solver, SOLVERS)
        check_choice("update", self.update, UPDATES)
        check_in_range("bias_decay", self.bias_decay, 0.0, 0.999999)
        check_int("variance_groups", self.variance_groups, minimum=2)
        check_int("local_steps", self.local_steps, minimum=1)
        check_int("variance_every", self.variance_every, minimum=1)
        check_int("warmup_rounds", self.warmup_rounds, minimum=0)
        if self.update == "gradient" and self.local_steps != 1:
            raise ValueError(
                f"local_steps={self.local_steps} needs update='delta'; gradient mode takes one step per round"
            )

    @property
    def variance_scale(self) -> float:
        """``L * eta``: the factor of the variance term in the bound."""
        return self.smoothness * self.lr
