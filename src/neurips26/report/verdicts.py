"""Verdict sentences generated from a result, for the prose of a method README (issue #43, rule 8).

A README that says "the control never passes" while its JSON records the control passing misleads; a
README shows this block (``<!-- analysis:verdicts:PROFILE:start/end -->``) instead, which every method has
without declaring it, and the provenance test keeps it equal to the committed JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from neurips26.bench.experiment import Analysis, AnalysisFunction, Experiment
from neurips26.bench.results import point_key

VERDICTS_ANALYSIS = "verdicts"


def _where(checks: list[dict]) -> str:
    labels = [point_key(check["point"]) or "all points pooled" for check in checks]
    return ", ".join(labels)


def control_sentence(claim: Mapping[str, Any], control: str) -> str:
    """Where a negative control passes the claim itself, and where it does not."""
    checks = [check for check in claim["checks"] if control in (check.get("controls") or {})]
    passing = [check for check in checks if check["controls"][control] == "true"]
    if not checks:
        return f"control `{control}` was not judged"
    if not passing:
        return f"control `{control}` passes nowhere"
    others = [check for check in checks if check not in passing]
    text = f"control `{control}` **passes** at {_where(passing)}"
    return text + (f" (not at {_where(others)})" if others else " (at every point)")


def claim_sentence(claim: Mapping[str, Any]) -> str:
    """One line: the claim, its verdict and reason, and each control's own outcome."""
    verdict = claim["reproduced"] + (f" ({claim['reason']})" if claim.get("reason") else "")
    controls = [control_sentence(claim, control) for control in claim.get("controls") or []]
    return f"- {claim['text']}: **{verdict}**" + "".join(f"; {text}" for text in controls) + "."


def verdict_sentences(result: Mapping[str, Any]) -> Analysis:
    """Every claim's verdict and its controls' outcomes, with the tally, as generated Markdown."""
    claims = result["claims"]
    counts: dict[str, int] = {}
    for claim in claims:
        counts[claim["reproduced"]] = counts.get(claim["reproduced"], 0) + 1
    tally = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    lines = [f"{len(claims)} claim(s): {tally or 'none judged'}.", ""]
    return Analysis("\n".join(lines + [claim_sentence(claim) for claim in claims]))


def readme_analyses(experiment: Experiment) -> dict[str, AnalysisFunction]:
    """The analyses a method README may show: the built-in ``verdicts`` block, then the experiment's own."""
    if VERDICTS_ANALYSIS in experiment.analyses:
        raise ValueError(f"{experiment.slug}: analysis name {VERDICTS_ANALYSIS!r} is reserved (built in)")
    return {VERDICTS_ANALYSIS: verdict_sentences, **experiment.analyses}


GENERATED_BLOCK = re.compile(
    r"<!-- (results|analysis)[^>]*:start -->.*?<!-- (results|analysis)[^>]*:end -->", re.S
)
VERDICT_WORDS = {
    "reproduced": "true",
    "true": "true",
    "refuted": "false",
    "false": "false",
    "inconclusive": "inconclusive",
    "vacuous": "vacuous",
    "indistinguishable": "indistinguishable",
    "uninformative": "uninformative",
}
# "the claim is **refuted**", "two claims stay inconclusive", "the headline claim is true on ..."
STATED_VERDICT = re.compile(
    r"\bclaims?\b[^.;:]{0,40}?\b(?:is|are|stays?|remains?|becomes?)\s+(?:now\s+)?\**("
    + "|".join(VERDICT_WORDS)
    + r")\b",
    re.I,
)
NO_CONTROL_PASSES = re.compile(r"control[^.;]{0,40}\bnever passes|\bno control passes", re.I)
NONE_VACUOUS = re.compile(r"\b(?:none|no claim) is vacuous", re.I)


def _held(results: list[Mapping[str, Any]]) -> tuple[set[str], bool]:
    """Every verdict a claim or a check of ``results`` holds, and whether any control passes anywhere."""
    verdicts, control_passes = set(), False
    for result in results:
        for claim in result["claims"]:
            verdicts.add(claim["reproduced"])
            for check in claim["checks"]:
                verdicts.add(check["reproduced"])
                control_passes |= "true" in (check.get("controls") or {}).values()
    return verdicts, control_passes


def prose_verdict_mismatches(readme_text: str, results: list[Mapping[str, Any]]) -> list[str]:
    """Hand-written sentences (outside generated blocks) stating a verdict or a control outcome that none
    of ``results`` (the method's committed results) holds: a verdict no claim or check has, "the control
    never passes" while one passes, "none is vacuous" while a claim is. A coarse net by design: the place
    for exact verdicts is the generated ``verdicts`` block."""
    prose = GENERATED_BLOCK.sub("", readme_text)
    verdicts, control_passes = _held(results)
    found = []
    for match in STATED_VERDICT.finditer(prose):
        if VERDICT_WORDS[match.group(1).lower()] not in verdicts:
            found.append(f"{match.group(0)!r}: no claim or check holds {match.group(1).lower()}")
    if control_passes:
        found += [f"{m.group(0)!r}: a control passes in the JSON" for m in NO_CONTROL_PASSES.finditer(prose)]
    if "vacuous" in verdicts:
        found += [f"{m.group(0)!r}: a claim is vacuous in the JSON" for m in NONE_VACUOUS.finditer(prose)]
    return found
