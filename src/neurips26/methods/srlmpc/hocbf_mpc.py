"""HOCBF-MPC: a double-integrator MPC whose safety constraints are discrete high-order CBFs on GSFs.

Model (forward Euler, so the position has relative degree 2 in the acceleration):

    p_{k+1} = p_k + dt v_k,      v_{k+1} = v_k + dt u_k

Barrier for neighbour j, with the normal n* frozen over the horizon and the neighbour at constant velocity:

    h_k = s_ij(n*) at step k - margin = n*.(q_j + k dt w_j - p_k) - h_Ki(n*) - h_Kj(-n*) - margin

Discrete HOCBF of relative degree 2 (gains 0 < gamma1, gamma2 <= 1):

    psi1_k = h_{k+1} - (1 - gamma1) h_k,      psi2_k = psi1_{k+1} - (1 - gamma2) psi1_k >= 0

i.e. ``h_{k+2} - (2 - g1 - g2) h_{k+1} + (1 - g1)(1 - g2) h_k >= 0``: linear in the positions. The first
constraint (k = 0, the one that binds u_0) is hard; later ones carry a per-neighbour slack priced by the
slack weight. The QP is built once with every number a parameter; only parameter values change per step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import numpy as np

from neurips26.methods.srlmpc.config import SRLMPCConfig

INACTIVE = 1e3  # right-hand side of an unused neighbour slot


@dataclass
class MPCParameters:
    """The tunable MPC parameters (what SRL-MPC's policy outputs): per-slot gains and scalar weights."""

    gamma1: np.ndarray
    gamma2: np.ndarray
    slack_weight: float
    speed_ref: float
    w_track: float
    w_effort: float

    @classmethod
    def constant(cls, config: SRLMPCConfig) -> MPCParameters:
        """The fixed parameters of ``config`` (the untuned / grid-tuned HOCBF-MPC)."""
        k = config.k_neighbours
        return cls(
            np.full(k, config.gamma1),
            np.full(k, config.gamma2),
            config.slack_weight,
            config.speed_ref,
            config.w_track,
            config.w_effort,
        )

    def clipped(self, config: SRLMPCConfig) -> tuple[MPCParameters, int]:
        """The parameters clipped to ``config``'s bounds and how many entries were out of bounds."""
        bounds = parameter_bounds(config)
        vector = self.to_vector()
        clipped = np.clip(vector, bounds[0], bounds[1])
        return MPCParameters.from_vector(clipped, config.k_neighbours), int(np.sum(clipped != vector))

    def to_vector(self) -> np.ndarray:
        return np.concatenate(
            [self.gamma1, self.gamma2, [self.slack_weight, self.speed_ref, self.w_track, self.w_effort]]
        ).astype(float)

    @classmethod
    def from_vector(cls, vector: np.ndarray, k: int) -> MPCParameters:
        vector = np.asarray(vector, dtype=float)
        if vector.shape != (2 * k + 4,):
            raise ValueError(f"parameter vector must have shape ({2 * k + 4},), got {vector.shape}")
        return cls(vector[:k].copy(), vector[k : 2 * k].copy(), *map(float, vector[2 * k :]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MPCParameters) and np.array_equal(self.to_vector(), other.to_vector())

    __hash__ = None  # type: ignore[assignment]


PARAMETER_NAMES = tuple(f.name for f in fields(MPCParameters))


def parameter_bounds(config: SRLMPCConfig) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the parameter vector (gamma1[k], gamma2[k], rho, speed, w_track, w_effort)."""
    k = config.k_neighbours
    low = np.concatenate(
        [
            np.full(2 * k, config.gamma_min),
            [config.slack_weight_min, config.speed_ref_min, config.w_track_min, config.w_effort_min],
        ]
    )
    high = np.concatenate(
        [
            np.full(2 * k, config.gamma_max),
            [config.slack_weight_max, config.max_speed, config.w_track_max, config.w_effort_max],
        ]
    )
    return low, high


@dataclass(frozen=True)
class Neighbours:
    """Frozen linearisation of up to K neighbours: normal n* (m, 2), support width sum (m,), state (m, 2)."""

    normal: np.ndarray
    width: np.ndarray
    position: np.ndarray
    velocity: np.ndarray

    def __post_init__(self) -> None:
        m = len(np.asarray(self.width).reshape(-1))
        for name in ("normal", "position", "velocity"):
            if np.asarray(getattr(self, name)).shape != (m, 2):
                raise ValueError(
                    f"Neighbours.{name} must have shape ({m}, 2), got {np.shape(getattr(self, name))}"
                )

    @classmethod
    def empty(cls) -> Neighbours:
        z = np.zeros((0, 2))
        return cls(z, np.zeros(0), z, z)


@dataclass
class MPCStep:
    """One solve: the acceleration to apply and what happened."""

    acceleration: np.ndarray
    feasible: bool
    fallback: bool
    solve_time: float
    positions: np.ndarray  # (N + 1, 2) planned positions


def hocbf_rows(
    neighbours: Neighbours, params: MPCParameters, config: SRLMPCConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients of ``A2 n.p_{k+2} + A1 n.p_{k+1} + A0 n.p_k <= b_k`` for K slots and k = 0..N-2.

    Returns A0, A1, A2 of shape (K, 2) and b of shape (K, N - 1); unused slots are inactive.
    """
    k_slots, horizon, dt = config.k_neighbours, config.horizon, config.dt
    m = len(neighbours.width)
    if m > k_slots:
        raise ValueError(f"neighbours: at most k_neighbours={k_slots} slots, got {m}")
    a0, a1, a2 = np.zeros((k_slots, 2)), np.zeros((k_slots, 2)), np.zeros((k_slots, 2))
    b = np.full((k_slots, horizon - 1), INACTIVE)
    if m == 0:
        return a0, a1, a2, b
    g1, g2 = params.gamma1[:m], params.gamma2[:m]
    alpha1 = -(2.0 - g1 - g2)  # coefficient of h_{k+1}
    alpha0 = (1.0 - g1) * (1.0 - g2)  # coefficient of h_k
    n = neighbours.normal
    steps = np.arange(horizon + 1) * dt
    future = neighbours.position[:, None, :] + steps[None, :, None] * neighbours.velocity[:, None, :]
    c = np.einsum("md,mkd->mk", n, future) - neighbours.width[:, None] - config.margin  # h_k + n.p_k
    a2[:m], a1[:m], a0[:m] = n, alpha1[:, None] * n, alpha0[:, None] * n
    b[:m] = c[:, 2:] + alpha1[:, None] * c[:, 1:-1] + alpha0[:, None] * c[:, :-2]
    return a0, a1, a2, b


def velocity_reference(position: np.ndarray, goal: np.ndarray, speed: float, dt: float) -> np.ndarray:
    """Preferred velocity: towards the goal at ``speed``, slowing within one second of it."""
    gap = goal - position
    dist = float(np.linalg.norm(gap))
    if dist < 1e-9:
        return np.zeros(2)
    return gap / dist * min(speed, dist / max(1.0, dt))


class _CasadiQP:
    """The QP as a casadi ``Opti`` problem with qpOASES, built once; parameters set per solve."""

    def __init__(self, config: SRLMPCConfig, braking: bool) -> None:
        import casadi as ca

        n, k_slots, dt = config.horizon, config.k_neighbours, config.dt
        opti = ca.Opti("conic")
        p, v, u = opti.variable(2, n + 1), opti.variable(2, n + 1), opti.variable(2, n)
        sigma = opti.variable(k_slots)
        self.x0 = opti.parameter(4)
        self.ref = opti.parameter(2, n)  # sqrt(w_track) * v_ref
        self.sw, self.su, self.rho = opti.parameter(), opti.parameter(), opti.parameter()
        self.a = [opti.parameter(k_slots, 2) for _ in range(3)]
        self.b = opti.parameter(k_slots, n - 1)
        opti.subject_to(p[:, 0] == self.x0[:2])
        opti.subject_to(v[:, 0] == self.x0[2:])
        opti.subject_to(p[:, 1:] == p[:, :-1] + dt * v[:, :-1])
        opti.subject_to(v[:, 1:] == v[:, :-1] + dt * u)
        opti.subject_to(opti.bounded(-config.max_accel, ca.vec(u), config.max_accel))
        opti.subject_to(opti.bounded(-config.max_speed, ca.vec(v[:, 1:]), config.max_speed))
        opti.subject_to(sigma >= 0)
        for k in range(n - 1):
            lhs = self.a[2] @ p[:, k + 2] + self.a[1] @ p[:, k + 1] + self.a[0] @ p[:, k]
            hard = k == 0 and not braking
            opti.subject_to(lhs <= self.b[:, k] + (0 if hard else sigma))
        opti.minimize(
            ca.sumsqr(self.sw * v[:, 1:] - self.ref) + ca.sumsqr(self.su * u) + self.rho * ca.sumsqr(sigma)
        )
        # sparse qpOASES: 4 ms instead of 8 ms median here (5 neighbours, horizon 10)
        opti.solver("qpoases", {"printLevel": "none", "error_on_fail": False, "sparse": True})
        self.opti, self.p, self.u = opti, p, u

    def solve(self, values: dict[str, np.ndarray]) -> tuple[bool, np.ndarray, np.ndarray]:
        opti = self.opti
        opti.set_value(self.x0, values["x0"])
        opti.set_value(self.ref, values["ref"].T)
        opti.set_value(self.sw, values["sw"])
        opti.set_value(self.su, values["su"])
        opti.set_value(self.rho, values["rho"])
        for param, key in zip(self.a, ("a0", "a1", "a2"), strict=True):
            opti.set_value(param, values[key])
        opti.set_value(self.b, values["b"])
        try:
            opti.solve_limited()
        except RuntimeError:
            return False, np.zeros(2), np.zeros((0, 2))
        ok = bool(opti.stats()["success"])
        u0 = np.asarray(opti.debug.value(self.u[:, 0])).reshape(2)
        positions = np.asarray(opti.debug.value(self.p)).T
        return ok, u0, positions


class _CvxpyQP:
    """The same QP in cvxpy (DPP-parameterised, canonicalised once) solved by OSQP."""

    def __init__(self, config: SRLMPCConfig, braking: bool) -> None:
        import cvxpy as cp

        n, k_slots, dt = config.horizon, config.k_neighbours, config.dt
        p, v, u = cp.Variable((n + 1, 2)), cp.Variable((n + 1, 2)), cp.Variable((n, 2))
        sigma = cp.Variable(k_slots, nonneg=True)
        self.x0 = cp.Parameter(4)
        self.ref = cp.Parameter((n, 2))
        self.sw, self.su = cp.Parameter(nonneg=True), cp.Parameter(nonneg=True)
        self.rho = cp.Parameter(nonneg=True)
        self.a = [cp.Parameter((k_slots, 2)) for _ in range(3)]
        self.b = cp.Parameter((k_slots, n - 1))
        cons = [
            p[0] == self.x0[:2],
            v[0] == self.x0[2:],
            p[1:] == p[:-1] + dt * v[:-1],
            v[1:] == v[:-1] + dt * u,
            cp.abs(u) <= config.max_accel,
            cp.abs(v[1:]) <= config.max_speed,
        ]
        for k in range(n - 1):
            lhs = self.a[2] @ p[k + 2] + self.a[1] @ p[k + 1] + self.a[0] @ p[k]
            hard = k == 0 and not braking
            cons.append(lhs <= self.b[:, k] + (0 if hard else sigma))
        cost = (
            cp.sum_squares(self.sw * v[1:] - self.ref)
            + cp.sum_squares(self.su * u)
            + self.rho * cp.sum_squares(sigma)
        )
        self.problem = cp.Problem(cp.Minimize(cost), cons)
        self.p, self.u = p, u

    def solve(self, values: dict[str, np.ndarray]) -> tuple[bool, np.ndarray, np.ndarray]:
        self.x0.value = values["x0"]
        self.ref.value = values["ref"]
        self.sw.value, self.su.value, self.rho.value = values["sw"], values["su"], values["rho"]
        for param, key in zip(self.a, ("a0", "a1", "a2"), strict=True):
            param.value = values[key]
        self.b.value = values["b"]
        try:
            self.problem.solve(solver="OSQP", warm_start=True, eps_abs=1e-7, eps_rel=1e-7, max_iter=20000)
        except Exception:  # cvxpy raises SolverError on numerical failure: treat as infeasible
            return False, np.zeros(2), np.zeros((0, 2))
        if self.problem.status not in ("optimal", "optimal_inaccurate") or self.u.value is None:
            return False, np.zeros(2), np.zeros((0, 2))
        return True, np.asarray(self.u.value[0]), np.asarray(self.p.value)


class HOCBFMPC:
    """Shape-aware HOCBF-MPC for a double-integrator robot (SRL-MPC's safety layer).

    Parameters
    ----------
    config : ``SRLMPCConfig`` (horizon, dt, bounds, backend ``"qpoases"`` or ``"osqp"``).
    rebuild_every_step : build the QP again at every solve (only to measure what build-once saves).
    """

    def __init__(self, config: SRLMPCConfig | None = None, rebuild_every_step: bool = False) -> None:
        self.config = config or SRLMPCConfig()
        self.rebuild_every_step = rebuild_every_step
        self._qp = self._build(braking=False)
        self._braking = self._build(braking=True)
        self.n_solves = 0
        self.n_infeasible = 0
        self.n_fallback_failed = 0

    def _build(self, braking: bool) -> _CasadiQP | _CvxpyQP:
        cls = _CasadiQP if self.config.backend == "qpoases" else _CvxpyQP
        return cls(self.config, braking)

    def problem_values(
        self,
        position: np.ndarray,
        velocity: np.ndarray,
        goal: np.ndarray,
        neighbours: Neighbours,
        params: MPCParameters,
    ) -> dict[str, np.ndarray]:
        """The numeric values of every QP parameter for this state (shared by both backends)."""
        config = self.config
        a0, a1, a2, b = hocbf_rows(neighbours, params, config)
        sw = float(np.sqrt(params.w_track))
        v_ref = velocity_reference(position, goal, params.speed_ref, config.dt)
        return {
            "x0": np.concatenate([position, velocity]).astype(float),
            "ref": np.tile(sw * v_ref, (config.horizon, 1)),
            "sw": sw,
            "su": float(np.sqrt(params.w_effort)),
            "rho": float(params.slack_weight),
            "a0": a0,
            "a1": a1,
            "a2": a2,
            "b": b,
        }

    def solve(
        self,
        position: np.ndarray,
        velocity: np.ndarray,
        goal: np.ndarray,
        neighbours: Neighbours,
        params: MPCParameters,
    ) -> MPCStep:
        """Solve the MPC; if infeasible, the braking QP with slack on every constraint (counted)."""
        start = time.perf_counter()
        if self.rebuild_every_step:
            self._qp = self._build(braking=False)
        values = self.problem_values(position, velocity, goal, neighbours, params)
        self.n_solves += 1
        ok, u0, plan = self._qp.solve(values)
        fallback = False
        if not ok:
            self.n_infeasible += 1
            fallback = True
            brake = dict(values)
            brake.update(
                ref=np.zeros_like(values["ref"]), sw=1.0, su=0.1, rho=self.config.fallback_slack_weight
            )
            ok_brake, u0, plan = self._braking.solve(brake)
            if not ok_brake:  # last resort: full braking within the acceleration bounds
                self.n_fallback_failed += 1
                u0 = np.clip(-velocity / self.config.dt, -self.config.max_accel, self.config.max_accel)
                plan = np.zeros((0, 2))
        # qpOASES hot-starts from the previous active set, which moves the last bits of the answer; rounding
        # to 1e-9 m/s^2 makes episodes bit-reproducible (gymnasium's determinism check) at no physical cost
        u0 = np.round(np.clip(u0, -self.config.max_accel, self.config.max_accel), 9)
        return MPCStep(u0, ok, fallback, time.perf_counter() - start, plan)
