"""Markdown tables rebuilt from results JSON alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neurips26.bench.results import point_key

VERDICT_MARK = {"true": "✓", "false": "✗", "inconclusive": "?"}


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
        delta.append(prefix + f"{fmt(check['effect'], 3)} {ci} {VERDICT_MARK[check['reproduced']]}".strip())
    return {"ours": "; ".join(ours), "best": "; ".join(best), "delta": "; ".join(delta)}


def summary_rows(results: Sequence[dict]) -> list[list[str]]:
    """One row per method: its headline claim and verdict, wall time and status."""
    rows = []
    for result in results:
        info = result["run_info"]
        claim = result["claims"][0] if result["claims"] else None
        cells = claim_cells(claim) if claim else {"ours": "—", "best": "—", "delta": "—"}
        rows.append(
            [
                info["slug"],
                claim["text"] if claim else "—",
                claim["metric"] if claim else "—",
                cells["ours"],
                cells["best"],
                cells["delta"],
                VERDICT_MARK[claim["reproduced"]] + " " + claim["reproduced"] if claim else "—",
                f"{info.get('wall_s', 0.0):.1f}s",
                info["status"],
            ]
        )
    return rows


SUMMARY_HEADER = (
    "method",
    "claim",
    "metric",
    "ours",
    "best baseline",
    "delta (95% CI)",
    "reproduced",
    "wall time",
    "status",
)


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
                s = summary[metric]
                row.append("—" if s["mean"] is None else f"{fmt(s['mean'])} ± {fmt(s['std'], 2)}")
            rows.append(row)
        title = point_key(point["point"])
        blocks.append((f"*{title}*\n\n" if title else "") + markdown_table(["system", *metrics], rows))
    return "\n\n".join(blocks)


def claims_table(result: dict) -> str:
    rows = []
    for claim in result["claims"]:
        cells = claim_cells(claim)
        kind = claim["kind"] + (f" (margin {claim['margin']:.0%})" if claim["kind"] == "noninferior" else "")
        rows.append(
            [
                claim["text"],
                claim["metric"],
                kind,
                cells["delta"],
                VERDICT_MARK[claim["reproduced"]] + " " + claim["reproduced"],
            ]
        )
    return markdown_table(["claim", "metric", "kind", "ours − best baseline (95% CI)", "reproduced"], rows)


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
