"""Accuracy vs shift strength, drawn from the published ``strength`` profile (``results/dacs/strength.json``).

The harness's method figure puts a grid key on the x-axis only when the grid has one key; the ``strength``
profile sweeps two (``feature_shift`` x ``structure_shift``), so this module reads the per-seed cells and
draws each knob's slice with the other at its default, plus DACS's paired gain per structure level.
Everything here is computed from the JSON alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.bench.stats import t_interval
from neurips26.report.figures import save_figure

FEATURE = "feature_shift"
STRUCTURE = "structure_shift"


@dataclass(frozen=True)
class PairedGain:
    """Mean paired difference (ours - other, matched by seed) and its 95% Student-t interval."""

    mean: float
    low: float
    high: float
    n: int


def cell_values(result: Mapping[str, Any], metric: str = "target_accuracy") -> dict[tuple, dict[int, float]]:
    """``{(system, feature_shift, structure_shift): {seed: value}}`` over the result's ok cells.

    Parameters
    ----------
    result
        A published result (the JSON of ``neurips26 run ... --publish``) whose grid holds both knobs.
    metric
        The per-cell metric to read.
    """
    if "cells" not in result:
        raise ValueError("result: no 'cells' (not a neurips26 result JSON)")
    values: dict[tuple, dict[int, float]] = defaultdict(dict)
    for cell in result["cells"]:
        point, value = cell.get("point", {}), (cell.get("metrics") or {}).get(metric)
        if FEATURE not in point or STRUCTURE not in point:
            raise ValueError(f"result: grid point {point} lacks {FEATURE!r} and {STRUCTURE!r}")
        if cell.get("status") == "ok" and value is not None and np.isfinite(value):
            key = (cell["system"], float(point[FEATURE]), float(point[STRUCTURE]))
            values[key][int(cell["seed"])] = float(value)
    if not values:
        raise ValueError(f"result: no finite {metric!r} in any ok cell")
    return dict(values)


def _t_interval(diffs: Sequence[float]) -> PairedGain:
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    if n == 0:
        return PairedGain(float("nan"), float("nan"), float("nan"), 0)
    if n < 2:
        return PairedGain(float(d.mean()), float("nan"), float("nan"), n)
    return PairedGain(float(d.mean()), *t_interval(d), n)  # the harness's 95% Student-t interval


def paired_gain(
    values: Mapping[tuple, Mapping[int, float]], ours: str, other: str, feature: float, structure: float
) -> PairedGain:
    """``ours - other`` at one grid point, paired by seed (seeds present for both)."""
    a, b = values.get((ours, feature, structure), {}), values.get((other, feature, structure), {})
    return _t_interval([a[s] - b[s] for s in sorted(set(a) & set(b))])


def gain_growth(
    values: Mapping[tuple, Mapping[int, float]],
    ours: str,
    other: str,
    feature: float,
    low: float,
    high: float,
) -> PairedGain:
    """How much ``ours - other`` grows from ``structure_shift = low`` to ``high`` at one feature level.

    The difference of the two paired gains, matched by seed (a seed's source graph is the same at every
    shift level, so the seed is the unit), with a 95% Student-t interval.
    """
    gains = []
    for structure in (low, high):
        a = values.get((ours, feature, structure), {})
        b = values.get((other, feature, structure), {})
        gains.append({s: a[s] - b[s] for s in set(a) & set(b)})
    common = sorted(set(gains[0]) & set(gains[1]))
    return _t_interval([gains[1][s] - gains[0][s] for s in common])


def _levels(values: Mapping[tuple, Any], index: int) -> list[float]:
    return sorted({key[index] for key in values})


def _mean_ci(seeds: Mapping[int, float]) -> tuple[float, float]:
    interval = _t_interval(list(seeds.values()))
    half = (interval.high - interval.mean) if interval.n >= 5 else 0.0  # the harness draws CIs from n = 5
    return interval.mean, half


def strength_figure(
    result: Mapping[str, Any],
    path: str | Path,
    metric: str = "target_accuracy",
    fixed_feature: float = 1.0,
    fixed_structure: float = 0.9,
    versus: Sequence[str] = ("dann_gcn", "dacs_stage13"),
) -> Path:
    """Save a three-panel PNG: ``metric`` vs feature shift (structure at ``fixed_structure``), vs structure
    shift (features at ``fixed_feature``), and DACS's paired gain over each of ``versus`` vs structure
    shift, one line per feature level. Means with 95% t intervals (from 5 seeds on)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurips26.report.figures import system_colours

    values = cell_values(result, metric)
    ours = result["run_info"]["ours"]
    systems = [name for name in result["systems"] if any(key[0] == name for key in values)]
    features, structures = _levels(values, 1), _levels(values, 2)
    for name, level, levels in (
        ("fixed_feature", fixed_feature, features),
        ("fixed_structure", fixed_structure, structures),
    ):
        if level not in levels:
            raise ValueError(f"{name}={level} is not a grid level (have {levels})")
    colours = system_colours(systems, ours)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    slices = (
        (axes[0], features, lambda x: (x, fixed_structure), f"{FEATURE} ({STRUCTURE} = {fixed_structure})"),
        (axes[1], structures, lambda x: (fixed_feature, x), f"{STRUCTURE} ({FEATURE} = {fixed_feature})"),
    )
    for ax, xs, point, label in slices:
        for name in systems:
            stats_ = [_mean_ci(values.get((name, *point(x)), {})) for x in xs]
            ax.errorbar(
                xs,
                [m for m, _ in stats_],
                yerr=[h for _, h in stats_],
                label=name,
                marker="o",
                capsize=3,
                color=colours[name],
                linewidth=3 if name == ours else 1.2,
            )
        ax.set_xlabel(label)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    axes[0].set_title("one knob: feature shift")
    axes[1].set_title("one knob: structure shift")
    ax = axes[2]
    styles = ("-", "--", ":", "-.")
    for j, other in enumerate(versus):
        for i, feature in enumerate(features):
            gains = [paired_gain(values, ours, other, feature, s) for s in structures]
            ax.errorbar(
                np.asarray(structures) + 0.008 * (i - len(features) / 2),  # small dodge: CIs stay readable
                [g.mean for g in gains],
                yerr=[g.high - g.mean if g.n >= 5 else 0.0 for g in gains],
                label=f"vs {other}, {FEATURE} {feature:g}",
                marker="os"[j % 2],
                linestyle=styles[i % len(styles)],
                capsize=2,
                color=colours.get(other, "black"),
                alpha=0.45 + 0.55 * (i + 1) / len(features),
            )
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(STRUCTURE)
    ax.set_ylabel(f"{ours} - other, paired by seed")
    ax.set_title(f"{ours}'s gain per feature-shift level")
    ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower left", frameon=False)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"{result['run_info']['slug']}: {metric} vs shift strength (mean; 95% t-CI where n >= 5)")
    return save_figure(fig, path, dpi=90)


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−") if np.isfinite(x) else "—"


def gain_table(values: Mapping[tuple, Mapping[int, float]], ours: str, other: str) -> str:
    """Markdown: ``ours - other`` (paired by seed, 95% t-interval) on the grid, rows feature levels,
    columns structure levels, and the growth from the lowest structure level to the highest."""
    features, structures = _levels(values, 1), _levels(values, 2)
    low, high = structures[0], structures[-1]
    header = (
        f"| {FEATURE} \\ {STRUCTURE} | "
        + " | ".join(f"{s:g}" for s in structures)
        + f" | growth {low:g} → {high:g} |"
    )
    lines = [header, "|" + "---|" * (len(structures) + 2)]
    for feature in features:
        cells = []
        for gain in [paired_gain(values, ours, other, feature, s) for s in structures] + [
            gain_growth(values, ours, other, feature, low, high)
        ]:
            cells.append(f"{_signed(gain.mean)} [{_signed(gain.low)}, {_signed(gain.high)}]")
        lines.append(f"| {feature:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def strength_analysis(result: Mapping[str, Any], versus: Sequence[str] = ("dann_gcn", "dacs_stage13")) -> Any:
    """The experiment's ``strength`` analysis: DACS's paired gains on the shift grid and the figure
    (``neurips26 report --readme dacs --profile strength`` writes both into the README and ``docs/dacs/``).
    """
    from neurips26.bench.experiment import Analysis

    values = cell_values(result)
    ours = result["run_info"]["ours"]
    parts = [
        f"Target accuracy of `{ours}` minus each baseline, paired by seed (mean [95% Student-t interval], "
        f"{max(len(v) for v in values.values())} seeds); the last column is how much the gain grows "
        "from the lowest structure shift to the highest at that feature level (paired by seed)."
    ]
    for other in versus:
        parts.append(f"**{ours} − {other}**\n\n{gain_table(values, ours, other)}")
    return Analysis(
        "\n\n".join(parts), figure=lambda path: strength_figure(result, path, versus=tuple(versus))
    )
