"""Does POES's gain concentrate where the baselines have headroom? (the paper's qualitative claim)

Works on a published result (``results/poes/<profile>.json``): no optimizer runs. For each tier, budget k
and seed (or each task of a seed's suite, ``level="task"``):

- **gain** = POES minus a baseline: by default the **best baseline**, the equal-budget scheduler the
  experiment's accuracy claim compared POES with at that (tier, k) (its ``best_baseline``: the highest
  mean final accuracy over seeds);
- **headroom** = full evaluation (every candidate on the whole pool, the most an evaluation scheduler can
  give this optimizer) minus either that same baseline (``headroom="same"``), the mean of the claim's
  other baselines (``"others"``) or a named system.

With ``"same"``, gain and headroom share the baseline's accuracy, so noise in it alone correlates them (a
low draw raises both: regression to the mean); shuffling the headroom across points ignores that and calls
the artefact a finding. Its p-value therefore comes from the null that keeps the artefact: if POES and the
baseline are exchangeable, swapping their labels in any cell (gain -> -gain, headroom -> full - POES)
gives a run as likely as the observed one; p = share of random swaps (2,000) with a correlation at least
the observed. With headroom measured on other systems nothing is shared, and the shuffle null (headroom
permuted across the tier's points) is the valid one. Both p-values are reported; ``HeadroomStats.p``
picks the valid one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurips26.bench.experiment import Analysis
from neurips26.report.figures import save_figure

# (gain over, headroom below full evaluation of) shown in the README and the benchmark script
README_ANALYSES = (
    ("best", "same"),  # the reading; shares the baseline's noise: label-swap null
    ("best", "others"),  # the same gain, headroom on independent systems: shuffle null
    ("random_minibatch", "fixed_random"),  # vs GEPA's / DSPy's default, headroom on the negative control
)


@dataclass
class HeadroomStats:
    """Gain vs headroom for one tier; arrays are per point (seed or task), ordered by (k, seed, task)."""

    tier: int
    level: str
    headroom_kind: str  # "same", "others" or a system name
    versus: str  # "best" or a system name
    k: np.ndarray
    seed: np.ndarray
    gain: np.ndarray
    headroom: np.ndarray
    best_baseline: dict[int, str] = field(default_factory=dict)  # k -> system
    corr: float = float("nan")
    p_swap: float = float("nan")  # label-swap null (keeps the shared-baseline artefact)
    p_shuffle: float = float("nan")  # headroom shuffled across points (does not)

    @property
    def shared(self) -> bool:
        """True when the headroom is measured on the very baseline the gain is measured against."""
        return self.headroom_kind == "same"

    @property
    def p(self) -> float:
        """The p-value whose null is valid for this headroom: label swap when the headroom is measured
        on the gain's own baseline (shared noise), shuffle when it is measured on other systems."""
        return self.p_swap if self.shared else self.p_shuffle

    def describe(self) -> tuple[str, str]:
        """(gain's baseline, headroom's systems) in words."""
        gain = "best baseline" if self.versus == "best" else self.versus
        room = {"same": gain, "others": "mean of the other baselines"}.get(
            self.headroom_kind, self.headroom_kind
        )
        return gain, room

    @property
    def n(self) -> int:
        """Number of points."""
        return int(self.gain.size)

    def terciles(self) -> list[float]:
        """Mean gain in the low / mid / high headroom third."""
        order = np.argsort(self.headroom, kind="stable")
        return [float(self.gain[part].mean()) for part in np.array_split(order, 3)]


def _load(result: dict | str | Path) -> dict:
    if isinstance(result, (str, Path)):
        return json.loads(Path(result).read_text())
    if not isinstance(result, dict) or "cells" not in result:
        raise ValueError("result must be a published result dict (with 'cells') or a path to its JSON")
    return result


def best_baselines(
    result: dict, metric: str = "final_accuracy", ours: str = "poes"
) -> dict[tuple[int, int], tuple[str, list[str]]]:
    """(tier, k) -> (best equal-budget baseline, every compared baseline) of the experiment's 'better'
    claim on ``metric`` (the best is the one with the highest mean over seeds, as the claim judged)."""
    out: dict[tuple[int, int], tuple[str, list[str]]] = {}
    for claim in result.get("claims", []):
        if claim.get("metric") != metric or claim.get("kind") != "better" or claim.get("ours") != ours:
            continue
        for check in claim.get("checks", []):
            if check.get("best_baseline"):
                point = check["point"]
                key = (int(point.get("tier", 1)), int(point["k"]))
                out[key] = (check["best_baseline"], list(claim.get("versus", [])))
    if not out:
        raise ValueError(f"result has no 'better' claim on {metric!r} for {ours!r} with a best baseline")
    return out


def _per_cell(result: dict, metric: str, level: str) -> dict[tuple[int, int, str], dict[int, np.ndarray]]:
    """(tier, k, system) -> seed -> values (one per seed, or the suite's per-task accuracies)."""
    out: dict[tuple[int, int, str], dict[int, np.ndarray]] = {}
    for cell in result["cells"]:
        if cell.get("status") != "ok":
            continue
        if level == "task":
            values = (cell.get("details") or {}).get(f"task_{metric}")
            if values is None:
                continue
        else:
            values = [cell["metrics"].get(metric, float("nan"))]
        key = (int(cell["point"].get("tier", 1)), int(cell["point"]["k"]), cell["system"])
        out.setdefault(key, {})[int(cell["seed"])] = np.asarray(values, dtype=np.float64)
    return out


def _corr(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row pair of x, y (shape (..., n)); nan when a row is constant."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    denom = np.sqrt((xc * xc).sum(axis=-1) * (yc * yc).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(axis=-1) / denom


def headroom_analysis(
    result: dict | str | Path,
    *,
    metric: str = "final_accuracy",
    ours: str = "poes",
    reference: str = "full_evaluation",
    versus: str = "best",
    headroom: str = "same",
    level: str = "seed",
    permutations: int = 2000,
    seed: int = 0,
) -> dict[int, HeadroomStats]:
    """Gain of ``ours`` over the best baseline vs the baselines' headroom below ``reference``, per tier.

    Parameters
    ----------
    result:
        A published result (dict or path to ``results/poes/<profile>.json``).
    metric:
        A "max" metric the cells report (and, for ``level="task"``, store per task as
        ``details["task_<metric>"]``).
    ours, reference:
        The system whose gain is measured and the system that bounds what any scheduler can reach.
    versus:
        The gain's baseline: ``"best"`` (per (tier, k), the best equal-budget baseline of the
        experiment's accuracy claim) or a system name.
    headroom:
        Headroom = reference minus: ``"same"``, the gain's baseline (shares its noise with the gain;
        label-swap null); ``"others"``, the mean of the claim's other compared baselines; or a system name
        (both independent of the gain's measurements unless it is the gain's baseline: shuffle null).
    level:
        ``"seed"``: one point per (tier, k, seed); ``"task"``: one per task of each seed's suite.
    permutations:
        Random label swaps (and shuffles) for the p-values.
    seed:
        Seed of the permutations.

    Returns
    -------
    dict
        tier -> :class:`HeadroomStats`.
    """
    if level not in ("seed", "task"):
        raise ValueError(f"level must be 'seed' or 'task', got {level!r}")
    if not isinstance(headroom, str) or not headroom:
        raise ValueError(f"headroom must be 'same', 'others' or a system name, got {headroom!r}")
    if not isinstance(versus, str) or not versus:
        raise ValueError(f"versus must be 'best' or a system name, got {versus!r}")
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    data = _load(result)
    best = best_baselines(data, metric, ours)
    cells = _per_cell(data, metric, level)
    rng = np.random.default_rng(seed)
    out: dict[int, HeadroomStats] = {}
    for tier in sorted({t for t, _ in best}):
        columns: dict[str, list[np.ndarray]] = {"ours": [], "base": [], "bound": [], "k": [], "seed": []}
        baselines = {}
        shared = False
        for (t, k), (best_name, compared) in sorted(best.items()):
            if t != tier:
                continue
            baseline = best_name if versus == "best" else versus
            baselines[k] = baseline
            if headroom == "others":
                others = [v for v in compared if v not in (baseline, ours)]
            else:
                others = [baseline if headroom == "same" else headroom]
            if not others:
                raise ValueError(f"tier {t}, k {k}: no baseline besides {baseline!r} to measure headroom on")
            shared = others == [baseline]
            runs = [cells.get((t, k, name), {}) for name in (ours, baseline, reference, *others)]
            for s in sorted(set.intersection(*(set(run) for run in runs))):
                values = [run[s] for run in runs]
                if len({v.size for v in values}) != 1:
                    raise ValueError(f"tier {t}, k {k}, seed {s}: systems report different task counts")
                columns["ours"].append(values[0])
                columns["base"].append(values[1])
                columns["bound"].append(values[2] - np.mean(values[3:], axis=0))
                columns["k"].append(np.full(values[0].size, k))
                columns["seed"].append(np.full(values[0].size, s))
        if not columns["ours"]:
            continue
        o, b, room, ks, seeds = (np.concatenate(columns[c]) for c in ("ours", "base", "bound", "k", "seed"))
        kind = "same" if shared else headroom
        stats = HeadroomStats(tier, level, kind, versus, ks, seeds, o - b, room, baselines)
        if stats.n >= 3:
            stats.corr = float(_corr(stats.headroom, stats.gain))
            swap = rng.random((permutations, stats.n)) < 0.5  # True: POES and the baseline trade places
            gain = np.where(swap, b - o, o - b)
            # with headroom = reference - best baseline, a swap makes it reference - POES = room - gain
            room_swapped = np.where(swap, room - (o - b), room) if stats.shared else room[None, :]
            null = _corr(np.broadcast_to(room_swapped, gain.shape), gain)
            stats.p_swap = float((1 + np.sum(null >= stats.corr)) / (1 + permutations))
            shuffled = np.stack([rng.permutation(room) for _ in range(permutations)])
            null = _corr(shuffled, np.broadcast_to(stats.gain, shuffled.shape))
            stats.p_shuffle = float((1 + np.sum(null >= stats.corr)) / (1 + permutations))
        out[tier] = stats
    if not out:
        raise ValueError(f"no (tier, k, seed) has {ours!r}, its best baseline and {reference!r} all ok")
    return out


def headroom_table(stats: dict[int, HeadroomStats]) -> str:
    """Markdown table of :func:`headroom_analysis`'s result."""
    lines = [
        "| tier | gain over | headroom below full evaluation of | points | baseline per k | corr "
        "| p, label swap | p, shuffle | mean gain, low / mid / high headroom third |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tier, s in stats.items():
        base = ", ".join(f"{k}: {name}" for k, name in s.best_baseline.items())
        third = " / ".join(f"{100 * g:+.1f}" for g in s.terciles())
        gain, room = s.describe()
        lines.append(
            f"| {tier} | {gain} | {room} | {s.n} ({s.level}) | {base} | {s.corr:+.2f} | {s.p_swap:.3f} "
            f"| {s.p_shuffle:.3f} | {third} pp |"
        )
    return "\n".join(lines)


def plot_headroom(rows: Sequence[dict[int, HeadroomStats]], path: str | Path, title: str = "") -> Path:
    """Scatter gain vs headroom: one row of panels per analysis in ``rows`` (e.g. both headroom kinds),
    one panel per tier, points coloured by k; writes a PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("rows must hold at least one headroom_analysis result")
    tiers = sorted({tier for stats in rows for tier in stats})
    fig, axes = plt.subplots(
        len(rows), len(tiers), figsize=(4.6 * len(tiers), 3.6 * len(rows)), squeeze=False
    )
    for r, stats in enumerate(rows):
        for c, tier in enumerate(tiers):
            ax = axes[r][c]
            s = stats.get(tier)
            if s is None:
                ax.set_axis_off()
                continue
            for k in sorted(set(s.k.tolist())):
                mask = s.k == k
                ax.scatter(100 * s.headroom[mask], 100 * s.gain[mask], s=16, alpha=0.7, label=f"k = {k}")
            if s.n >= 2 and np.ptp(s.headroom) > 0:
                slope, intercept = np.polyfit(s.headroom, s.gain, 1)
                xs = np.linspace(s.headroom.min(), s.headroom.max(), 2)
                ax.plot(100 * xs, 100 * (slope * xs + intercept), "k-", lw=1.2, label="least squares")
            ax.axhline(0, color="grey", lw=0.8)
            gain, room = s.describe()
            ax.set_xlabel(f"full evaluation - {room} (pp)", fontsize=9)
            ax.set_ylabel(f"POES - {gain} (pp)", fontsize=9)
            null = "label swap" if s.shared else "shuffle"
            unit = "(k, seed)" if s.level == "seed" else "(k, seed, task)"
            head = f"tier {tier}, {s.n} {unit} points: r = {s.corr:+.2f}"
            ax.set_title(f"{head}, p = {s.p:.3f} ({null})", fontsize=9)
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path, dpi=80)


def headroom_tables(
    result: dict | str | Path, level: str = "seed"
) -> tuple[str, list[dict[int, HeadroomStats]]]:
    """One Markdown table holding every analysis of :data:`README_ANALYSES` at ``level``, and their stats."""
    rows = [headroom_analysis(result, versus=v, headroom=h, level=level) for v, h in README_ANALYSES]
    tables = [headroom_table(stats).splitlines() for stats in rows]
    return "\n".join(tables[0] + [line for table in tables[1:] for line in table[2:]]), rows


def headroom_readme_analysis(result: dict) -> Analysis:
    """The experiment's ``headroom`` analysis: the seed-level table, and the figure of its first two rows
    (what ``neurips26 report --readme poes --profile P`` writes into the README and ``docs/poes/``)."""
    markdown, rows = headroom_tables(result, level="seed")
    profile = result["run_info"]["profile"]
    return Analysis(
        markdown,
        figure=lambda path: plot_headroom(rows[:2], path, title=f"POES gain vs headroom ({profile})"),
    )
