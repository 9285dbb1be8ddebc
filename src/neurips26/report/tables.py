"""Markdown tables rebuilt from results JSON alone."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from neurips26.bench.results import point_key

VERDICT_MARK = {"true": "✓", "false": "✗", "inconclusive": "?", "vacuous": "∅"}
VERDICT_LEGEND = (
    "✓ reproduced, ✗ refuted, ? inconclusive (too few pairs, a missing system, or an interval across 0), "
    "∅ vacuous (a negative control passes the claim too); — not applicable or not measured"
)


def fmt(value: float | None, digits: int = 4) -> str:
    """Numbers in a compact form that keeps small and large values readable."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _check_label(check: dict) -> str:
    return point_key(check["point"]) or "all"


def claim_cells(claim: dict) -> dict[str, str]:
    """Ours, best baseline and delta (95% CI) for a claim, one entry per grid point joined by '; '."""
    ours, best, delta = [], [], []
    for check in claim["checks"]:
        label = _check_label(check)
        prefix = f"{label}: " if len(claim["checks"]) > 1 else ""
        ours.append(prefix + fmt(check["ours_mean"]))
        best.append(prefix + f"{check['best_baseline'] or '—'} {fmt(check['baseline_mean'])}")
        ci = f"[{fmt(check['ci_low'], 3)}, {fmt(check['ci_high'], 3)}]" if check["ci_low"] is not None else ""
        n = f"n={check.get('n_pairs', 0)}"
        why = f" ({check['reason']})" if check.get("reason") else ""
        mark = VERDICT_MARK[check["reproduced"]]
        delta.append(prefix + f"{fmt(check['effect'], 3)} {ci} {n} {mark}{why}".replace("  ", " ").strip())
    return {"ours": "; ".join(ours), "best": "; ".join(best), "delta": "; ".join(delta)}


def _verdict_text(claim: dict) -> str:
    text = VERDICT_MARK[claim["reproduced"]] + " " + claim["reproduced"]
    return text + (f" ({claim['reason']})" if claim.get("reason") else "")


def _min_pairs(claim: dict) -> str:
    pairs = [check.get("n_pairs", 0) for check in claim["checks"]]
    return str(min(pairs)) if pairs else "0"


def summary_rows(results: Sequence[dict], *, claim_width: int | None = None) -> list[list[str]]:
    """One row per claim of every method: verdict, fewest pairs behind it, wall time and status.

    ``claim_width`` shortens the claim text (the terminal table); REPORT.md keeps it whole.
    """
    rows = []
    for result in results:
        info = result["run_info"]
        for index, claim in enumerate(result["claims"] or [None]):
            text = "—" if claim is None else claim["text"]
            verdict = "—" if claim is None else _verdict_text(claim)
            if claim_width:  # the terminal table: about 120 columns in all
                text = textwrap.shorten(text, claim_width, placeholder="…")
                verdict = textwrap.shorten(verdict, 30, placeholder="…)")
            rows.append(
                [
                    info["slug"] if index == 0 else "",
                    text,
                    "—" if claim is None else _min_pairs(claim),
                    verdict,
                    f"{info.get('wall_s', 0.0):.0f}s" if index == 0 else "",
                    info["status"] if index == 0 else "",
                ]
            )
    return rows


SUMMARY_HEADER = ("method", "claim", "n", "verdict", "wall", "status")


def systems_table(result: dict) -> str:
    """Mean ± std of every metric for every system, one block per grid point."""
    metrics = [m["name"] for m in result["metrics"]]
    blocks = []
    points = next(iter(result["systems"].values()))["points"] if result["systems"] else []
    for index, point in enumerate(points):
        rows = []
        for name, system in result["systems"].items():
            summary = system["points"][index]["summary"]
            row = [f"**{name}**" if name == result["run_info"]["ours"] else name]
            for metric in metrics:
                row.append(_mean_cell(summary[metric]))
            rows.append(row)
        title = point_key(point["point"])
        blocks.append((f"*{title}*\n\n" if title else "") + markdown_table(["system", *metrics], rows))
    return "\n\n".join(blocks)


def _mean_cell(summary: dict) -> str:
    """``mean ± std (n)``; a lone value gets no spread (there is none to show)."""
    if summary["mean"] is None:
        return "—"
    if summary["n"] < 2:
        return f"{fmt(summary['mean'])} (n=1)"
    return f"{fmt(summary['mean'])} ± {fmt(summary['std'], 2)} (n={summary['n']})"


def claims_table(result: dict) -> str:
    rows = []
    for claim in result["claims"]:
        cells = claim_cells(claim)
        kind = claim["kind"]
        if kind == "noninferior":
            kind += f" (margin {_margin_text(claim)}: {claim.get('margin_source', '')})"
        if claim.get("controls"):
            kind += "; controls: " + ", ".join(claim["controls"])
        rows.append([claim["text"], claim["metric"], kind, cells["delta"], _verdict_text(claim)])
    table = markdown_table(
        ["claim", "metric", "kind", "ours − best baseline (95% CI, pairs)", "verdict"], rows
    )
    return table + "\n\n" + VERDICT_LEGEND


def _time_text(info: dict) -> str:
    """Wall time of this invocation, and the compute time of all cells (which survives resuming)."""
    text = f"wall time {info.get('wall_s', 0.0):.1f} s"
    if info.get("resumed_cells"):
        text += f" ({info['resumed_cells']} cells resumed)"
    return text + f", cell compute time {info.get('cells_wall_s', 0.0):.1f} s"


def method_section(result: dict, figure: str | None = None) -> str:
    """The results block of one method: run facts, claims, systems, figure, errors."""
    info = result["run_info"]
    parts = [
        f"Profile `{info['profile']}`, {info['seeds']} seed(s), config hash `{info['config_hash']}`, "
        f"{_time_text(info)}, status **{info['status']}**.",
        claims_table(result),
        systems_table(result),
    ]
    if figure:
        parts.append(f"![{info['slug']}]({figure})")
    if info["errors"]:
        parts.append("Errors:\n" + "\n".join(f"- {e}" for e in info["errors"]))
    return "\n\n".join(parts)


def _margin_text(claim: dict) -> str:
    """A relative margin as a share of the baseline (``5%``), an absolute one in the metric's unit."""
    if claim.get("margin_scale") == "absolute":
        return f"{claim['margin']:g} absolute"
    return f"{claim['margin']:.0%}"
