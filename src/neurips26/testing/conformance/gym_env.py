"""The ``"gym_env"`` family: gymnasium's own ``check_env`` plus seeded determinism of whole rollouts.

``check_env`` runs with ``skip_render_check=True`` (render modes are optional and a tiny instance need
not draw). Beyond it, ``reset(seed=s)`` twice followed by the same seeded actions must give identical
observations, rewards and termination flags: experiments and RL libraries replay episodes by seed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from neurips26.testing.conformance._common import expectation

FAMILY = "gym_env"
_ROLLOUT_STEPS = 5


def check_gym_env(factory: Callable[[], Any]) -> None:
    """Raise ``AssertionError`` where ``factory()``'s env breaks the gymnasium contract."""
    import gymnasium
    from gymnasium.utils.env_checker import check_env

    env = factory()
    if not isinstance(env, gymnasium.Env):
        raise expectation(FAMILY, f"the factory must return a gymnasium.Env, got {type(env).__name__}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # advisories (e.g. "not made with gymnasium.make"), not failures
            check_env(env, skip_render_check=True)
    except Exception as error:
        raise expectation(FAMILY, "gymnasium.utils.env_checker.check_env failed", error) from error
    first, second = _rollout(factory(), seed=3), _rollout(factory(), seed=3)
    for step, (a, b) in enumerate(zip(first, second, strict=True)):
        if not _equal(a, b):
            raise expectation(
                FAMILY, f"two fresh envs reset with seed=3 diverge at step {step} under the same actions"
            )
    env.close()


def _rollout(env: Any, seed: int) -> list[tuple[Any, ...]]:
    observation, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    record: list[tuple[Any, ...]] = [(observation,)]
    for _ in range(_ROLLOUT_STEPS):
        observation, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        record.append((observation, float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            break
    env.close()
    return record


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))
