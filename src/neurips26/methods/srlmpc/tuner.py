"""The learned tuner of SRL-MPC: ``MPCParameterEnv`` (MPC parameters as the action) and ``SRLMPCController``.

The policy reads the GSF observation of ``ShapeCrowdEnv`` and outputs, every ``update_every`` control
steps, the MPC parameters (gamma1, gamma2 per neighbour slot, slack weight, speed reference, tracking and
effort weights). The HOCBF-MPC then computes every acceleration, so the safety structure is kept whatever
the policy says; parameters outside their bounds are clipped and counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.controllers import HOCBFMPCController
from neurips26.methods.srlmpc.hocbf_mpc import HOCBFMPC, MPCParameters
from neurips26.methods.srlmpc.integration import SCENARIOS, CrowdConfig, ShapeCrowdEnv

# multiplicative spread of each parameter around its base value at action +-1 (ours: a residual tuner
# centred on the best constant parameters, so an untrained policy is the fixed HOCBF-MPC)
SPREAD = {"gamma": 4.0, "slack_weight": 100.0, "speed_ref": 2.0, "w_track": 4.0, "w_effort": 4.0}


def action_size(config: SRLMPCConfig) -> int:
    return 2 * config.k_neighbours + 4


def _log_spread(k: int) -> np.ndarray:
    return np.log(
        np.array(
            [SPREAD["gamma"]] * (2 * k)
            + [SPREAD["slack_weight"], SPREAD["speed_ref"], SPREAD["w_track"], SPREAD["w_effort"]]
        )
    )


def action_to_parameters(action: np.ndarray, base: MPCParameters, config: SRLMPCConfig) -> MPCParameters:
    """theta = theta_base * spread^a for a in [-1, 1]^(2k+4) (not yet clipped to the bounds)."""
    action = np.asarray(action, dtype=float).reshape(-1)
    if action.shape != (action_size(config),):
        raise ValueError(f"action must have shape ({action_size(config)},), got {action.shape}")
    vector = base.to_vector() * np.exp(np.clip(action, -1.0, 1.0) * _log_spread(config.k_neighbours))
    return MPCParameters.from_vector(vector, config.k_neighbours)


def parameters_to_action(params: MPCParameters, base: MPCParameters, config: SRLMPCConfig) -> np.ndarray:
    """The inverse map (used by the constant policy of the degenerate-equivalence test)."""
    ratio = params.to_vector() / base.to_vector()
    return (np.log(ratio) / _log_spread(config.k_neighbours)).astype(np.float32)


class ConstantPolicy:
    """A policy that always outputs ``action`` (SB3's ``predict`` signature)."""

    def __init__(self, action: np.ndarray) -> None:
        self.action = np.asarray(action, dtype=np.float32)

    def predict(self, observation: Any, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return self.action.copy(), None


class RandomPolicy:
    """Uniformly random MPC parameters at every update (a negative control: variation without geometry)."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)

    def predict(self, observation: Any, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return self.rng.uniform(-1, 1, self.size).astype(np.float32), None


class SRLMPCController(HOCBFMPCController):
    """SRL-MPC: a policy that maps GSF observations to MPC parameters, on top of ``HOCBFMPC``.

    Parameters
    ----------
    policy : anything with SB3's ``predict(obs, deterministic)`` (a ``PPO`` model, ``ConstantPolicy``, ...).
    config : ``SRLMPCConfig``; base : parameters at action 0 (default: the config's constants).
    """

    def __init__(
        self,
        policy: Any,
        config: SRLMPCConfig | None = None,
        base: MPCParameters | None = None,
        mpc: HOCBFMPC | None = None,
    ) -> None:
        config = config or SRLMPCConfig()
        super().__init__(config, base, mpc=mpc)
        self.policy = policy
        self.base = base or MPCParameters.constant(config)
        self._counter = 0
        self.history: list[tuple[float, np.ndarray]] = []  # (nearest s*, parameter vector) per update

    def reset(self) -> None:
        self._counter = 0
        self.history = []
        self.params = self.base

    def current_params(self, env: ShapeCrowdEnv, index: int) -> MPCParameters:
        if self._counter % self.config.update_every == 0:
            observation = env.observation(index)
            action, _ = self.policy.predict(observation, deterministic=True)
            self.params = action_to_parameters(action, self.base, self.config)
            self.history.append((float(observation[4]), self.params.to_vector()))
        self._counter += 1
        return self.params


class MPCParameterEnv(gym.Env):
    """The RL problem of SRL-MPC: observation = GSFs, action = MPC parameters for ``update_every`` steps.

    Reward: the crowd env's (progress - collision - discomfort + success) summed over the held steps,
    minus ``infeasibility_penalty`` per braking fallback. ``scenarios`` are drawn per episode.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(
        self,
        crowd: CrowdConfig | None = None,
        config: SRLMPCConfig | None = None,
        base: MPCParameters | None = None,
        scenarios: tuple[str, ...] = (),
        infeasibility_penalty: float = 0.2,
    ) -> None:
        self.crowd = crowd or CrowdConfig()
        self.config = config or SRLMPCConfig()
        for name in scenarios:
            if name not in SCENARIOS:
                raise ValueError(f"scenarios: {name!r} is not allowed; choose from {SCENARIOS}")
        if infeasibility_penalty < 0:
            raise ValueError(f"infeasibility_penalty must be >= 0, got {infeasibility_penalty}")
        self.scenarios = tuple(scenarios) or (self.crowd.scenario,)
        self.penalty = infeasibility_penalty
        self.env = ShapeCrowdEnv(self.crowd)
        self.controller = HOCBFMPCController(self.config, base)
        self.base = base or MPCParameters.constant(self.config)
        self.observation_space = self.env.observation_space
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(action_size(self.config),), dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        scenario = self.scenarios[int(self.np_random.integers(len(self.scenarios)))]
        self.env.config = replace(self.crowd, scenario=scenario)
        return self.env.reset(seed=int(self.np_random.integers(2**31)))

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.controller.params = action_to_parameters(action, self.base, self.config)
        total, info = 0.0, {}
        observation, terminated, truncated = self.env.observation(0), False, False
        for _ in range(self.config.update_every):
            before = self.controller.n_infeasible
            accel = self.controller.act(self.env, 0)
            observation, reward, terminated, truncated, info = self.env.step(accel / self.crowd.max_accel)
            total += reward - self.penalty * (self.controller.n_infeasible - before)
            if terminated or truncated:
                break
        return observation, float(total), terminated, truncated, info


def train_policy(
    env: gym.Env, total_steps: int, seed: int, n_steps: int = 256, learning_rate: float = 3e-4
) -> Any:
    """PPO (stable-baselines3) with a small MLP; one thread. Returns the trained model."""
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        batch_size=64,
        n_epochs=5,
        learning_rate=learning_rate,
        gamma=0.98,
        ent_coef=0.0,
        policy_kwargs={"net_arch": [64, 64], "log_std_init": -1.0},
        seed=seed,
        verbose=0,
        device="cpu",
    )
    model.learn(total_timesteps=total_steps)
    return model


def make_param_env(
    crowd: CrowdConfig, config: SRLMPCConfig, base: MPCParameters, scenarios: tuple[str, ...]
) -> Any:
    """``MPCParameterEnv`` wrapped in SB3's Monitor (episode statistics)."""
    from stable_baselines3.common.monitor import Monitor

    return Monitor(MPCParameterEnv(crowd, config, base, scenarios))
