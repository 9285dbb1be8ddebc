"""Speed of SRL-MPC (issue #30): control step, build-once vs rebuild, GSFs vs shapely, growth with neighbours.

Targets: control step <= 20 ms median (5 neighbours, horizon 10) and <= 1.15x the fixed-parameter MPC's
step; GSFs >= 10x faster than a shapely loop at 20 bodies. Each step is measured on the same recorded
crowd states (one ShapeCrowdEnv episode driven by the fixed HOCBF-MPC), so every variant sees the same QPs.

    OMP_NUM_THREADS=1 python benchmarks/srlmpc/bench_srlmpc.py --json /tmp/srlmpc_bench.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np

from neurips26.methods.srlmpc import geometry as geo
from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.controllers import HOCBFMPCController
from neurips26.methods.srlmpc.hocbf_mpc import HOCBFMPC, MPCParameters
from neurips26.methods.srlmpc.integration import CrowdConfig, ShapeCrowdEnv


def recorded_states(n_bodies: int, steps: int, seed: int = 0) -> list[ShapeCrowdEnv]:
    """Snapshots (deep copies) of an episode's environment, one per step."""
    import copy

    crowd = CrowdConfig(
        n_bodies=n_bodies, k_neighbours=min(5, n_bodies - 1), arena_radius=max(4.0, 0.3 * n_bodies)
    )
    env = ShapeCrowdEnv(crowd)
    env.reset(seed=seed)
    driver = HOCBFMPCController()
    states = []
    for _ in range(steps):
        states.append(copy.deepcopy(env))
        _, _, term, trunc, _ = env.step(driver.act(env, 0) / env.config.max_accel)
        if term or trunc:
            env.reset(seed=seed + len(states))
    return states


def median_step_ms(controller, states: list[ShapeCrowdEnv], repeats: int = 1) -> float:
    times = []
    for _ in range(repeats):
        for env in states:
            env._feature_cache = {}  # perception is part of the step
            controller.reset()
            start = time.perf_counter()
            controller.act(env, 0)
            times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def interleaved_ms(controllers: dict, states: list[ShapeCrowdEnv], repeats: int = 3) -> dict[str, float]:
    """Median step time of each controller, timed alternately on every state (cancels load drift)."""
    times: dict[str, list[float]] = {name: [] for name in controllers}
    for _ in range(repeats):
        for env in states:
            for name, controller in controllers.items():
                env._feature_cache = {}  # perception is part of the step
                controller.reset()
                start = time.perf_counter()
                controller.act(env, 0)
                times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t) * 1e3) for name, t in times.items()}


def control_steps(states: list[ShapeCrowdEnv], horizon: int, k: int) -> dict[str, float]:
    from stable_baselines3 import PPO

    from neurips26.methods.srlmpc.training import SRLMPC_POLICY
    from neurips26.methods.srlmpc.tuner import SRLMPCController

    config = SRLMPCConfig(horizon=horizon, k_neighbours=k)
    policy = PPO.load(SRLMPC_POLICY, device="cpu")
    every = SRLMPCController(policy, replace(config, update_every=1))  # worst case: policy at every step
    cadence = SRLMPCController(policy, config)  # default cadence: policy every update_every steps

    class _Cadence:  # reset() would restart the cadence at a policy call: keep the episode counter going
        def reset(self) -> None:
            pass

        def act(self, env: ShapeCrowdEnv, index: int) -> np.ndarray:
            return cadence.act(env, index)

    out = interleaved_ms(
        {
            "fixed_ms": HOCBFMPCController(config),
            "srlmpc_every_step_ms": every,
            "srlmpc_default_ms": _Cadence(),
        },
        states,
    )
    rebuilt = HOCBFMPCController(config, mpc=HOCBFMPC(config, rebuild_every_step=True))
    few = states[: max(5, len(states) // 4)]
    out.update(
        {
            f"{key}_vs_rebuild": value
            for key, value in interleaved_ms(
                {"fixed_ms": HOCBFMPCController(config), "rebuild_ms": rebuilt}, few, 1
            ).items()
        }
    )
    osqp = HOCBFMPCController(replace(config, backend="osqp"))
    out["fixed_osqp_ms"] = median_step_ms(osqp, states[: max(5, len(states) // 2)])
    out["ratio_every_step"] = out["srlmpc_every_step_ms"] / out["fixed_ms"]
    out["ratio_default_cadence"] = out["srlmpc_default_ms"] / out["fixed_ms"]
    return out


def gsf_vs_shapely(n_bodies: int = 20, repeats: int = 50, seed: int = 0) -> dict[str, float]:
    """All-pairs signed distances: our vectorised GSFs vs a shapely loop (distance only, and distance +
    nearest points, which is what the normal n* needs)."""
    from shapely.geometry import Polygon
    from shapely.ops import nearest_points

    env = ShapeCrowdEnv(CrowdConfig(n_bodies=n_bodies, scenario="circle_crossing"))
    env.reset(seed=seed)
    polygon_shapes = [
        s if s.kind in ("polygon", "rectangle") else geo.polygon(s.boundary(16)) for s in env.shapes
    ]
    batch = geo.ShapeBatch.from_shapes(polygon_shapes)
    pos = env.positions
    i, j = np.triu_indices(len(polygon_shapes), k=1)
    start = time.perf_counter()
    for _ in range(repeats):
        geo.geometric_separation_features(pos, env.velocities, batch, i, j)
    ours = (time.perf_counter() - start) / repeats
    polys = [Polygon(s.vertices + p) for s, p in zip(polygon_shapes, pos, strict=True)]
    start = time.perf_counter()
    for _ in range(repeats):
        [polys[a].distance(polys[b]) for a, b in zip(i, j, strict=True)]
    shapely_distance = (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(max(1, repeats // 5)):
        for a, b in zip(i, j, strict=True):
            polys[a].distance(polys[b])
            nearest_points(polys[a], polys[b])
    shapely_nearest = (time.perf_counter() - start) / max(1, repeats // 5)
    return {
        "pairs": len(i),
        "gsf_ms": ours * 1e3,
        "shapely_distance_ms": shapely_distance * 1e3,
        "shapely_distance_nearest_ms": shapely_nearest * 1e3,
        "speedup_vs_distance": shapely_distance / ours,
        "speedup_vs_distance_nearest": shapely_nearest / ours,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60, help="recorded crowd states per setting")
    parser.add_argument("--neighbours", type=int, nargs="+", default=[2, 5, 10, 20])
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    report: dict[str, object] = {}
    states = recorded_states(12, args.steps)
    report["control_step_k5_h10"] = control_steps(states, horizon=10, k=5)
    print("control step (k=5, N=10):", json.dumps(report["control_step_k5_h10"], indent=1))
    growth = {}
    for k in args.neighbours:
        crowd_states = recorded_states(k + 1, max(20, args.steps // 3))
        config = SRLMPCConfig(k_neighbours=k)
        growth[k] = {
            "fixed_ms": median_step_ms(HOCBFMPCController(config), crowd_states),
            "qp_only_ms": _qp_only_ms(config, crowd_states),
        }
        print(f"neighbours={k}: {growth[k]}")
    report["growth_with_neighbours"] = growth
    report["gsf_vs_shapely_20_bodies"] = gsf_vs_shapely(20)
    print("GSFs vs shapely (20 bodies):", json.dumps(report["gsf_vs_shapely_20_bodies"], indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)


def _qp_only_ms(config: SRLMPCConfig, states: list[ShapeCrowdEnv]) -> float:
    from neurips26.methods.srlmpc.controllers import mpc_neighbours

    mpc = HOCBFMPC(config)
    params = MPCParameters.constant(config)
    times = []
    for env in states:
        nb = mpc_neighbours(env, 0, config.k_neighbours)
        step = mpc.solve(env.positions[0], env.velocities[0], env.goals[0], nb, params)
        times.append(step.solve_time)
    return float(np.median(times) * 1e3)


if __name__ == "__main__":
    main()
