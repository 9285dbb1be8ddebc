"""One figure per method from its results JSON: metric vs sweep variable, or bars with 95% CIs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from neurips26.bench.results import point_key

_PALETTE = [
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
]
OURS_COLOUR = "#d62728"


def system_colour(name: str, ours: str) -> str:
    """A fixed colour per system name across all figures; ours is always red."""
    if name == ours:
        return OURS_COLOUR
    return _PALETTE[int(hashlib.md5(name.encode()).hexdigest(), 16) % len(_PALETTE)]


def _ci_half_width(summary: dict) -> float:
    if summary["n"] and summary["n"] > 1 and summary["std"] is not None:
        return 1.96 * summary["std"] / np.sqrt(summary["n"])
    return 0.0


def method_figure(
    result: dict, path: str | Path, metric: str | None = None, x_metric: str | None = None
) -> Path:
    """Plot the headline metric (or ``metric``) of every system and save a PNG at ``path``.

    With ``x_metric`` (a swept profile only) each system's points sit at that metric's mean instead of the
    swept value -- e.g. perplexity against measured bits per weight, a Pareto figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = metric or (result["claims"][0]["metric"] if result["claims"] else result["metrics"][0]["name"])
    ours = result["run_info"]["ours"]
    grid = result["run_info"]["grid"]
    sweep = next(
        (k for k, v in grid.items() if len(v) > 1 and all(isinstance(x, (int, float)) for x in v)), None
    )
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(result["systems"])
    if sweep and len(grid) == 1:
        for name in names:
            points = result["systems"][name]["points"]
            if x_metric is not None:  # at the measured cost, in increasing order; unmeasured points dropped
                points = sorted(
                    (p for p in points if (p["summary"].get(x_metric) or {}).get("mean") is not None),
                    key=lambda p: p["summary"][x_metric]["mean"],
                )
            xs = [p["point"][sweep] if x_metric is None else p["summary"][x_metric]["mean"] for p in points]
            means = [p["summary"][metric]["mean"] for p in points]
            errs = [_ci_half_width(p["summary"][metric]) for p in points]
            ax.errorbar(
                xs,
                [np.nan if m is None else m for m in means],
                yerr=errs,
                label=name,
                marker="o",
                color=system_colour(name, ours),
                linewidth=3 if name == ours else 1.2,
                capsize=3,
            )
        ax.set_xlabel(sweep if x_metric is None else _label(result, x_metric))
    else:
        points = result["systems"][names[0]]["points"] if names else []
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            summaries = [p["summary"][metric] for p in result["systems"][name]["points"]]
            means = [np.nan if s["mean"] is None else s["mean"] for s in summaries]
            xs = np.arange(len(points)) + i * width
            ax.bar(
                xs,
                means,
                width,
                yerr=[_ci_half_width(s) for s in summaries],
                label=name,
                capsize=2,
                color=system_colour(name, ours),
                edgecolor="black" if name == ours else "none",
                linewidth=2 if name == ours else 0,
            )
        ax.set_xticks(np.arange(len(points)) + 0.4 - width / 2)
        ax.set_xticklabels(
            [point_key(p["point"]) or "all" for p in points], rotation=20, ha="right", fontsize=7
        )
    ax.set_ylabel(_label(result, metric))
    ax.set_title(f"{result['run_info']['slug']}: {metric} (mean, 95% CI)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(result: dict, metric: str) -> str:
    """``metric (unit)``, or the bare name when the metric has no unit."""
    unit = next((m["unit"] for m in result["metrics"] if m["name"] == metric), "")
    return f"{metric} ({unit})" if unit else metric
