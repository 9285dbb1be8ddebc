"""Offline steps of SRL-MPC: the grid search for the best constant parameters and PPO training.

Seeds: test episodes use seeds 0..9999 (the experiment), validation (the grid) 10000.., training 20000..,
so training, tuning and testing never share a scene.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.controllers import Controller, HOCBFMPCController
from neurips26.methods.srlmpc.hocbf_mpc import MPCParameters
from neurips26.methods.srlmpc.integration import CrowdConfig, ShapeCrowdEnv

WEIGHTS = Path(__file__).parent / "weights"
BEST_CONSTANT = WEIGHTS / "best_constant.json"
SRLMPC_POLICY = WEIGHTS / "srlmpc_ppo.zip"
PPO_POLICY = WEIGHTS / "ppo_accel.zip"
VALIDATION_SEED0 = 10_000
TRAINING_SEED0 = 20_000
GRID_GAMMAS = (0.1, 0.2, 0.4, 0.7, 1.0)
GRID_SPEEDS = (0.8, 1.2)
TRAIN_SCENARIOS = ("circle_crossing", "corridor")


def run_episode(env: ShapeCrowdEnv, controller: Controller, seed: int) -> dict[str, Any]:
    """One episode of body 0 under ``controller``; returns its outcome and per-step records."""
    env.reset(seed=seed)
    controller.reset()
    info: dict[str, Any] = {}
    min_sep, discomfort_steps = np.inf, 0
    while True:
        accel = controller.act(env, 0)
        _, _, terminated, truncated, info = env.step(accel / env.config.max_accel)
        min_sep = min(min_sep, info["min_separation"])
        discomfort_steps += int(info["discomfort"])
        if terminated or truncated:
            break
    return {
        "success": bool(info["success"]),
        "collision": bool(info["collision"]),
        "timeout": bool(info["timeout"]),
        "steps": env.steps,
        "time": env.steps * env.config.dt,
        "path_length": env.path_length,
        "min_separation": float(min_sep),
        "discomfort": discomfort_steps / max(env.steps, 1),
    }


def grid_search_constant(
    crowd: CrowdConfig, config: SRLMPCConfig, episodes: int = 4, scenarios: tuple[str, ...] = TRAIN_SCENARIOS
) -> dict[str, Any]:
    """Best constant (gamma1 = gamma2, speed_ref) on validation seeds: max success - collision, then time."""
    rows = []
    for gamma in GRID_GAMMAS:
        for speed in GRID_SPEEDS:
            cfg = replace(config, gamma1=gamma, gamma2=gamma, speed_ref=speed)
            controller = HOCBFMPCController(cfg)
            outcomes = []
            for scenario in scenarios:
                env = ShapeCrowdEnv(replace(crowd, scenario=scenario))
                outcomes += [run_episode(env, controller, VALIDATION_SEED0 + e) for e in range(episodes)]
            success = float(np.mean([o["success"] for o in outcomes]))
            collision = float(np.mean([o["collision"] for o in outcomes]))
            duration = float(np.mean([o["time"] for o in outcomes]))
            rows.append(
                {
                    "gamma": gamma,
                    "speed_ref": speed,
                    "success": success,
                    "collision": collision,
                    "time": duration,
                }
            )
    best = max(rows, key=lambda r: (r["success"] - r["collision"], -r["time"]))
    return {
        "best": {"gamma1": best["gamma"], "gamma2": best["gamma"], "speed_ref": best["speed_ref"]},
        "grid": rows,
    }


def load_best_constant(config: SRLMPCConfig) -> SRLMPCConfig:
    """``config`` with the committed best constant parameters (unchanged if none are committed)."""
    if not BEST_CONSTANT.exists():
        return config
    best = json.loads(BEST_CONSTANT.read_text())["best"]
    return replace(config, **best)


def train_srlmpc(
    crowd: CrowdConfig, config: SRLMPCConfig, total_steps: int, seed: int, path: Path | None = None
) -> Any:
    """Train SRL-MPC's PPO tuner on ``MPCParameterEnv`` around the best constant; save to ``path``."""
    from neurips26.methods.srlmpc.tuner import make_param_env, train_policy

    base = MPCParameters.constant(config)
    env = make_param_env(crowd, config, base, TRAIN_SCENARIOS)
    env.reset(seed=TRAINING_SEED0 + seed)
    model = train_policy(env, total_steps, seed, n_steps=128)
    if path is not None:
        model.save(path)
    return model


def train_ppo_accel(crowd: CrowdConfig, total_steps: int, seed: int, path: Path | None = None) -> Any:
    """Train the pure-PPO baseline (actions are accelerations) on the same scenarios; save to ``path``."""
    from stable_baselines3.common.monitor import Monitor

    from neurips26.methods.srlmpc.tuner import train_policy

    env = Monitor(_ScenarioMix(crowd, TRAIN_SCENARIOS))
    env.reset(seed=TRAINING_SEED0 + seed)
    model = train_policy(env, total_steps, seed, n_steps=512)
    if path is not None:
        model.save(path)
    return model


class _ScenarioMix(ShapeCrowdEnv):
    """``ShapeCrowdEnv`` drawing its scenario per episode (for training only)."""

    def __init__(self, crowd: CrowdConfig, scenarios: tuple[str, ...]) -> None:
        super().__init__(crowd)
        self.base_config, self.scenarios = crowd, scenarios

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self._mix_rng = np.random.default_rng(seed)
        rng = getattr(self, "_mix_rng", np.random.default_rng(0))
        self.config = replace(
            self.base_config, scenario=self.scenarios[int(rng.integers(len(self.scenarios)))]
        )
        return super().reset(seed=int(rng.integers(2**31)))


def write_card(record: dict[str, Any]) -> None:
    """Write the weights card (what was trained, how, how long) next to the weights."""
    WEIGHTS.mkdir(exist_ok=True)
    (WEIGHTS / "card.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def train_all(srlmpc_steps: int, ppo_steps: int, seed: int = 0, grid_episodes: int = 4) -> dict[str, Any]:
    """Grid search, then both PPO policies, all written under ``weights/`` with a card."""
    crowd, config = CrowdConfig(), SRLMPCConfig()
    WEIGHTS.mkdir(exist_ok=True)
    record: dict[str, Any] = {
        "command": f"neurips26 srlmpc train --srlmpc-steps {srlmpc_steps} --ppo-steps {ppo_steps} "
        f"--grid-episodes {grid_episodes} --seed {seed}",
        "threads": "OMP_NUM_THREADS=1 (one core)",
        "seed": seed,
        "crowd": asdict(crowd),
    }
    start = time.perf_counter()
    grid = grid_search_constant(crowd, config, grid_episodes)
    BEST_CONSTANT.write_text(json.dumps(grid, indent=2) + "\n")
    record["grid_seconds"] = round(time.perf_counter() - start, 1)
    tuned = load_best_constant(config)
    start = time.perf_counter()
    train_srlmpc(crowd, tuned, srlmpc_steps, seed, SRLMPC_POLICY)
    record["srlmpc_steps"], record["srlmpc_seconds"] = srlmpc_steps, round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    train_ppo_accel(crowd, ppo_steps, seed, PPO_POLICY)
    record["ppo_steps"], record["ppo_seconds"] = ppo_steps, round(time.perf_counter() - start, 1)
    write_card(record)
    return record
