"""Does POES's gain concentrate where the baselines have headroom? (the paper's qualitative claim)

Reads a published run (``results/poes/<profile>.json``; no optimizer runs) and calls
:func:`neurips26.methods.poes.headroom.headroom_analysis`: per (tier, k, seed) and per task, POES's gain
over the best equal-budget baseline against the headroom below full evaluation, measured on that baseline
(shares its noise with the gain: label-swap null) and on the other baselines (independent: shuffle null),
plus POES over the random minibatch against full evaluation minus the fixed random subset. Prints
Markdown tables and writes ``docs/poes/headroom_<profile>.png`` (seed level, the first two analyses).

Run: ``python benchmarks/poes_headroom.py [profile]`` (default ``default``; a few seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

from neurips26.methods.poes.headroom import headroom_analysis, headroom_table, plot_headroom

ROOT = Path(__file__).resolve().parents[1]


ANALYSES = (  # (gain over, headroom below full evaluation of)
    ("best", "same"),  # the reading; shares the baseline's noise: label-swap null
    ("best", "others"),  # the same gain, headroom on independent systems: shuffle null
    ("random_minibatch", "fixed_random"),  # vs GEPA's / DSPy's default, headroom on the negative control
)


def main(profile: str = "default") -> Path:
    """Print the tables for ``results/poes/<profile>.json`` and write its figure; returns the PNG path."""
    result = ROOT / "results" / "poes" / f"{profile}.json"
    figure = []
    for level in ("seed", "task"):
        print(f"\n### {level} level ({profile})\n")
        rows = [headroom_analysis(result, versus=v, headroom=h, level=level) for v, h in ANALYSES]
        tables = [headroom_table(stats).splitlines() for stats in rows]
        print("\n".join(tables[0] + [line for table in tables[1:] for line in table[2:]]))
        if level == "seed":
            figure = rows[:2]
    out = plot_headroom(
        figure, ROOT / "docs" / "poes" / f"headroom_{profile}.png", title=f"POES gain vs headroom ({profile})"
    )
    print(f"\nwrote {out.relative_to(ROOT)}")
    return out


if __name__ == "__main__":
    main(*sys.argv[1:2])
