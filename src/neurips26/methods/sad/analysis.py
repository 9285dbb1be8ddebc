"""The experiment's ``accuracy`` analysis: task, GT-match and synthesis accuracy of every system on every
split in one table, and the figure (task accuracy per split; GT match against synthesis accuracy, the
accuracy paradox's two axes).

``neurips26 report --readme sad`` writes both from the published JSON into the README and ``docs/sad/``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from neurips26.bench.stats import t_interval

SPLITS = (("id", "ours, lengths 1-4"), ("len", "ours, length 5"), ("exedec_id", "ExeDec NONE"))
SPLITS_LONG = (*SPLITS, ("exedec_len", "ExeDec LENGTH_GEN."))
DECOMPOSERS = ("sad", "sl_decomposer", "rl_only")


def seed_values(result: Mapping[str, Any]) -> dict[tuple[str, str], list[float]]:
    """``{(system, metric): [value per seed]}`` over the result's ok, finite cells."""
    if "cells" not in result:
        raise ValueError("result: no 'cells' (not a neurips26 result JSON)")
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for cell in result["cells"]:
        if cell.get("status") != "ok":
            continue
        for metric, value in (cell.get("metrics") or {}).items():
            if value is not None and np.isfinite(value):
                values[(cell["system"], metric)].append(float(value))
    return values


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and its 95 % Student-t interval (the mean twice when there is a single seed)."""
    mean = float(np.mean(values))
    low, high = t_interval(values) if len(values) >= 2 else (mean, mean)
    return mean, low, high


def _cell(values: dict, system: str, metric: str, transform=lambda x: x) -> str:
    if (system, metric) not in values:
        return "—"
    mean, low, high = (transform(v) for v in mean_interval(values[(system, metric)]))
    low, high = max(min(low, high), 0.0), min(max(low, high), 1.0)  # every metric here is a fraction
    return f"{mean:.2f} [{low:.2f}, {high:.2f}]"


def accuracy_table(result: Mapping[str, Any]) -> str:
    """Markdown: one row per system; task accuracy per split, then GT-subgoal match and synthesis
    accuracy on our in-distribution split (decomposer systems only)."""
    values = seed_values(result)
    systems = list(result["systems"])
    splits = [s for s in SPLITS_LONG if any((name, f"task_acc_{s[0]}") in values for name in systems)]
    header = (
        "| system | "
        + " | ".join(f"task acc., {label}" for _, label in splits)
        + " | GT-subgoal match (ID) | synthesis acc. on own subgoals (ID) |"
    )
    lines = [header, "|" + "---|" * (len(splits) + 3)]
    for name in systems:
        cells = [_cell(values, name, f"task_acc_{key}") for key, _ in splits]
        cells.append(_cell(values, name, "gt_mismatch_id", lambda x: 1.0 - x))
        cells.append(_cell(values, name, "synth_acc_id"))
        label = f"**{name}**" if name == result["run_info"]["ours"] else name
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    seeds = max((len(v) for v in values.values()), default=0)
    notes = exedec_notes(result)
    exedec = f"\n\nExeDec's test sets: {'; '.join(notes)}." if notes else ""
    return (
        f"Mean [95 % Student-t interval, clipped to [0, 1]] over {seeds} seed(s) (each seed a fresh test "
        "set); GT-subgoal match = 1 − `gt_mismatch`; — = not applicable (no decomposer, or split absent)."
        + exedec
        + "\n\n"
        + "\n".join(lines)
    )


def exedec_notes(result: Mapping[str, Any]) -> list[str]:
    """The distinct lines the cells stored about ExeDec's splits (evaluated, or why they are n/a)."""
    notes = ((cell.get("details") or {}).get("exedec") for cell in result.get("cells", ()))
    return sorted({note for note in notes if note})


def accuracy_figure(result: Mapping[str, Any], path: str | Path) -> Path:
    """Left: task accuracy per system and split (95 % intervals). Right: each decomposer's GT-subgoal
    match against how often the synthesizer realises its own subgoals (in-distribution)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurips26.report.figures import save_figure

    values = seed_values(result)
    systems = list(result["systems"])
    splits = [s for s in SPLITS if any((name, f"task_acc_{s[0]}") in values for name in systems)]
    fig, (bars, paradox) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
    width = 0.8 / max(len(splits), 1)
    for i, (key, label) in enumerate(splits):
        stats = [
            mean_interval(values[(s, f"task_acc_{key}")]) if (s, f"task_acc_{key}") in values else (0, 0, 0)
            for s in systems
        ]
        means = np.array([m for m, _, _ in stats])
        errors = np.array([[m - lo for m, lo, _ in stats], [hi - m for m, _, hi in stats]])
        x = np.arange(len(systems)) + (i - (len(splits) - 1) / 2) * width
        bars.bar(x, means, width, yerr=errors, capsize=2, label=label)
    bars.set_xticks(np.arange(len(systems)), systems, rotation=25, ha="right")
    bars.set_ylabel("task accuracy")
    bars.set_ylim(0, 1)
    bars.legend(fontsize=8)
    for name in DECOMPOSERS:
        if (name, "gt_mismatch_id") not in values or (name, "synth_acc_id") not in values:
            continue
        match = [1 - v for v in values[(name, "gt_mismatch_id")]]
        realised = values[(name, "synth_acc_id")]
        colour = paradox.scatter(match, realised, s=14, alpha=0.5).get_facecolor()[0]
        paradox.scatter([np.mean(match)], [np.mean(realised)], s=60, marker="D", color=colour, label=name)
    paradox.set_xlabel("GT-subgoal match (in-distribution)")
    paradox.set_ylabel("synthesizer realises own subgoal")
    paradox.legend(fontsize=8)
    fig.suptitle(f"sad, profile {result['run_info']['profile']} (small points: seeds)", fontsize=10)
    return save_figure(fig, path, dpi=80)


def accuracy_analysis(result: Mapping[str, Any]) -> Any:
    """The experiment's ``accuracy`` analysis (table + figure)."""
    from neurips26.bench.experiment import Analysis

    return Analysis(accuracy_table(result), figure=lambda path: accuracy_figure(result, path))
