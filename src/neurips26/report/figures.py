"""One figure per method from its results JSON: metric vs sweep variable, or bars with 95% CIs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurips26.bench.results import point_key

# tab20 without its reds, so no system looks like ours; each figure assigns them in system order
_PALETTE = [
    # the strong tab20 hues first, then their light partners
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
]
OURS_COLOUR = "#d62728"


def system_colours(names: list[str], ours: str) -> dict[str, str]:
    """Distinct colours for the systems of one figure (ours red), fixed by the systems' order."""
    others = [name for name in names if name != ours]
    colours = {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(others)}
    return {**colours, ours: OURS_COLOUR}


def _ci_half_width(summary: dict) -> float:
    """Half-width of the t interval of the mean; none below the verdicts' minimum number of seeds."""
    from scipy import stats

    from neurips26.bench.stats import MIN_PAIRS

    n = summary["n"] or 0
    if n < MIN_PAIRS or summary["std"] is None:
        return 0.0
    return float(stats.t.ppf(0.975, n - 1)) * summary["std"] / np.sqrt(n)


def method_figure(
    result: dict, path: str | Path, metric: str | None = None, x_metric: str | None = None
) -> Path:
    """Plot the headline metric (or ``metric``) of every system and save a PNG at ``path``.

    With ``x_metric`` each system's grid points sit at that metric's mean -- e.g. perplexity against
    measured bits per weight, a Pareto figure -- whatever the shape of the grid. Error bars are 95% t
    intervals of the mean, drawn only from the verdicts' minimum number of seeds on.
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
    fig, ax = plt.subplots(figsize=(9, 4))
    names = list(result["systems"])
    colours = system_colours(names, ours)
    if x_metric is not None or (sweep and len(grid) == 1):
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
                color=colours[name],
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
                color=colours[name],
                edgecolor="black" if name == ours else "none",
                linewidth=2 if name == ours else 0,
            )
        ax.set_xticks(np.arange(len(points)) + 0.4 - width / 2)
        ax.set_xticklabels(
            [point_key(p["point"]) or "all" for p in points], rotation=20, ha="right", fontsize=7
        )
    ax.set_ylabel(_label(result, metric))
    ax.set_title(f"{result['run_info']['slug']}: {metric} (mean; 95% CI where n >= 5)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside, not over
    return save_figure(fig, path, dpi=110)


def save_figure(fig, path: str | Path, dpi: int) -> Path:
    """Lay out, write (creating the folder) and close a matplotlib figure; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _label(result: dict, metric: str) -> str:
    """``metric (unit)``, or the bare name when the metric has no unit."""
    unit = next((m["unit"] for m in result["metrics"] if m["name"] == metric), "")
    return f"{metric} ({unit})" if unit else metric
