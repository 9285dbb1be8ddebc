"""``ShapeCrowdEnv``: a gymnasium crowd-navigation environment with arbitrary convex body shapes.

One robot (body 0) is controlled by the action (a normalised acceleration); the other fleet robots follow
``fleet_policy`` and the pedestrians ``pedestrian_policy``. Collisions are exact (signed distance < 0 of
the true shapes); ORCA and social-force agents see bounding circles, as in CrowdNav.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_int, check_positive
from neurips26.methods.srlmpc import geometry as geo
from neurips26.methods.srlmpc.baselines import ORCA, SocialForce, preferred_velocity

SCENARIOS = ("circle_crossing", "square_crossing", "corridor")
SHAPE_MIXES = ("mixed", "elongated", "discs")
FLEET_POLICIES = ("orca", "mpc")
PEDESTRIAN_POLICIES = ("orca", "social_force")
ROBOT, FLEET, PEDESTRIAN, WALL = 0, 1, 2, 3
FEATURES_PER_NEIGHBOUR = 8  # s*, n*(2), closing speed, width_i, width_j, relative velocity (2)
EMPTY_SEPARATION = 5.0  # s* of an empty neighbour slot (m)


@dataclass
class CrowdConfig:
    """Settings of ``ShapeCrowdEnv``."""

    scenario: str = param("circle_crossing", "issue: circle crossing, square crossing, corridor")
    n_bodies: int = param(10, "issue: 5-20 moving bodies (robots + pedestrians, walls not counted)")
    n_robots: int = param(3, "ours: a small heterogeneous fleet (ours + 2)")
    dt: float = param(0.2, "issue: dt 0.1-0.25 s")
    max_steps: int = param(120, "ours: 24 s for an 8 m crossing: room to yield in a bottleneck and recover")
    arena_radius: float = param(4.0, "CrowdNav: 4 m circle-crossing radius")
    shape_mix: str = param(
        "mixed", "issue: polygons, rectangles, ellipses, discs; 'elongated' stresses shape"
    )
    fleet_policy: str = param("orca", "issue: ORCA, fixed MPC or frozen SRL-MPC (ORCA is cheapest)")
    pedestrian_policy: str = param("orca", "issue/CrowdNav: ORCA pedestrians (or social force)")
    observation_noise: float = param(0.0, "issue robustness sweep: std (m, m/s) on observed neighbours")
    pedestrians_ignore_robot: bool = param(False, "issue robustness sweep: pedestrians blind to the robot")
    discomfort_dist: float = param(0.2, "CrowdNav: 0.2 m discomfort distance")
    goal_tolerance: float = param(0.3, "ours: goal reached within 30 cm")
    corridor_gap: float = param(1.6, "ours: a bottleneck two bodies barely pass side by side")
    max_speed: float = param(1.2, "ours: as SRLMPCConfig.max_speed")
    max_accel: float = param(2.0, "ours: as SRLMPCConfig.max_accel")
    k_neighbours: int = param(5, "issue: the k nearest neighbours' GSFs in the observation")

    def __post_init__(self) -> None:
        check_choice("scenario", self.scenario, SCENARIOS)
        check_choice("shape_mix", self.shape_mix, SHAPE_MIXES)
        check_choice("fleet_policy", self.fleet_policy, FLEET_POLICIES)
        check_choice("pedestrian_policy", self.pedestrian_policy, PEDESTRIAN_POLICIES)
        check_int("n_bodies", self.n_bodies, minimum=2)
        check_int("n_robots", self.n_robots, minimum=1)
        check_int("max_steps", self.max_steps, minimum=1)
        check_int("k_neighbours", self.k_neighbours, minimum=1)
        if self.n_robots > self.n_bodies:
            raise ValueError(f"n_robots={self.n_robots} must be <= n_bodies={self.n_bodies}")
        for name in ("dt", "arena_radius", "corridor_gap", "max_speed", "max_accel", "goal_tolerance"):
            check_positive(name, getattr(self, name))
        for name in ("observation_noise", "discomfort_dist"):
            check_positive(name, getattr(self, name), allow_zero=True)


def _body_shapes(rng: np.random.Generator, config: CrowdConfig) -> tuple[list[geo.ConvexShape], np.ndarray]:
    """Shapes (body frame, unrotated) and roles of the moving bodies."""
    roles = np.array(
        [ROBOT] + [FLEET] * (config.n_robots - 1) + [PEDESTRIAN] * (config.n_bodies - config.n_robots)
    )
    shapes: list[geo.ConvexShape] = []
    for role in roles:
        if config.shape_mix == "discs":
            shapes.append(geo.disc(0.35 if role != PEDESTRIAN else 0.22))
        elif config.shape_mix == "elongated":
            shapes.append(geo.rectangle(1.0, 0.25) if role != PEDESTRIAN else geo.ellipse(0.14, 0.32))
        elif role == ROBOT:
            shapes.append(geo.rectangle(0.9, 0.35))
        elif role == FLEET:
            if rng.random() < 0.5:
                shapes.append(geo.rectangle(rng.uniform(0.6, 0.9), rng.uniform(0.25, 0.4)))
            else:
                shapes.append(geo.random_convex_polygon(rng, rng.uniform(0.3, 0.45), int(rng.integers(4, 8))))
        else:
            shapes.append(
                geo.ellipse(0.16, 0.28) if rng.random() < 0.6 else geo.disc(rng.uniform(0.18, 0.25))
            )
    return shapes, roles


def _wall_shapes(config: CrowdConfig) -> tuple[list[geo.ConvexShape], np.ndarray]:
    if config.scenario != "corridor":
        return [], np.zeros((0, 2))
    thickness, length = 0.4, 3.0
    offset = config.corridor_gap / 2 + thickness / 2
    return [geo.rectangle(thickness, length)] * 2, np.array([[-offset, 0.0], [offset, 0.0]])


def _heading_rotation(shape: geo.ConvexShape, start: np.ndarray, goal: np.ndarray) -> geo.ConvexShape:
    """Orient the long axis (x) along the direction of travel; the body keeps it (no rotation dynamics)."""
    gap = goal - start
    return shape.rotated(float(np.arctan2(gap[1], gap[0])))


class ShapeCrowdEnv(gym.Env):
    """Crowd navigation with heterogeneous convex shapes (SRL-MPC's testbed).

    Observation: own velocity, goal offset and, for the k nearest bodies by signed distance, the GSFs
    (s*, n*, closing speed, support widths, relative velocity); action: acceleration / ``max_accel`` in
    [-1, 1]^2. Reward: progress - collision - discomfort (+ success), as in CrowdNav.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(
        self, config: CrowdConfig | None = None, render_mode: str | None = None, fleet_controller: Any = None
    ):
        self.config = config or CrowdConfig()
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r} is not allowed; choose None or 'rgb_array'")
        self.render_mode = render_mode
        self.fleet_controller = fleet_controller
        k = self.config.k_neighbours
        size = 4 + FEATURES_PER_NEIGHBOUR * k
        self.observation_space = gym.spaces.Box(-100.0, 100.0, shape=(size,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.orca = ORCA()
        self.social_force = SocialForce()
        self._fleet_mpc: Any = None

    # ----- episode set-up
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        rng = self.np_random
        config = self.config
        shapes, roles = _body_shapes(rng, config)
        walls, wall_pos = _wall_shapes(config)
        starts, goals, shapes = self._spawn(rng, shapes, walls, wall_pos)
        n_move = len(shapes)
        self.roles = np.concatenate([roles, np.full(len(walls), WALL)])
        self.shapes = shapes + walls
        self.batch = geo.ShapeBatch.from_shapes(self.shapes)
        self.positions = np.concatenate([starts, wall_pos]) if len(walls) else starts.copy()
        self.goals = np.concatenate([goals, wall_pos]) if len(walls) else goals.copy()
        self.velocities = np.zeros_like(self.positions)
        self.n_moving = n_move
        self.pref_speed = np.where(
            self.roles == PEDESTRIAN, rng.uniform(0.8, 1.2, len(self.roles)), config.max_speed
        )
        self.pref_speed[self.roles == WALL] = 0.0
        self._build_circle_view()
        self.steps = 0
        self._feature_cache: dict[tuple, Any] = {}
        self.path_length = 0.0
        self.trajectory = [self.positions[:n_move].copy()]
        self.obs_rng = np.random.default_rng(rng.integers(2**31))
        return self.observation(0), {}

    def _spawn(
        self,
        rng: np.random.Generator,
        shapes: list[geo.ConvexShape],
        walls: list[geo.ConvexShape],
        wall_pos: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, list[geo.ConvexShape]]:
        """Start, goal and oriented shape of every moving body, rejecting overlapping spawns (0.3 m)."""
        config, radius = self.config, self.config.arena_radius
        placed_shapes, placed_pos = list(walls), [p for p in wall_pos]
        goal_shapes, goal_pos = list(walls), [p for p in wall_pos]
        starts, goals, oriented = [], [], []
        for index, body_shape in enumerate(shapes):
            for _attempt in range(300):
                start, goal = self._draw(rng, index, radius)
                shape = _heading_rotation(body_shape, start, goal)
                if self._clear(shape, start, placed_shapes, placed_pos) and self._clear(
                    shape, goal, goal_shapes, goal_pos
                ):
                    break
            else:
                raise ValueError(
                    f"overlapping spawns: body {index} of scenario={config.scenario!r} found no free "
                    f"start or goal in 300 tries; lower n_bodies={config.n_bodies} "
                    f"or enlarge arena_radius={radius}"
                )
            starts.append(start)
            goals.append(goal)
            oriented.append(shape)
            placed_shapes.append(shape)
            placed_pos.append(start)
            goal_shapes.append(shape)
            goal_pos.append(goal)
        return np.array(starts), np.array(goals), oriented

    def _draw(self, rng: np.random.Generator, index: int, radius: float) -> tuple[np.ndarray, np.ndarray]:
        scenario = self.config.scenario
        if index == 0:
            return np.array([0.0, -radius]), np.array([0.0, radius])
        if scenario == "circle_crossing":
            angle = rng.uniform(0, 2 * np.pi)
            start = radius * np.array([np.cos(angle), np.sin(angle)])
            return start, -start + rng.normal(0, 0.3, 2)
        if scenario == "square_crossing":
            side = rng.choice([-1.0, 1.0])
            start = np.array([side * rng.uniform(1.0, radius), rng.uniform(-radius, radius)])
            return start, np.array([-side * rng.uniform(1.0, radius), rng.uniform(-radius, radius)])
        # corridor: counter-flows through the bottleneck (wider waiting areas for more than 10 bodies)
        side = 1.0 if index % 2 else -1.0
        half = 1.5 if self.config.n_bodies <= 10 else 3.0
        start = np.array([rng.uniform(-half, half), side * rng.uniform(2.0, radius)])
        return start, np.array([rng.uniform(-half, half), -side * rng.uniform(2.0, radius)])

    @staticmethod
    def _clear(
        shape: geo.ConvexShape, point: np.ndarray, shapes: list[geo.ConvexShape], positions: list[np.ndarray]
    ) -> bool:
        if not shapes:
            return True
        batch = geo.ShapeBatch.from_shapes([shape, *shapes])
        pos = np.array([point, *positions])
        s, _ = geo.signed_distance(pos, batch, np.zeros(len(shapes), int), np.arange(1, len(shapes) + 1))
        return bool(s.min() > 0.3)

    def _build_circle_view(self) -> None:
        """Discs the circle-based agents see: circumscribed discs, walls as chains of small discs."""
        owner, offset, radius = [], [], []
        for index, shape in enumerate(self.shapes):
            if self.roles[index] != WALL:
                owner.append(index)
                offset.append(np.zeros(2))
                radius.append(shape.circumradius())
                continue
            verts = shape.vertices
            half = np.abs(verts).max(axis=0)
            r = float(half.min())
            axis = int(np.argmax(half))
            for t in np.arange(-half[axis] + r, half[axis] - r + 1e-9, r):
                point = np.zeros(2)
                point[axis] = t
                owner.append(index)
                offset.append(point)
                radius.append(r * np.sqrt(2))
        self.circle_owner = np.array(owner)
        self.circle_offset = np.array(offset)
        self.circle_radius = np.array(radius)
        self.circle_batch = geo.ShapeBatch.from_shapes([geo.disc(r) for r in radius])

    def circle_positions(self) -> np.ndarray:
        return self.positions[self.circle_owner] + self.circle_offset

    # ----- dynamics
    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        config = self.config
        action = np.asarray(action, dtype=float).reshape(2)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action must be finite, got {action}")
        accel = np.zeros_like(self.positions)
        accel[0] = np.clip(action, -1.0, 1.0) * config.max_accel
        new_ped_vel = self._crowd_step(accel)
        dist_before = np.linalg.norm(self.goals[0] - self.positions[0])
        old = self.positions[0].copy()
        movers = self.roles != WALL
        robots = (self.roles == ROBOT) | (self.roles == FLEET)
        peds = self.roles == PEDESTRIAN
        # robots: forward-Euler double integrator (the MPC's model); pedestrians: kinematic
        self.positions[robots] += config.dt * self.velocities[robots]
        self.velocities[robots] = np.clip(
            self.velocities[robots] + config.dt * accel[robots], -config.max_speed, config.max_speed
        )
        self.velocities[peds] = new_ped_vel
        self.positions[peds] += config.dt * self.velocities[peds]
        self.velocities[~movers] = 0.0
        self.steps += 1
        self.path_length += float(np.linalg.norm(self.positions[0] - old))
        self.trajectory.append(self.positions[: self.n_moving].copy())
        separation = self.robot_separations()
        dist_after = np.linalg.norm(self.goals[0] - self.positions[0])
        collision = bool(separation.min() < 0)
        success = bool(dist_after < config.goal_tolerance) and not collision
        timeout = self.steps >= config.max_steps and not (collision or success)
        ped_sep = separation[self.roles[1:] == PEDESTRIAN]
        closest_ped = float(ped_sep.min()) if len(ped_sep) else np.inf
        discomfort = config.discomfort_dist > 0 and closest_ped < config.discomfort_dist
        reward = float(dist_before - dist_after) - 0.01
        if discomfort:
            reward -= 0.25 * (config.discomfort_dist - max(closest_ped, 0.0)) / config.discomfort_dist
        reward += 5.0 if success else 0.0
        reward -= 5.0 if collision else 0.0
        info = {
            "success": success,
            "collision": collision,
            "timeout": timeout,
            "min_separation": float(separation.min()),
            "discomfort": bool(discomfort),
        }
        return self.observation(0), reward, collision or success, timeout, info

    def _crowd_step(self, accel: np.ndarray) -> np.ndarray:
        """Fleet robots' accelerations (into ``accel``) and pedestrians' new velocities."""
        config = self.config
        pos, vel = self.circle_positions(), self.velocities[self.circle_owner]
        agents_body = np.flatnonzero((self.roles == FLEET) | (self.roles == PEDESTRIAN))
        circle_of = {body: int(np.flatnonzero(self.circle_owner == body)[0]) for body in agents_body}
        agents = np.array([circle_of[b] for b in agents_body], dtype=int)
        preferred = preferred_velocity(
            self.positions[agents_body], self.goals[agents_body], self.pref_speed[agents_body]
        )
        visible = np.ones((len(agents), len(pos)), dtype=bool)
        if config.pedestrians_ignore_robot:
            visible[self.roles[agents_body] == PEDESTRIAN] &= self.circle_owner != 0
        reactive = self.roles[self.circle_owner] != WALL
        max_speed = np.where(
            self.roles[self.circle_owner] == PEDESTRIAN,
            self.pref_speed[self.circle_owner] * 1.3,
            config.max_speed,
        )
        new_vel = np.zeros((len(agents), 2))
        if len(agents):
            if config.pedestrian_policy == "social_force":
                sf = self.social_force.accelerations(agents, pos, vel, self.circle_radius, preferred, visible)
                new_vel = vel[agents] + config.dt * sf
                speed = np.linalg.norm(new_vel, axis=1, keepdims=True)
                cap = max_speed[agents][:, None]
                new_vel = np.where(speed > cap, new_vel / np.maximum(speed, 1e-9) * cap, new_vel)
            if config.pedestrian_policy == "orca" or config.fleet_policy == "orca":
                orca_vel = self.orca.velocities(
                    agents, pos, vel, self.circle_radius, preferred, max_speed, reactive, visible, config.dt
                )
                use = (
                    (self.roles[agents_body] == FLEET)
                    if config.pedestrian_policy != "orca"
                    else np.ones(len(agents), bool)
                )
                if config.fleet_policy != "orca":
                    use &= self.roles[agents_body] == PEDESTRIAN
                new_vel = np.where(use[:, None], orca_vel, new_vel)
        fleet = self.roles[agents_body] == FLEET
        accel[agents_body[fleet]] = np.clip(
            (new_vel[fleet] - self.velocities[agents_body[fleet]]) / config.dt,
            -config.max_accel,
            config.max_accel,
        )
        if config.fleet_policy == "mpc" or self.fleet_controller is not None:
            for body in agents_body[fleet]:
                accel[body] = self._fleet_action(int(body))
        return new_vel[self.roles[agents_body] == PEDESTRIAN]

    def _fleet_action(self, body: int) -> np.ndarray:
        if self.fleet_controller is not None:
            return self.fleet_controller.act(self, body)
        if self._fleet_mpc is None:
            from neurips26.methods.srlmpc.controllers import HOCBFMPCController

            self._fleet_mpc = HOCBFMPCController()
        return self._fleet_mpc.act(self, body)

    def set_state(
        self,
        positions: np.ndarray | None = None,
        velocities: np.ndarray | None = None,
        goals: np.ndarray | None = None,
    ) -> None:
        """Overwrite body states (scripted scenes, tests); cached perception is dropped."""
        for name, value in (("positions", positions), ("velocities", velocities), ("goals", goals)):
            if value is None:
                continue
            value = np.asarray(value, dtype=float)
            if value.shape != self.positions.shape:
                raise ValueError(f"{name} must have shape {self.positions.shape}, got {value.shape}")
            setattr(self, name, value.copy())
        self._feature_cache = {}

    # ----- perception
    def robot_separations(self, index: int = 0) -> np.ndarray:
        """Exact signed distances of body ``index`` to every other body (others in index order)."""
        return self._all_features(index, "shape", noisy=False)[0].s_star

    def neighbour_features(
        self, index: int = 0, k: int | None = None, perception: str = "shape"
    ) -> tuple[geo.GSF, np.ndarray, np.ndarray, np.ndarray]:
        """GSFs of body ``index`` against its k nearest bodies by signed distance (observed, possibly noisy).

        ``perception="circle"`` computes them on the circle view (circumscribed discs, disc-chain walls).
        Returns (gsf, observed positions (k', 2), observed velocities (k', 2), body or disc indices).
        """
        k = k or self.config.k_neighbours
        gsf, pos, vel, others = self._all_features(index, perception, self.config.observation_noise > 0)
        order = np.argsort(gsf.s_star, kind="stable")[:k]
        picked = geo.GSF(
            *(getattr(gsf, f)[order] for f in ("s_star", "normal", "closing_speed", "width_i", "width_j"))
        )
        return picked, pos[order], vel[order], others[order]

    def _all_features(
        self, index: int, perception: str, noisy: bool
    ) -> tuple[geo.GSF, np.ndarray, np.ndarray, np.ndarray]:
        """GSFs against every other body, computed once per step and view (controller, observation and
        collision check share them)."""
        key = (self.steps, index, perception, noisy)
        if key not in self._feature_cache:
            if any(cached[0] != self.steps for cached in self._feature_cache):
                self._feature_cache = {}
            self._feature_cache[key] = self._compute_features(index, perception, noisy)
        return self._feature_cache[key]

    def _compute_features(
        self, index: int, perception: str, noisy: bool
    ) -> tuple[geo.GSF, np.ndarray, np.ndarray, np.ndarray]:
        if perception == "shape":
            pos, vel, batch = self.positions.copy(), self.velocities.copy(), self.batch
            me, owner = index, np.arange(len(self.shapes))
        elif perception == "circle":
            pos, vel, batch = (
                self.circle_positions(),
                self.velocities[self.circle_owner].copy(),
                self.circle_batch,
            )
            owner = self.circle_owner
            me = int(np.flatnonzero(owner == index)[0])
        else:
            raise ValueError(f"perception={perception!r} is not allowed; choose 'shape' or 'circle'")
        others = np.flatnonzero(owner != index)
        if noisy:
            moving = self.roles[owner[others]] != WALL
            noise = self.obs_rng.normal(0, self.config.observation_noise, (2, len(others), 2))
            pos[others] += noise[0] * moving[:, None]
            vel[others] += noise[1] * moving[:, None]
        gsf = geo.geometric_separation_features(pos, vel, batch, np.full(len(others), me), others)
        return gsf, pos[others], vel[others], others

    def observation(self, index: int = 0) -> np.ndarray:
        """The observation of body ``index`` (the env returns body 0's)."""
        config = self.config
        gsf, _, vel, _ = self.neighbour_features(index)
        k = config.k_neighbours
        feats = np.zeros((k, FEATURES_PER_NEIGHBOUR))
        feats[:, 0] = EMPTY_SEPARATION
        m = len(gsf.s_star)
        feats[:m, 0] = np.minimum(gsf.s_star, EMPTY_SEPARATION)
        feats[:m, 1:3] = gsf.normal
        feats[:m, 3] = gsf.closing_speed
        feats[:m, 4] = gsf.width_i
        feats[:m, 5] = gsf.width_j
        feats[:m, 6:8] = vel - self.velocities[index]
        own = np.concatenate(
            [self.velocities[index], (self.goals[index] - self.positions[index]) / config.arena_radius]
        )
        return np.clip(np.concatenate([own, feats.ravel()]), -100, 100).astype(np.float32)

    # ----- rendering
    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        size, half = 160, self.config.arena_radius + 1.0
        axis = np.linspace(-half, half, size)
        grid = np.stack(np.meshgrid(axis, axis[::-1]), axis=-1).reshape(-1, 2)
        image = np.full((size * size, 3), 255, dtype=np.uint8)
        colours = {ROBOT: (200, 30, 30), FLEET: (230, 140, 20), PEDESTRIAN: (40, 90, 200), WALL: (90, 90, 90)}
        for index, shape in enumerate(self.shapes):
            rel = grid - self.positions[index]
            if shape.kind in ("polygon", "rectangle"):
                batch = geo.ShapeBatch.from_shapes([shape])
                inside = np.all(
                    rel @ batch.normals[0].T <= (batch.normals[0] * batch.edge_start[0]).sum(1), axis=1
                )
            else:
                inside = np.einsum("pi,ij,pj->p", rel, np.linalg.inv(shape.ellipse), rel) <= 1.0
            image[inside] = colours[int(self.roles[index])]
        return image.reshape(size, size, 3)
