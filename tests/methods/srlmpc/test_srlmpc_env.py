"""SRL-MPC's environments, baselines and tuner: check_env, ORCA behaviour, equivalences, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("casadi")

from gymnasium.utils.env_checker import check_env

from neurips26.methods.srlmpc.baselines import ORCA, orca_halfplanes
from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.controllers import HOCBFMPCController
from neurips26.methods.srlmpc.hocbf_mpc import MPCParameters
from neurips26.methods.srlmpc.integration import CrowdConfig, ShapeCrowdEnv
from neurips26.methods.srlmpc.tuner import (
    ConstantPolicy,
    MPCParameterEnv,
    SRLMPCController,
    action_size,
    parameters_to_action,
)


def test_both_envs_pass_gymnasiums_check_env() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium's advisory about envs made without gymnasium.make
        check_env(ShapeCrowdEnv(CrowdConfig(n_bodies=5), render_mode="rgb_array"))
        check_env(MPCParameterEnv(CrowdConfig(n_bodies=5)), skip_render_check=True)


def test_reset_is_seeded_and_render_draws_every_body() -> None:
    env = ShapeCrowdEnv(CrowdConfig(scenario="corridor", n_bodies=6), render_mode="rgb_array")
    a, _ = env.reset(seed=4)
    pos = env.positions.copy()
    b, _ = env.reset(seed=4)
    assert np.array_equal(a, b) and np.array_equal(pos, env.positions)
    image = env.render()
    assert image.shape == (160, 160, 3) and image.dtype == np.uint8
    assert len(np.unique(image.reshape(-1, 3), axis=0)) >= 4  # background, robot, fleet/pedestrians, walls


def _episode_actions(env: ShapeCrowdEnv, controller, seed: int, steps: int = 25) -> np.ndarray:
    env.reset(seed=seed)
    controller.reset()
    out = []
    for _ in range(steps):
        accel = controller.act(env, 0)
        out.append(accel)
        _, _, term, trunc, _ = env.step(accel / env.config.max_accel)
        if term or trunc:
            break
    return np.array(out)


def test_constant_policy_reproduces_fixed_hocbf_mpc_step_for_step() -> None:
    """Degenerate equivalence: SRL-MPC with a constant policy equal to the fixed parameters."""
    config = SRLMPCConfig()
    base = MPCParameters.constant(config)
    env = ShapeCrowdEnv(CrowdConfig(n_bodies=6))
    tuned = SRLMPCController(ConstantPolicy(parameters_to_action(base, base, config)), config)
    fixed = HOCBFMPCController(config, base)
    np.testing.assert_allclose(_episode_actions(env, tuned, 3), _episode_actions(env, fixed, 3), atol=1e-9)


def _run_constant_policy(action: np.ndarray, steps: int = 15) -> tuple[float, np.ndarray]:
    """(metres the robot moved towards its goal, its accelerations) under SRL-MPC with a fixed action."""
    config = SRLMPCConfig()
    controller = SRLMPCController(ConstantPolicy(action), config)
    env = ShapeCrowdEnv(CrowdConfig(n_bodies=5))
    env.reset(seed=0)
    controller.reset()
    start = np.linalg.norm(env.goals[0] - env.positions[0])
    accelerations = []
    for _ in range(steps):
        accelerations.append(controller.act(env, 0))
        _, _, term, trunc, _ = env.step(accelerations[-1] / env.config.max_accel)
        if term or trunc:
            break
    return start - np.linalg.norm(env.goals[0] - env.positions[0]), np.array(accelerations)


@pytest.mark.parametrize("policy_wired", [True, False], ids=["wired", "policy_ignored"])
def test_idea_the_policys_parameters_steer_the_controller(monkeypatch, policy_wired) -> None:
    """Central idea (the RL policy tunes the MPC), through ``SRLMPCController.act``: the policy's speed
    reference sets how far the robot gets (15 steps: 1.2 m at a = -1 vs 2.5 m at a = +1), and its
    per-neighbour HOCBF gains change the accelerations. The negative case is issue 43's break: the
    controller still queries the policy but runs the base parameters."""
    if not policy_wired:
        current_params = SRLMPCController.current_params

        def ignoring_the_policy(self, env, index):
            current_params(self, env, index)
            return self.base

        monkeypatch.setattr(SRLMPCController, "current_params", ignoring_the_policy)
    k = SRLMPCConfig().k_neighbours
    size = action_size(SRLMPCConfig())

    def action(group: slice, value: float) -> np.ndarray:
        out = np.zeros(size, dtype=np.float32)
        out[group] = value
        return out

    speed = slice(2 * k + 1, 2 * k + 2)  # the speed reference
    slow, _ = _run_constant_policy(action(speed, -1.0))
    fast, _ = _run_constant_policy(action(speed, 1.0))
    gains = slice(0, 2 * k)  # gamma1, gamma2 of every neighbour slot
    _, cautious = _run_constant_policy(action(gains, -1.0))
    _, eager = _run_constant_policy(action(gains, 1.0))
    n = min(len(cautious), len(eager))
    gains_matter = float(np.abs(cautious[:n] - eager[:n]).max()) > 0.1
    assert (fast > slow + 0.5) == policy_wired, (slow, fast)
    assert gains_matter == policy_wired


def test_for_discs_the_shape_aware_mpc_equals_the_circle_mpc_cbf() -> None:
    env = ShapeCrowdEnv(CrowdConfig(n_bodies=6, shape_mix="discs"))
    shape = HOCBFMPCController(perception="shape")
    circle = HOCBFMPCController(perception="circle")
    np.testing.assert_allclose(_episode_actions(env, shape, 1), _episode_actions(env, circle, 1), atol=1e-7)


def _through_gap(perception: str) -> float:
    """Robot (0.9 x 0.35 m rectangle) through a 0.8 m gap, the pedestrian moved out of the way."""
    env = ShapeCrowdEnv(
        CrowdConfig(scenario="corridor", n_bodies=2, n_robots=1, corridor_gap=0.8, max_steps=80)
    )
    env.reset(seed=0)
    far = env.positions.copy()
    far[1] = [9.0, 9.0]
    env.set_state(positions=far, goals=np.where(np.arange(len(far))[:, None] == 1, far, env.goals))
    controller = HOCBFMPCController(perception=perception)
    for _ in range(80):
        _, _, term, trunc, info = env.step(controller.act(env, 0) / env.config.max_accel)
        if term or trunc:
            break
    assert not info["collision"]
    return float(env.positions[0, 1])


def test_exact_shapes_pass_a_gap_that_circumscribed_circles_block() -> None:
    """Idea-off (GSFs): with circle perception the robot cannot enter the 0.8 m bottleneck."""
    assert _through_gap("shape") > 2.0  # through the 3 m long bottleneck (it spans y in [-1.5, 1.5])
    assert _through_gap("circle") < -1.5


def test_orca_discs_swapping_head_on_pass_symmetrically_within_their_half_planes() -> None:
    orca = ORCA(time_horizon=2.0)
    pos = np.array([[-2.0, 0.02], [2.0, -0.02]])  # exact alignment is ORCA's known symmetric deadlock
    vel = np.zeros((2, 2))
    goals = pos[::-1].copy()
    radii = np.array([0.3, 0.3])
    dt, closest = 0.1, np.inf
    for _ in range(80):
        pref = goals - pos
        pref = pref / np.maximum(np.linalg.norm(pref, axis=1, keepdims=True), 1.0)
        new = orca.velocities(
            np.arange(2), pos, vel, radii, pref, np.ones(2), np.ones(2, bool), np.ones((2, 2), bool), dt
        )
        for a in range(2):  # the chosen velocity satisfies every ORCA half-plane (left of each line)
            points, dirs = orca_halfplanes(
                pos[a], vel[a], 0.3, pos[[1 - a]], vel[[1 - a]], radii[[1 - a]], np.array([0.5]), 2.0, dt
            )
            rel = new[a] - points
            assert np.all(dirs[:, 0] * rel[:, 1] - dirs[:, 1] * rel[:, 0] >= -1e-9)
        vel = new
        pos = pos + dt * vel
        closest = min(closest, np.linalg.norm(pos[0] - pos[1]) - 0.6)
        np.testing.assert_allclose(pos[0], -pos[1], atol=1e-9)  # point symmetry of the swap
    assert closest > -1e-9
    assert np.linalg.norm(pos - goals, axis=1).max() < 0.2


def test_learned_parameters_depend_on_neighbour_geometry() -> None:
    """Idea-off (RL tuning): the committed policy's parameters move with the nearest s*; a constant
    policy's do not."""
    from neurips26.methods.srlmpc.training import SRLMPC_POLICY

    if not SRLMPC_POLICY.exists():
        pytest.skip("no committed SRL-MPC policy")
    from stable_baselines3 import PPO

    model = PPO.load(SRLMPC_POLICY, device="cpu")
    env = ShapeCrowdEnv(CrowdConfig())
    obs, _ = env.reset(seed=0)
    near, far = obs.copy(), obs.copy()
    near[4], far[4] = 0.1, 3.0  # nearest neighbour's signed distance
    a_near, _ = model.predict(near, deterministic=True)
    a_far, _ = model.predict(far, deterministic=True)
    assert np.abs(a_near - a_far).max() > 1e-3
    constant = ConstantPolicy(np.zeros(action_size(SRLMPCConfig())))
    assert np.array_equal(constant.predict(near)[0], constant.predict(far)[0])


def test_policy_save_and_load_round_trip(tmp_path) -> None:
    from stable_baselines3 import PPO

    env = ShapeCrowdEnv(CrowdConfig(n_bodies=5, max_steps=10))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.learn(32)
    model.save(tmp_path / "p.zip")
    loaded = PPO.load(tmp_path / "p.zip", device="cpu")
    obs, _ = env.reset(seed=1)
    assert np.array_equal(
        model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0]
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scenario": "maze"}, "scenario"),
        ({"dt": 0.0}, "dt"),
        ({"n_bodies": 3, "n_robots": 4}, "n_robots"),
        ({"shape_mix": "stars"}, "shape_mix"),
    ],
)
def test_bad_env_config_names_the_argument(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        CrowdConfig(**kwargs)


def test_overlapping_spawns_raise_a_clear_error() -> None:
    env = ShapeCrowdEnv(CrowdConfig(n_bodies=20, arena_radius=0.6))
    with pytest.raises(ValueError, match="overlapping spawns"):
        env.reset(seed=0)


def test_experiment_collision_check_agrees_with_shapely_and_bad_episode_count_is_named() -> None:
    from neurips26.methods.srlmpc.experiment import SRLMPCExperimentConfig, evaluate_episode, shapely_overlap

    env = ShapeCrowdEnv(CrowdConfig(scenario="corridor", n_bodies=4, max_steps=40))
    nominal = HOCBFMPCController(use_cbf=False)
    outcome = evaluate_episode(env, nominal, seed=0)
    assert outcome["collision"] == 1.0 and outcome["success"] == 0.0  # straight into the wall or a body
    assert shapely_overlap(env) == (env.robot_separations().min() < -1e-6)
    with pytest.raises(ValueError, match="episodes"):
        SRLMPCExperimentConfig(episodes=0)
