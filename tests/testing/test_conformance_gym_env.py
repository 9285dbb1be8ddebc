"""The "gym_env" tester passes a tiny conforming env and fails deliberately broken ones."""

from __future__ import annotations

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from neurips26.testing.conformance import check_gym_env  # noqa: E402


class Walk(gymnasium.Env):
    """A seeded 1-D random walk: the reset position comes from ``self.np_random``."""

    observation_space = gymnasium.spaces.Box(-10.0, 10.0, shape=(1,), dtype=np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1, 1, size=1).astype(np.float32)
        return self.x.copy(), {}

    def step(self, action):
        self.x = np.clip(self.x + action + self.noise(), -10, 10).astype(np.float32)
        return self.x.copy(), float(-abs(self.x[0])), bool(abs(self.x[0]) > 9), False, {}

    def noise(self) -> np.ndarray:
        return self.np_random.normal(0, 0.1, size=1).astype(np.float32)


class UnseededLater(Walk):
    """From its third step on it draws from an unseeded generator: check_env (one step) misses it."""

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return super().reset(seed=seed, options=options)

    def noise(self) -> np.ndarray:
        self.steps += 1
        rng = self.np_random if self.steps < 3 else np.random.default_rng()
        return rng.normal(0, 0.1, size=1).astype(np.float32)


class WrongObservationDtype(Walk):
    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed)
        return observation.astype(np.float64), info


def test_a_conforming_env_passes() -> None:
    check_gym_env(Walk)


@pytest.mark.parametrize(
    ("cls", "match"),
    [(WrongObservationDtype, "check_env failed"), (UnseededLater, "diverge at step 3")],
)
def test_a_broken_env_fails_naming_the_expectation(cls, match) -> None:
    with pytest.raises(AssertionError, match=match):
        check_gym_env(cls)


def test_a_factory_returning_no_env_fails() -> None:
    with pytest.raises(AssertionError, match=r"gymnasium\.Env"):
        check_gym_env(object)
