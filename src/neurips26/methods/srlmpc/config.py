"""SRL-MPC's own settings: the HOCBF-MPC, its tunable parameters' bounds and the learned tuner's cadence.

Everything beyond the abstract is ours; each default says where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_int, check_positive

BACKENDS = ("qpoases", "osqp")


@dataclass
class SRLMPCConfig:
    """Settings of ``HOCBFMPC`` and ``SRLMPCController`` (double-integrator robot, QP per control step)."""

    dt: float = param(0.2, "issue: dt 0.1-0.25 s; 0.2 s keeps a 2 s horizon at 10 steps")
    horizon: int = param(10, "issue: horizon 10 (the speed target's setting)")
    k_neighbours: int = param(5, "issue: 5 neighbour slots (speed target); nearest by signed distance")
    max_accel: float = param(2.0, "ours: a typical mobile-robot bound (m/s^2), per axis")
    max_speed: float = param(1.2, "ours: walking speed ~1.2 m/s, per axis")
    margin: float = param(0.05, "ours: 5 cm safety margin on the signed distance")
    backend: str = param("qpoases", "issue: casadi Opti + qpOASES; 'osqp' is cvxpy + OSQP, same QP")
    # the fixed (untuned) parameters: what a user gets without the policy
    gamma1: float = param(0.3, "ours: untuned mid-range class-K gain (discrete HOCBF, 0 < gamma <= 1)")
    gamma2: float = param(0.3, "ours: untuned mid-range class-K gain")
    slack_weight: float = param(1000.0, "ours: slack much dearer than tracking (1e3)")
    speed_ref: float = param(1.0, "ours: preferred speed 1 m/s (pedestrian-like)")
    w_track: float = param(1.0, "ours: velocity-tracking weight (unit scale)")
    w_effort: float = param(0.1, "ours: small acceleration penalty")
    # bounds of the learned parameters (the policy's action is mapped affinely onto them, then clipped)
    gamma_min: float = param(0.02, "ours: a gain near 0 forbids approach altogether")
    gamma_max: float = param(1.0, "discrete HOCBF: gamma <= 1 keeps the class-K decay monotone")
    slack_weight_min: float = param(10.0, "ours: bounds 1e1..1e5 of the learned slack price")
    slack_weight_max: float = param(1e5, "ours: bounds 1e1..1e5 of the learned slack price")
    speed_ref_min: float = param(0.2, "ours: never ask to stand still")
    w_track_min: float = param(0.2, "ours: factor 5 either side of the default's scale")
    w_track_max: float = param(5.0, "ours: factor 5 either side of the default's scale")
    w_effort_min: float = param(0.01, "ours: factor 10 either side of the default")
    w_effort_max: float = param(1.0, "ours: factor 10 either side of the default")
    update_every: int = param(4, "issue: parameters every few control steps (0.8 s at dt 0.2)")
    fallback_slack_weight: float = param(1e4, "ours: the braking QP's slack price")

    def __post_init__(self) -> None:
        check_positive("dt", self.dt)
        check_int("horizon", self.horizon, minimum=2)
        check_int("k_neighbours", self.k_neighbours, minimum=1)
        check_int("update_every", self.update_every, minimum=1)
        for name in (
            "max_accel",
            "max_speed",
            "slack_weight",
            "speed_ref",
            "w_track",
            "w_effort",
            "gamma_min",
            "gamma_max",
            "slack_weight_min",
            "slack_weight_max",
            "speed_ref_min",
            "w_track_min",
            "w_track_max",
            "w_effort_min",
            "w_effort_max",
            "fallback_slack_weight",
        ):
            check_positive(name, getattr(self, name))
        check_positive("margin", self.margin, allow_zero=True)
        check_choice("backend", self.backend, BACKENDS)
        if self.gamma_max > 1.0:
            raise ValueError(f"gamma_max must be <= 1 (discrete HOCBF), got {self.gamma_max}")
        for low, high in (
            ("gamma_min", "gamma_max"),
            ("slack_weight_min", "slack_weight_max"),
            ("speed_ref_min", "max_speed"),
            ("w_track_min", "w_track_max"),
            ("w_effort_min", "w_effort_max"),
        ):
            if getattr(self, low) >= getattr(self, high):
                raise ValueError(f"{low} must be < {high}, got {getattr(self, low)} >= {getattr(self, high)}")
