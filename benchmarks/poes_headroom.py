"""Does POES's gain concentrate where the baselines have headroom? (the paper's qualitative claim)

Reads the per-task accuracies stored in a published run (``results/poes/<profile>.json``, cell details),
so the analysis uses exactly the tasks of the experiment and runs no optimizer. Per task (tier, k, seed,
task): headroom = final accuracy with full evaluation (the most an evaluation scheduler can give this
optimizer) minus that of a fixed random subset; gain = POES minus the random minibatch (GEPA's default).
The two differences share no system, so a correlation is not the regression-to-the-mean artefact that
"gain and headroom over the same baseline" would have. Negative control: the same statistic with the
headroom shuffled across tasks of the same tier (2,000 permutations) gives the null distribution; a
concentrated gain must beat it (one-sided p < 0.05).

Writes ``docs/poes/headroom.png`` and prints a Markdown table.
Run: ``python benchmarks/poes_headroom.py [profile]`` (default ``default``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "poes" / "headroom.png"


def per_task(result: dict) -> dict[tuple[int, int], dict[str, np.ndarray]]:
    """(tier, k) -> system -> per-task final accuracies, ordered by (seed, task)."""
    out: dict[tuple[int, int], dict[str, list[tuple[int, list[float]]]]] = {}
    for cell in result["cells"]:
        tasks = (cell.get("details") or {}).get("task_final_accuracy")
        if cell["status"] == "ok" and tasks is not None:
            key = (int(cell["point"].get("tier", 1)), int(cell["point"]["k"]))
            out.setdefault(key, {}).setdefault(cell["system"], []).append((cell["seed"], tasks))
    return {
        key: {s: np.concatenate([t for _, t in sorted(cells)]) for s, cells in systems.items()}
        for key, systems in out.items()
    }


def main(profile: str = "default") -> None:
    result = json.loads((ROOT / "results" / "poes" / f"{profile}.json").read_text())
    data = per_task(result)
    rng = np.random.default_rng(0)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = sorted({tier for tier, _ in data})
    fig, axes = plt.subplots(1, len(tiers), figsize=(5 * len(tiers), 4), squeeze=False)
    print("| tier | tasks | corr(headroom, gain) | permutation p | gain, low / mid / high headroom tercile |")
    print("|---|---|---|---|---|")
    for ax, tier in zip(axes[0], tiers, strict=True):
        headroom, gain, ks = [], [], []
        for (t, k), systems in sorted(data.items()):
            if t != tier:
                continue
            headroom.append(systems["full_evaluation"] - systems["fixed_random"])
            gain.append(systems["poes"] - systems["random_minibatch"])
            ks.append(np.full(len(gain[-1]), k))
        h, g, kk = np.concatenate(headroom), np.concatenate(gain), np.concatenate(ks)
        corr = float(np.corrcoef(h, g)[0, 1])
        null = np.array([np.corrcoef(rng.permutation(h), g)[0, 1] for _ in range(2000)])
        p = float((1 + np.sum(null >= corr)) / (1 + null.size))
        order = np.argsort(h, kind="stable")
        terciles = [float(g[part].mean()) for part in np.array_split(order, 3)]
        print(
            f"| {tier} | {h.size} | {corr:+.2f} | {p:.3f} | "
            + " / ".join(f"{100 * x:+.1f} pp" for x in terciles)
            + " |"
        )
        for k in sorted(set(kk)):
            ax.scatter(h[kk == k], g[kk == k], s=12, alpha=0.6, label=f"k = {k}")
        centres = [float(h[part].mean()) for part in np.array_split(order, 3)]
        ax.plot(centres, terciles, "k-o", lw=2, label="tercile means")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("headroom: full evaluation - fixed random subset")
        ax.set_ylabel("gain: POES - random minibatch")
        ax.set_title(f"tier {tier}: corr {corr:+.2f} (permutation p = {p:.3f})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=90)
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
