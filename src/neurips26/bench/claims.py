"""Claim verdicts drawn from a run's cells: ours vs the best baseline per grid point (or pooled), then the
guards of issues #43 and #48 that keep a verdict from saying more than the design can see.

Order at each point: the positive contrast first (a design that cannot tell a known-good system from a
known-bad one is ``uninformative``), then the floors (a compared system no better than chance makes the
check ``inconclusive: <system> below floor``), then equal budgets (a frontier metric over unequal
numbers of sweep points makes it ``inconclusive: unequal sweep points``), then identity (ours equal to a
baseline or a control cell for cell is ``indistinguishable``), then the negative controls (a control
that passes too makes a true check ``vacuous``). Last, a point where every compared system is past the
metric's ``fail_level`` is ``inconclusive: <fail_reason>`` (no method identifies theta here): it compares
failures.
"""

from __future__ import annotations

import math
from typing import Any

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile
from neurips26.bench.results import point_key
from neurips26.bench.stats import (
    MIN_PAIRS,
    ClaimCheck,
    Cluster,
    below_floor,
    check_claim_at,
    combine_verdicts,
    identical,
)


def values_by_key(cells: list[dict], system: str, metric: str, point: dict | None) -> dict[Any, float]:
    """Metric values of one system keyed for pairing: by seed at a point, by (point, seed) when pooled.

    A cell that errored or produced a NaN appears as a NaN, so it is counted as a missing pair."""
    out: dict[Any, float] = {}
    for c in cells:
        if c["system"] != system or c["status"] == "n/a" or (point is not None and c["point"] != point):
            continue
        value = c["metrics"].get(metric) if c["status"] == "ok" else None
        key = (point_key(c["point"]), c["seed"]) if point is None else c["seed"]
        out[key] = math.nan if value is None else value
    return out


def _seed_of(key: Any) -> Any:
    """The seed of a pooled pairing key ``(point, seed)``: a pooled claim's pairs are clustered by seed."""
    return key[-1]


def _not_applicable(cells: list[dict], system: str, point: dict | None) -> bool:
    """Whether every cell of ``system`` (at ``point``) said the system does not apply there."""
    mine = [c for c in cells if c["system"] == system and (point is None or c["point"] == point)]
    return bool(mine) and all(c["status"] == "n/a" for c in mine)


def floor_values(
    experiment: Experiment, metric: str, cells: list[dict], point: dict | None
) -> float | dict[Any, float] | None:
    """The floor of ``metric`` at ``point``: a number, the floor system's cells, or None (no floor, or its
    system was not run)."""
    floor = experiment.floor_of(metric)
    if not isinstance(floor, str):
        return floor
    values = values_by_key(cells, floor, metric, point)
    return values or None


def system_floor_flags(experiment: Experiment, name: str, cells: list[dict], point: dict) -> dict[str, str]:
    """Metric -> why ``name`` is below that metric's floor at ``point`` (the ``broken`` flags of a table)."""
    flags = {}
    for metric in experiment.metrics:
        if name == experiment.floor_of(metric.name):
            continue  # the floor system is the floor
        floor = floor_values(experiment, metric.name, cells, point)
        if floor is None:
            continue
        reason = below_floor(values_by_key(cells, name, metric.name, point), floor, goal=metric.goal)
        if reason:
            flags[metric.name] = reason
    return flags


def _contrast_check(claim: Claim, options: dict, cells: list[dict], point: dict | None) -> dict:
    """The positive contrast's own check: ``good`` must be shown better than ``bad`` on the claim's metric."""
    good, bad = claim.contrast or ("", "")
    check = check_claim_at(
        values_by_key(cells, good, claim.metric, point),
        {bad: values_by_key(cells, bad, claim.metric, point)},
        ours_name=good,
        **{**options, "kind": "better", "margin": 0.0},
    )
    return {"good": good, "bad": bad, **check.to_dict()}


def _check_point(
    experiment: Experiment, claim: Claim, cells: list[dict], point: dict | None, versus: list[str]
) -> dict:
    """One claim at one point: ours vs the best applicable baseline, then the guards (module docstring)."""
    goal = experiment.metric(claim.metric).goal
    cluster: Cluster | None = _seed_of if point is None else None
    applicable = [name for name in versus if not _not_applicable(cells, name, point)]
    baselines = {name: values_by_key(cells, name, claim.metric, point) for name in applicable}
    options = {
        "goal": goal,
        "kind": claim.kind,
        "margin": claim.margin,
        "margin_scale": claim.margin_scale,
        "point": point or {},
        "cluster": cluster,
    }
    ours = values_by_key(cells, claim.ours, claim.metric, point)
    check = check_claim_at(
        ours,
        baselines,
        ours_name=claim.ours,
        paper_effect=claim.paper_effect,
        paper_effect_scale=claim.paper_effect_scale,
        **options,
    )
    _apply_controls(check, claim, ours, baselines, cells, point, options)
    _apply_floors(check, experiment, claim, {claim.ours: ours, **baselines}, cells, point, cluster)
    _apply_equal_budgets(check, experiment, claim, [claim.ours, *applicable], cells, point)
    if claim.contrast is not None:
        check.contrast = _contrast_check(claim, options, cells, point)
        _apply_contrast(check, check.contrast)
    _apply_fail_level(check, experiment.metric(claim.metric), {claim.ours: ours, **baselines}, cluster)
    return check.to_dict()


def _apply_controls(
    check: ClaimCheck,
    claim: Claim,
    ours: dict[Any, float],
    baselines: dict[str, dict[Any, float]],
    cells: list[dict],
    point: dict | None,
    options: dict,
) -> None:
    """Judge each control as if it were ours; ours equal to a control is ``indistinguishable``, a true
    check that a control passes too is ``vacuous``."""
    controls = {control: values_by_key(cells, control, claim.metric, point) for control in claim.controls}
    for control, values in controls.items():
        rivals = {name: rival for name, rival in baselines.items() if name != control}
        check.controls[control] = check_claim_at(values, rivals, ours_name=control, **options).reproduced
    same = [name for name, values in controls.items() if identical(ours, values, min_shared=MIN_PAIRS)]
    passing = [name for name, verdict in check.controls.items() if verdict == "true"]
    if same and check.n_pairs >= MIN_PAIRS:
        check.reproduced = "indistinguishable"
        check.reason = f"{claim.ours} equals control {', '.join(same)} cell for cell"
    elif check.reproduced == "true" and passing:
        check.reproduced = "vacuous"
        check.reason = f"control {', '.join(passing)} passes too"


def _apply_floors(
    check: ClaimCheck,
    experiment: Experiment,
    claim: Claim,
    compared: dict[str, dict[Any, float]],
    cells: list[dict],
    point: dict | None,
    cluster: Cluster | None,
) -> None:
    """Ours or a baseline no better than the metric's floor makes the check ``inconclusive``."""
    floor = floor_values(experiment, claim.metric, cells, point)
    if floor is None:
        return
    goal = experiment.metric(claim.metric).goal
    for name, values in compared.items():
        if name != experiment.floor_of(claim.metric):
            why = below_floor(values, floor, goal=goal, cluster=cluster)
            if why:
                check.below_floor[name] = why
    if check.below_floor:
        check.reproduced = "inconclusive"
        check.reason = f"{', '.join(check.below_floor)} below floor"


def sweep_point_counts(
    experiment: Experiment, metric: str, systems: list[str], cells: list[dict], point: dict | None
) -> dict[str, list[float]]:
    """System -> the distinct numbers of sweep points behind its cells of frontier metric ``metric`` (empty
    when ``metric`` is no frontier metric). Cells without a count (errored, gated) are missing pairs
    already, so they add none."""
    points_metric = experiment.metric(metric).points_metric
    if points_metric is None:
        return {}
    counts = {}
    for name in systems:
        values = values_by_key(cells, name, points_metric, point).values()
        counts[name] = sorted({value for value in values if math.isfinite(value)})
    return counts


def _apply_equal_budgets(
    check: ClaimCheck,
    experiment: Experiment,
    claim: Claim,
    compared: list[str],
    cells: list[dict],
    point: dict | None,
) -> None:
    """A frontier metric compared over unequal sweep points is ``inconclusive``: a hypervolume only grows
    with points, so the system with more of them wins by its budget (issue #43, rule 3)."""
    systems = list(dict.fromkeys([*compared, *claim.controls]))
    counts = sweep_point_counts(experiment, claim.metric, systems, cells, point)
    if not counts:
        return
    check.sweep_points = counts
    distinct = {value for values in counts.values() for value in values}
    if len(distinct) > 1:
        shown = ", ".join(f"{name} {'/'.join(f'{v:g}' for v in values)}" for name, values in counts.items())
        check.reproduced = "inconclusive"
        check.reason = f"unequal sweep points ({shown})"


def _apply_contrast(check: ClaimCheck, contrast: dict) -> None:
    """An unresolved contrast overrides the verdict: the design cannot see the difference it must see."""
    if contrast["reproduced"] == "true":
        return
    good, bad = contrast["good"], contrast["bad"]
    if contrast["ci_low"] is None and contrast["reproduced"] == "inconclusive":  # too few pairs, or missing
        check.reproduced = "inconclusive"
        check.reason = f"contrast {good} vs {bad}: {contrast['reason']}"
        return
    check.reproduced = "uninformative"
    check.reason = f"design cannot resolve {good} vs {bad}"


def _apply_fail_level(
    check: ClaimCheck, metric: Metric, compared: dict[str, dict[Any, float]], cluster: Cluster | None
) -> None:
    """Every compared system past the metric's ``fail_level`` makes the point ``inconclusive:
    <fail_reason>``: comparing failures says nothing about the claim, whatever the contrast says."""
    if metric.fail_level is None or not compared:
        return
    failed = [
        below_floor(values, metric.fail_level, goal=metric.goal, cluster=cluster)
        for values in compared.values()
    ]
    if all(why is not None for why in failed):  # a system without values never counts as failed
        check.reproduced = "inconclusive"
        check.reason = metric.fail_reason


def control_warnings(claim: Claim, cells: list[dict], points: list[dict | None]) -> list[str]:
    """A control equal to a compared baseline cell for cell tests nothing the baseline does not (issue
    #43: spcacw's control ``uniform_weights`` = its baseline ``fedavg`` on every seed)."""
    warnings = []
    for control in claim.controls:
        for baseline in (name for name in claim.versus if name != control):
            if points and all(
                identical(
                    values_by_key(cells, control, claim.metric, point),
                    values_by_key(cells, baseline, claim.metric, point),
                    min_shared=MIN_PAIRS,
                )
                for point in points
            ):
                warnings.append(f"control {control} equals baseline {baseline} cell for cell")
    return warnings


def evaluate_claim(experiment: Experiment, profile: Profile, claim: Claim, cells: list[dict]) -> dict:
    """The claim's verdict per grid point (or pooled): ours vs the best baseline, with its guards."""
    goal = experiment.metric(claim.metric).goal
    present = set(experiment.system_names(profile))
    versus = [name for name in claim.versus if name in present]
    absent = [name for name in claim.systems() if name not in present]
    covered = [p for p in profile.points() if claim.covers(p)]
    points: list[dict | None] = list(covered) if claim.per_point else ([None] if covered else [])
    cells = [c for c in cells if claim.covers(c["point"])]
    checks = [_check_point(experiment, claim, cells, point, versus) for point in points]
    reproduced = combine_verdicts([c["reproduced"] for c in checks])
    reason = None
    if absent:  # a profile that leaves out a named system cannot judge the claim
        reproduced, reason = "inconclusive", "missing " + ", ".join(absent) + " (not in this profile)"
    elif not checks:
        reproduced, reason = "inconclusive", "no grid point covered"
    return {
        "text": claim.text,
        "metric": claim.metric,
        "goal": goal,
        "kind": claim.kind,
        "margin": claim.margin,
        "margin_source": claim.margin_source,
        "margin_scale": claim.margin_scale,
        "ours": claim.ours,
        "versus": versus,
        "controls": list(claim.controls),
        "contrast": list(claim.contrast) if claim.contrast else None,
        "paper_effect": claim.paper_effect,
        "paper_effect_source": claim.paper_effect_source,
        "paper_effect_scale": claim.paper_effect_scale,
        "floor": experiment.floor_of(claim.metric),
        "where": {key: list(values) for key, values in claim.where.items()},
        "checks": checks,
        "reproduced": reproduced,
        "reason": reason or _first_reason(checks, reproduced),
        "versus_paper": _versus_paper(checks),
        "warnings": control_warnings(claim, cells, points) if not absent else [],
    }


def _versus_paper(checks: list[dict]) -> str | None:
    """``smaller``/``larger`` when every judged check's interval lies on that side of the paper's effect."""
    sides = {check.get("versus_paper") for check in checks if check.get("ci_low") is not None}
    return sides.pop() if len(sides) == 1 else None


def _first_reason(checks: list[dict], verdict: str) -> str | None:
    """The reason of the first check that shares the combined verdict (for one-line summaries)."""
    for check in checks:
        if check["reproduced"] == verdict and check.get("reason"):
            return check["reason"]
    return None
