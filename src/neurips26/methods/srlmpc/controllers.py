"""Controllers that drive body ``index`` of a ``ShapeCrowdEnv``: ``act(env, index) -> acceleration``.

``HOCBFMPCController`` is the shape-aware HOCBF-MPC with fixed parameters (or, with ``perception="circle"``,
the MPC-CBF baseline on circumscribed circles); ORCA and social force drive the robot with bounding
circles; ``PolicyController`` runs a stable-baselines3 policy on the env's observation (pure PPO).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from neurips26.methods.srlmpc.baselines import ORCA, SocialForce, preferred_velocity
from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.hocbf_mpc import HOCBFMPC, MPCParameters, MPCStep, Neighbours
from neurips26.methods.srlmpc.integration import WALL, ShapeCrowdEnv

PERCEPTIONS = ("shape", "circle")


class Controller:
    """Base: counts control steps and their wall time; subclasses implement ``_act``."""

    def __init__(self) -> None:
        self.step_times: list[float] = []
        self.n_solves = 0
        self.n_infeasible = 0

    def reset(self) -> None:
        """Forget per-episode state (counters persist over episodes)."""

    def act(self, env: ShapeCrowdEnv, index: int = 0) -> np.ndarray:
        start = time.perf_counter()
        accel = self._act(env, index)
        self.step_times.append(time.perf_counter() - start)
        return np.asarray(accel, dtype=float)

    def _act(self, env: ShapeCrowdEnv, index: int) -> np.ndarray:
        raise NotImplementedError


def mpc_neighbours(env: ShapeCrowdEnv, index: int, k: int, perception: str = "shape") -> Neighbours:
    """The frozen HOCBF linearisation (n*, support widths, observed neighbour states) of the k nearest."""
    gsf, pos, vel, _ = env.neighbour_features(index, k, perception)
    return Neighbours(gsf.normal, gsf.width_i + gsf.width_j, pos, vel)


class HOCBFMPCController(Controller):
    """Fixed-parameter HOCBF-MPC on GSFs (ours without the learned tuner).

    Parameters
    ----------
    config : ``SRLMPCConfig``; params : fixed ``MPCParameters`` (default: the config's constants);
    perception : ``"shape"`` (exact GSFs) or ``"circle"`` (circumscribed discs: the MPC-CBF baseline);
    use_cbf : False drops every HOCBF constraint (the nominal MPC, a negative control).
    """

    def __init__(
        self,
        config: SRLMPCConfig | None = None,
        params: MPCParameters | None = None,
        perception: str = "shape",
        use_cbf: bool = True,
        mpc: HOCBFMPC | None = None,
    ) -> None:
        super().__init__()
        if perception not in PERCEPTIONS:
            raise ValueError(f"perception={perception!r} is not allowed; choose one of {PERCEPTIONS}")
        self.config = config or SRLMPCConfig()
        self.mpc = mpc or HOCBFMPC(self.config)
        self.params = params or MPCParameters.constant(self.config)
        self.perception = perception
        self.use_cbf = use_cbf
        self.n_clipped = 0
        self.last_step: MPCStep | None = None

    def current_params(self, env: ShapeCrowdEnv, index: int) -> MPCParameters:
        return self.params

    def _act(self, env: ShapeCrowdEnv, index: int) -> np.ndarray:
        params, clipped = self.current_params(env, index).clipped(self.config)
        self.n_clipped += clipped
        if self.use_cbf:
            neighbours = mpc_neighbours(env, index, self.config.k_neighbours, self.perception)
        else:
            neighbours = Neighbours.empty()
        step = self.mpc.solve(
            env.positions[index], env.velocities[index], env.goals[index], neighbours, params
        )
        self.n_solves += 1
        self.n_infeasible += int(step.fallback)
        self.last_step = step
        return step.acceleration


class ORCAController(Controller):
    """ORCA (re-implemented) for the robot on bounding circles: velocity -> acceleration within bounds."""

    def __init__(self, config: SRLMPCConfig | None = None, orca: ORCA | None = None) -> None:
        super().__init__()
        self.config = config or SRLMPCConfig()
        self.orca = orca or ORCA()

    def _act(self, env: ShapeCrowdEnv, index: int) -> np.ndarray:
        pos, vel = env.circle_positions(), env.velocities[env.circle_owner]
        me = int(np.flatnonzero(env.circle_owner == index)[0])
        preferred = preferred_velocity(env.positions[index], env.goals[index], self.config.speed_ref)[None]
        reactive = env.roles[env.circle_owner] != WALL
        reactive[me] = False
        visible = np.ones((1, len(pos)), dtype=bool)
        speed = np.full(len(pos), self.config.max_speed)
        target = self.orca.velocities(
            np.array([me]), pos, vel, env.circle_radius, preferred, speed, reactive, visible, env.config.dt
        )[0]
        target = np.clip(target, -self.config.max_speed, self.config.max_speed)
        return np.clip(
            (target - env.velocities[index]) / env.config.dt, -self.config.max_accel, self.config.max_accel
        )


class SocialForceController(Controller):
    """Social force (re-implemented) for the robot on bounding circles."""

    def __init__(self, config: SRLMPCConfig | None = None, model: SocialForce | None = None) -> None:
        super().__init__()
        self.config = config or SRLMPCConfig()
        self.model = model or SocialForce()

    def _act(self, env: ShapeCrowdEnv, index: int) -> np.ndarray:
        pos, vel = env.circle_positions(), env.velocities[env.circle_owner]
        me = int(np.flatnonzero(env.circle_owner == index)[0])
        preferred = preferred_velocity(env.positions[index], env.goals[index], self.config.speed_ref)[None]
        visible = (env.circle_owner != index)[None, :]
        accel = self.model.accelerations(np.array([me]), pos, vel, env.circle_radius, preferred, visible)[0]
        return np.clip(accel, -self.config.max_accel, self.config.max_accel)


class PolicyController(Controller):
    """A stable-baselines3 policy on ``ShapeCrowdEnv``'s observation (pure PPO on accelerations)."""

    def __init__(self, model: Any, max_accel: float) -> None:
        super().__init__()
        self.model = model
        self.max_accel = max_accel

    def _act(self, env: ShapeCrowdEnv, index: int) -> np.ndarray:
        if index != 0:
            raise ValueError("PolicyController drives body 0 (the observation is body 0's)")
        action, _ = self.model.predict(env.observation(0), deterministic=True)
        return np.clip(np.asarray(action, dtype=float), -1.0, 1.0) * self.max_accel
