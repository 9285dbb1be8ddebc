"""Does POES's gain concentrate where the baselines have headroom? (the paper's qualitative claim)

Reads a published run (``results/poes/<profile>.json``; no optimizer runs) and calls
:func:`neurips26.methods.poes.headroom.headroom_analysis`: per (tier, k, seed) and per task, POES's gain
over the best equal-budget baseline against the headroom below full evaluation, measured on that baseline
(shares its noise with the gain: label-swap null) and on the other baselines (independent: shuffle null),
plus POES over the random minibatch against full evaluation minus the fixed random subset. Prints
Markdown tables and writes ``docs/poes/headroom_<profile>.png`` (seed level, the first two analyses).

Run: ``python benchmarks/poes/poes_headroom.py [profile]`` (default ``default``; a few seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

from neurips26.methods.poes.headroom import headroom_tables, plot_headroom

ROOT = Path(__file__).resolve().parents[2]


def main(profile: str = "default") -> Path:
    """Print the tables for ``results/poes/<profile>.json`` and write its figure; returns the PNG path."""
    result = ROOT / "results" / "poes" / f"{profile}.json"
    figure = []
    for level in ("seed", "task"):
        print(f"\n### {level} level ({profile})\n")
        table, rows = headroom_tables(result, level=level)
        print(table)
        if level == "seed":
            figure = rows[:2]
    out = plot_headroom(
        figure, ROOT / "docs" / "poes" / f"headroom_{profile}.png", title=f"POES gain vs headroom ({profile})"
    )
    print(f"\nwrote {out.relative_to(ROOT)}")
    return out


if __name__ == "__main__":
    main(*sys.argv[1:2])
