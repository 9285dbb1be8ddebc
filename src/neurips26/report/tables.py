"""Markdown tables rebuilt from results JSON alone."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from neurips26.bench.results import point_key

VERDICT_MARK = {
    "true": "✓",
    "false": "✗",
    "inconclusive": "?",
    "vacuous": "∅",
    "indistinguishable": "≡",
    "uninformative": "◌",
}
VERDICT_LEGEND = (
    "✓ reproduced, ✗ refuted, ? inconclusive (too few pairs, a missing system, or an interval across 0), "
    "∅ vacuous (a negative control passes the claim too); — not applicable or not measured"
)
# verdicts of issues #43/#48, explained only in tables that show them (older results keep their text)
EXTRA_LEGEND = {
    "indistinguishable": "≡ indistinguishable (ours equals a compared system cell for cell)",
    "uninformative": "◌ uninformative (the design cannot resolve the claim's positive contrast)",
}
MDE_LEGEND = "MDE: the smallest true difference the design finds with 80% power (two-sided 5%)"
PAPER_LEGEND = "< paper / > paper: the interval lies below / above the effect the paper reports"


def verdict_legend(verdicts: Iterable[str], *, with_mde: bool = False, with_paper: bool = False) -> str:
    """The legend of the verdict marks, with the newer verdicts' entries only where they are shown."""
    shown = set(verdicts)
    extras = [text for verdict, text in EXTRA_LEGEND.items() if verdict in shown]
    legend = VERDICT_LEGEND + "".join(f"; {text}" for text in extras)
    notes = [MDE_LEGEND] * with_mde + [PAPER_LEGEND] * with_paper
    return legend + "".join(f". {note}" for note in notes)


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
        design = _design_text(check)
        delta.append(
            prefix + f"{fmt(check['effect'], 3)} {ci} {n}{design} {mark}{why}".replace("  ", " ").strip()
        )
    return {"ours": "; ".join(ours), "best": "; ".join(best), "delta": "; ".join(delta)}


def _design_text(check: dict) -> str:
    """What the design could see at a check: its MDE, the paper's effect beside the interval, each negative
    control's own verdict and the positive contrast's difference (absent from results made before these
    were recorded)."""
    parts = []
    if check.get("mde") is not None:
        parts.append(f"MDE {fmt(check['mde'], 2)}")
    if check.get("versus_paper"):
        parts.append("< paper" if check["versus_paper"] == "smaller" else "> paper")
    for control, verdict in (check.get("controls") or {}).items():
        # issue #43 rule 8: a control's own verdict is shown, so no prose has to (or can) misstate it
        parts.append(f"control {control} {VERDICT_MARK.get(verdict, '?')}")
    contrast = check.get("contrast")
    if contrast and contrast.get("effect") is not None:
        ci = ""
        if contrast.get("ci_low") is not None:
            ci = f" [{fmt(contrast['ci_low'], 3)}, {fmt(contrast['ci_high'], 3)}]"
        mark = VERDICT_MARK.get(contrast["reproduced"], "?")
        parts.append(f"contrast {fmt(contrast['effect'], 3)}{ci} {mark}")
    return "".join(f", {part}" for part in parts)


def _verdict_text(claim: dict) -> str:
    text = VERDICT_MARK[claim["reproduced"]] + " " + claim["reproduced"]
    text += f" ({claim['reason']})" if claim.get("reason") else ""
    if claim.get("versus_paper"):
        text += f"; {claim['versus_paper']} than the paper's effect"
    return text


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
            broken = system["points"][index].get("below_floor") or {}
            row = [f"**{name}**" if name == result["run_info"]["ours"] else name]
            for metric in metrics:
                row.append(_mean_cell(summary[metric]) + (" **broken**" if metric in broken else ""))
            rows.append(row)
        title = point_key(point["point"])
        blocks.append((f"*{title}*\n\n" if title else "") + markdown_table(["system", *metrics], rows))
    return "\n\n".join(blocks + _broken_notes(result))


def _broken_notes(result: dict) -> list[str]:
    """One line per system and point below a metric's trivial floor (none for older results)."""
    lines = [
        f"- {name}{' at ' + point_key(point['point']) if point_key(point['point']) else ''}: {metric} {why}"
        for name, system in result["systems"].items()
        for point in system["points"]
        for metric, why in (point.get("below_floor") or {}).items()
    ]
    if not lines:
        return []
    return [
        "**broken**: no better than the metric's trivial floor (chance, a constant predictor or the "
        "un-adapted model); claims comparing it are inconclusive.\n" + "\n".join(lines)
    ]


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
        if claim.get("contrast"):
            kind += "; contrast: {} > {}".format(*claim["contrast"])
        if claim.get("paper_effect") is not None:
            kind += f"; paper: {_paper_effect_text(claim)} ({claim.get('paper_effect_source', '')})"
        rows.append([claim["text"], claim["metric"], kind, cells["delta"], _verdict_text(claim)])
    table = markdown_table(
        ["claim", "metric", "kind", "ours − best baseline (95% CI, pairs)", "verdict"], rows
    )
    warnings = [f"- {claim['text']}: {w}" for claim in result["claims"] for w in claim.get("warnings") or []]
    verdicts = [v for claim in result["claims"] for v in _verdicts_shown(claim)]
    with_mde = any(check.get("mde") is not None for claim in result["claims"] for check in claim["checks"])
    with_paper = any(claim.get("paper_effect") is not None for claim in result["claims"])
    legend = verdict_legend(verdicts, with_mde=with_mde, with_paper=with_paper)
    return table + ("\n\nWarnings:\n" + "\n".join(warnings) if warnings else "") + "\n\n" + legend


def _verdicts_shown(claim: dict) -> list[str]:
    contrasts = [check["contrast"]["reproduced"] for check in claim["checks"] if check.get("contrast")]
    return [claim["reproduced"], *(check["reproduced"] for check in claim["checks"]), *contrasts]


def _paper_effect_text(claim: dict) -> str:
    """The paper's reported improvement, as a share of the baseline when it is relative."""
    if claim.get("paper_effect_scale") == "relative":
        return f"{claim['paper_effect']:+.0%} of the baseline"
    return f"{claim['paper_effect']:+g}"


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
