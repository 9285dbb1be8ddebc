"""Figures of the SRL-MPC README: trajectories with shapes, and learned parameters over an episode.

    OMP_NUM_THREADS=1 MPLBACKEND=Agg python benchmarks/srlmpc/srlmpc_figures.py --seed 0

Writes ``src/neurips26/methods/srlmpc/figures/{trajectories,parameters}.png`` (test seeds only).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Polygon as PolygonPatch

from neurips26.methods.srlmpc.config import SRLMPCConfig
from neurips26.methods.srlmpc.controllers import HOCBFMPCController
from neurips26.methods.srlmpc.integration import PEDESTRIAN, ROBOT, WALL, CrowdConfig, ShapeCrowdEnv
from neurips26.methods.srlmpc.training import SRLMPC_POLICY, load_best_constant

OUT = Path(__file__).parents[2] / "src/neurips26/methods/srlmpc/figures"
COLOURS = {ROBOT: "tab:red", 1: "tab:orange", PEDESTRIAN: "tab:blue", WALL: "0.4"}


def drive(env: ShapeCrowdEnv, controller, seed: int) -> dict:
    env.reset(seed=seed)
    controller.reset()
    info = {}
    while True:
        _, _, term, trunc, info = env.step(controller.act(env, 0) / env.config.max_accel)
        if term or trunc:
            break
    return info


def draw(ax, env: ShapeCrowdEnv, title: str) -> None:
    traj = np.array(env.trajectory)
    for index, shape in enumerate(env.shapes):
        role = int(env.roles[index])
        if role != WALL:
            ax.plot(traj[:, index, 0], traj[:, index, 1], color=COLOURS[role], lw=2.0 if index == 0 else 0.7)
        moments = [0] if role == WALL else [0, len(traj) // 2, len(traj) - 1]
        for t in moments:
            centre = env.positions[index] if role == WALL else traj[t, index]
            alpha = 0.9 if role == WALL else 0.25 + 0.6 * t / max(len(traj) - 1, 1)
            ax.add_patch(PolygonPatch(shape.boundary(32) + centre, color=COLOURS[role], alpha=alpha, lw=0))
    ax.set_aspect("equal")
    ax.set_xlim(-5, 5)
    ax.set_ylim(-5, 5)
    ax.set_title(title, fontsize=9)


def main() -> None:
    from stable_baselines3 import PPO

    from neurips26.methods.srlmpc.tuner import SRLMPCController

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="test seed (1000 * seed is the episode seed)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    best = load_best_constant(SRLMPCConfig())
    crowd = CrowdConfig(scenario="corridor")
    fig, axes = plt.subplots(1, 3, figsize=(11, 4))
    systems = [
        ("SRL-MPC", SRLMPCController(PPO.load(SRLMPC_POLICY, device="cpu"), best)),
        ("HOCBF-MPC, best constant", HOCBFMPCController(best)),
        ("MPC-CBF, circles", HOCBFMPCController(best, perception="circle")),
    ]
    histories = {}
    for ax, (name, controller) in zip(axes, systems, strict=True):
        env = ShapeCrowdEnv(crowd)
        info = drive(env, controller, 1000 * args.seed)
        outcome = "success" if info["success"] else "collision" if info["collision"] else "timeout"
        draw(ax, env, f"{name}: {outcome}, {env.steps * crowd.dt:.1f} s")
        histories[name] = getattr(controller, "history", None)
    fig.suptitle("corridor, test seed 0: robot (red), fleet (orange), pedestrians (blue), walls (grey)")
    fig.tight_layout()
    fig.savefig(OUT / "trajectories.png", dpi=90)
    history = histories["SRL-MPC"]
    if history:
        k, dt = best.k_neighbours, best.dt * best.update_every
        time_axis = np.arange(len(history)) * dt
        s_near = np.array([h[0] for h in history])
        vectors = np.array([h[1] for h in history])
        fig, ax = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
        ax[0].plot(time_axis, s_near, color="k")
        ax[0].set_ylabel("nearest s* (m)")
        ax[1].plot(time_axis, vectors[:, 0], label="gamma1, nearest slot")
        ax[1].plot(time_axis, vectors[:, k], label="gamma2, nearest slot")
        ax[1].axhline(best.gamma1, ls="--", color="0.5", label="best constant")
        ax[1].legend(fontsize=7)
        ax[2].plot(time_axis, vectors[:, 2 * k + 1], label="speed_ref")
        ax[2].axhline(best.speed_ref, ls="--", color="0.5", label="best constant")
        ax[2].set_xlabel("time (s)")
        ax[2].legend(fontsize=7)
        fig.suptitle("SRL-MPC's parameters over the corridor episode")
        fig.tight_layout()
        fig.savefig(OUT / "parameters.png", dpi=90)
    print("wrote", sorted(p.name for p in OUT.glob("*.png")))


if __name__ == "__main__":
    main()
