"""Crowd-navigation baselines, re-implemented in numpy (marked): ORCA and the social-force model.

Both see every body as a disc (its circumscribed circle; walls as chains of small discs), which is the
"circle" assumption SRL-MPC removes. ``python-rvo2`` (the reference ORCA) is not pip-installable, so ORCA is
re-implemented from van den Berg et al., "Reciprocal n-body collision avoidance" (ISRR 2011): the
half-plane construction of Sec. 5 and the 2-D incremental linear programs of its Sec. 5.2.
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-9


def _det(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def orca_halfplanes(
    position: np.ndarray,
    velocity: np.ndarray,
    radius: float,
    others_pos: np.ndarray,
    others_vel: np.ndarray,
    others_radius: np.ndarray,
    responsibility: np.ndarray,
    time_horizon: float,
    dt: float,
) -> tuple[np.ndarray, np.ndarray]:
    """ORCA half-planes of one agent against m neighbours (re-implemented; vectorised over neighbours).

    Returns (points, directions), each (m, 2): the permitted velocities lie left of each directed line,
    ``det(direction, v - point) >= 0``. ``responsibility`` is 0.5 for reciprocating agents, 1 for static
    or non-reacting ones.
    """
    rel_pos = others_pos - position
    rel_vel = velocity - others_vel
    dist_sq = (rel_pos**2).sum(axis=1)
    r = radius + others_radius
    r_sq = r * r
    apart = dist_sq > r_sq
    # apart: velocity obstacle truncated at time_horizon; overlapping: resolve within one step
    inv_t = np.where(apart, 1.0 / time_horizon, 1.0 / dt)
    w = rel_vel - rel_pos * inv_t[:, None]
    w_len = np.sqrt((w**2).sum(axis=1))
    unit_w = w / np.maximum(w_len, _EPS)[:, None]
    dot1 = (w * rel_pos).sum(axis=1)
    cutoff = ~apart | ((dot1 < 0) & (dot1**2 > r_sq * w_len**2))
    direction = np.stack([unit_w[:, 1], -unit_w[:, 0]], axis=1)
    u = ((r * inv_t - w_len)[:, None]) * unit_w
    # legs of the cone
    leg = np.sqrt(np.maximum(dist_sq - r_sq, 0.0))
    left = rel_pos[:, 0] * w[:, 1] - rel_pos[:, 1] * w[:, 0] > 0
    left_dir = np.stack(
        [rel_pos[:, 0] * leg - rel_pos[:, 1] * r, rel_pos[:, 0] * r + rel_pos[:, 1] * leg], axis=1
    )
    right_dir = -np.stack(
        [rel_pos[:, 0] * leg + rel_pos[:, 1] * r, -rel_pos[:, 0] * r + rel_pos[:, 1] * leg], axis=1
    )
    leg_dir = np.where(left[:, None], left_dir, right_dir) / np.maximum(dist_sq, _EPS)[:, None]
    leg_u = (rel_vel * leg_dir).sum(axis=1)[:, None] * leg_dir - rel_vel
    direction = np.where(cutoff[:, None], direction, leg_dir)
    u = np.where(cutoff[:, None], u, leg_u)
    points = velocity + responsibility[:, None] * u
    return points, direction


def _lp1(
    points: np.ndarray, dirs: np.ndarray, line: int, radius: float, opt: np.ndarray, direction_opt: bool
) -> np.ndarray | None:
    """Optimum on line ``line`` subject to lines < line and the speed disc (None if infeasible)."""
    p, d = points[line], dirs[line]
    dot = float(p @ d)
    disc = dot * dot + radius * radius - float(p @ p)
    if disc < 0:
        return None
    root = np.sqrt(disc)
    t_left, t_right = -dot - root, -dot + root
    for i in range(line):
        denominator = _det(d, dirs[i])
        numerator = _det(dirs[i], p - points[i])
        if abs(denominator) <= _EPS:
            if numerator < 0:
                return None
            continue
        t = numerator / denominator
        if denominator >= 0:
            t_right = min(t_right, t)
        else:
            t_left = max(t_left, t)
        if t_left > t_right:
            return None
    if direction_opt:
        t = t_right if float(opt @ d) > 0 else t_left
    else:
        t = min(max(float(d @ (opt - p)), t_left), t_right)
    return p + t * d


def _lp2(
    points: np.ndarray, dirs: np.ndarray, radius: float, opt: np.ndarray, direction_opt: bool
) -> tuple[int, np.ndarray]:
    """Closest velocity to ``opt`` satisfying all lines in the speed disc; returns (failed line, v)."""
    if direction_opt:
        result = opt * radius
    elif float(opt @ opt) > radius * radius:
        result = opt / np.linalg.norm(opt) * radius
    else:
        result = opt.copy()
    for i in range(len(points)):
        if _det(dirs[i], points[i] - result) > 0:
            candidate = _lp1(points, dirs, i, radius, opt, direction_opt)
            if candidate is None:
                return i, result
            result = candidate
    return len(points), result


def _lp3(points: np.ndarray, dirs: np.ndarray, begin: int, radius: float, result: np.ndarray) -> np.ndarray:
    """Infeasible case: the velocity minimising the largest violation of the remaining lines."""
    distance = 0.0
    for i in range(begin, len(points)):
        if _det(dirs[i], points[i] - result) > distance:
            proj_p, proj_d = [], []
            for j in range(i):
                determinant = _det(dirs[i], dirs[j])
                if abs(determinant) <= _EPS:
                    if float(dirs[i] @ dirs[j]) > 0:
                        continue
                    point = 0.5 * (points[i] + points[j])
                else:
                    point = points[i] + (_det(dirs[j], points[i] - points[j]) / determinant) * dirs[i]
                direction = dirs[j] - dirs[i]
                proj_p.append(point)
                proj_d.append(direction / max(np.linalg.norm(direction), _EPS))
            temp = result
            opt = np.array([-dirs[i][1], dirs[i][0]])
            pp = np.array(proj_p).reshape(-1, 2)
            pd = np.array(proj_d).reshape(-1, 2)
            fail, result = _lp2(pp, pd, radius, opt, True)
            if fail < len(pp):
                result = temp
            distance = _det(dirs[i], points[i] - result)
    return result


def orca_velocity(
    points: np.ndarray, dirs: np.ndarray, max_speed: float, preferred: np.ndarray
) -> np.ndarray:
    """The ORCA velocity: closest to ``preferred`` within all half-planes and the speed disc."""
    fail, result = _lp2(points, dirs, max_speed, preferred, False)
    if fail < len(points):
        result = _lp3(points, dirs, fail, max_speed, result)
    return result


def preferred_velocity(position: np.ndarray, goal: np.ndarray, speed: np.ndarray | float) -> np.ndarray:
    """Towards the goal at ``speed``, slowing within one metre of it: shape (N, 2) or (2,)."""
    gap = goal - position
    dist = np.linalg.norm(gap, axis=-1, keepdims=True)
    speed = np.asarray(speed, dtype=float)
    if speed.ndim and gap.ndim > 1:
        speed = speed[:, None]
    return np.where(dist > 1e-9, gap / np.maximum(dist, 1e-9) * np.minimum(speed, dist), 0.0)


class ORCA:
    """ORCA with bounding circles (re-implemented, van den Berg et al. 2011) for a set of disc agents.

    Parameters
    ----------
    time_horizon : 2 s (CrowdNav's humans use 5 s; 2 s is less timid in dense scenes, ours).
    neighbour_dist : 4 m; max_neighbours : 10 (CrowdNav's values are 10 m and 10).
    """

    def __init__(self, time_horizon: float = 2.0, neighbour_dist: float = 4.0, max_neighbours: int = 10):
        if time_horizon <= 0 or neighbour_dist <= 0 or max_neighbours < 1:
            raise ValueError(
                "ORCA needs time_horizon > 0, neighbour_dist > 0 and max_neighbours >= 1, got "
                f"{time_horizon}, {neighbour_dist}, {max_neighbours}"
            )
        self.time_horizon = time_horizon
        self.neighbour_dist = neighbour_dist
        self.max_neighbours = max_neighbours

    def velocities(
        self,
        agents: np.ndarray,
        positions: np.ndarray,
        velocities: np.ndarray,
        radii: np.ndarray,
        preferred: np.ndarray,
        max_speed: np.ndarray,
        reactive: np.ndarray,
        visible: np.ndarray,
        dt: float,
    ) -> np.ndarray:
        """New velocities of ``agents`` (indices) among all discs.

        ``reactive[j]``: j avoids too (responsibility 0.5, else 1); ``visible[a, j]``: agent a sees j.
        """
        out = np.zeros((len(agents), 2))
        dist = np.linalg.norm(positions[None, :, :] - positions[agents][:, None, :], axis=2)
        for row, a in enumerate(agents):
            mask = visible[row] & (dist[row] < self.neighbour_dist + radii[a] + radii)
            mask[a] = False
            others = np.flatnonzero(mask)
            others = others[np.argsort(dist[row, others])][: self.max_neighbours]
            if len(others) == 0:
                v = preferred[row]
                speed = np.linalg.norm(v)
                out[row] = v if speed <= max_speed[a] else v / speed * max_speed[a]
                continue
            points, dirs = orca_halfplanes(
                positions[a],
                velocities[a],
                radii[a],
                positions[others],
                velocities[others],
                radii[others],
                np.where(reactive[others], 0.5, 1.0),
                self.time_horizon,
                dt,
            )
            out[row] = orca_velocity(points, dirs, float(max_speed[a]), preferred[row])
        return out


class SocialForce:
    """Social-force model (Helbing & Molnar 1995), circular bodies (re-implemented, vectorised).

    a_i = (v0 e_i - v_i) / tau + sum_j A exp((r_ij - d_ij) / B) n_ij w(phi_ij),
    w(phi) = lambda + (1 - lambda) (1 + cos phi) / 2 (anisotropy: more weight to bodies in front).
    Defaults: A = 2.0 m/s^2, B = 0.3 m, tau = 0.5 s, lambda = 0.35 (Helbing-style values, ours).
    """

    def __init__(
        self, strength: float = 2.0, range_: float = 0.3, relax: float = 0.5, anisotropy: float = 0.35
    ):
        if strength <= 0 or range_ <= 0 or relax <= 0 or not 0 <= anisotropy <= 1:
            raise ValueError("SocialForce needs strength, range_, relax > 0 and 0 <= anisotropy <= 1")
        self.strength, self.range_, self.relax, self.anisotropy = strength, range_, relax, anisotropy

    def accelerations(
        self,
        agents: np.ndarray,
        positions: np.ndarray,
        velocities: np.ndarray,
        radii: np.ndarray,
        preferred: np.ndarray,
        visible: np.ndarray,
    ) -> np.ndarray:
        """Accelerations of ``agents`` (indices) among all discs; ``visible[a, j]``: agent a feels j."""
        pos_a = positions[agents]
        gap = pos_a[:, None, :] - positions[None, :, :]  # from j to i
        dist = np.linalg.norm(gap, axis=2)
        dist_safe = np.maximum(dist, 1e-6)
        normal = gap / dist_safe[..., None]
        radius_sum = radii[agents][:, None] + radii[None, :]
        magnitude = self.strength * np.exp((radius_sum - dist) / self.range_)
        heading = preferred / np.maximum(np.linalg.norm(preferred, axis=1, keepdims=True), 1e-9)
        cos_phi = -(normal * heading[:, None, :]).sum(axis=2)
        weight = self.anisotropy + (1 - self.anisotropy) * (1 + cos_phi) / 2
        mask = visible.copy()
        mask[np.arange(len(agents)), agents] = False
        force = ((magnitude * weight * mask)[..., None] * normal).sum(axis=1)
        return (preferred - velocities[agents]) / self.relax + force
