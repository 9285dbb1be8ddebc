"""The experiment contract every method fills in: metrics, a claim, systems, profiles and a run function.

A method's ``experiment.py`` defines ``EXPERIMENT = Experiment(...)``. The runner expands it into cells
(system x grid point x seed), calls ``run`` on each, and compares ours with the best baseline per claim.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from neurips26.bench.setup import Setup, SetupContext, setup_stages
from neurips26.core.config import apply_overrides

Goal = Literal["min", "max"]
ClaimKind = Literal["better", "noninferior"]
MarginScale = Literal["relative", "absolute"]


@dataclass(frozen=True)
class Metric:
    """One reported number. ``goal`` says whether lower or higher is better.

    ``floor`` is the metric's trivial floor (chance accuracy, a constant predictor's error), with
    ``floor_source`` saying why: a compared system that does not clear it is ``broken``, and a claim
    comparing it is ``inconclusive: <system> below floor``. A floor measured by a system (the
    un-adapted model) is declared with ``Experiment.floors`` instead.
    ``fail_level`` is the value at which a system has failed outright (a relative parameter error of 1: the
    parameter not identified), with ``fail_reason`` the verdict's wording (``"no method identifies theta
    here"``). Unlike a floor, one system past it does not stop a comparison (ours identifying what a
    baseline cannot is a finding); a point where every compared system is past it is ``inconclusive:
    <fail_reason>`` instead of a comparison of failures (issue #48).
    ``timing=True`` marks a wall-clock time or a value derived from one (a speed-up, a validity decided
    under a time limit): it varies from run to run, so comparisons of two results leave it out.
    ``points_metric`` marks a frontier metric (a hypervolume or an area over a system's own sweep, which
    only grows with points): it names the metric in which each cell records how many sweep points its
    frontier holds. A claim on a frontier metric compares systems only at equal counts; unequal counts
    make its check ``inconclusive: unequal sweep points`` (issue #43: 4 StyleRoute points vs 2 StyleID).
    """

    name: str
    goal: Goal
    unit: str = ""
    description: str = ""
    floor: float | None = None
    floor_source: str = ""
    fail_level: float | None = None
    fail_reason: str = ""
    timing: bool = False
    points_metric: str | None = None

    def __post_init__(self) -> None:
        if self.points_metric == self.name:
            raise ValueError(f"Metric {self.name!r}: points_metric must name another metric")
        if self.goal not in ("min", "max"):
            raise ValueError(f"Metric {self.name!r}: goal must be 'min' or 'max', got {self.goal!r}")
        if self.floor is not None and not math.isfinite(self.floor):
            raise ValueError(f"Metric {self.name!r}: floor must be finite, got {self.floor}")
        if self.floor is not None and not self.floor_source.strip():
            raise ValueError(
                f"Metric {self.name!r}: a floor needs its floor_source (e.g. 'chance: 3 classes')"
            )
        if self.fail_level is not None and not math.isfinite(self.fail_level):
            raise ValueError(f"Metric {self.name!r}: fail_level must be finite, got {self.fail_level}")
        if (self.fail_level is None) != (not self.fail_reason.strip()):
            raise ValueError(
                f"Metric {self.name!r}: fail_level and fail_reason go together (got fail_level="
                f"{self.fail_level!r}, fail_reason={self.fail_reason!r})"
            )


@dataclass(frozen=True)
class Claim:
    """A checkable claim: ``ours`` versus the best of ``versus`` on ``metric``.

    ``kind="better"`` asks that ours beat the best baseline (the 95% CI of the difference excludes zero on
    the good side). ``kind="noninferior"`` asks that ours be no worse than the best baseline by more than
    ``margin`` (relative to the baseline's mean), e.g. "comparable prediction error".
    ``margin_source`` says where a noninferiority margin comes from ("paper, Sec. 5" or "ours: why");
    ``margin_scale="absolute"`` reads the margin in the metric's unit (for rates whose baseline may be 0).
    ``controls`` are naive systems that must not satisfy the claim: when ours passes and a control passes
    too, the claim shows nothing about the method and its verdict is ``vacuous``.
    ``per_point=True`` checks the claim at every grid point and reproduces only if all do.
    ``where`` restricts the claim to grid points whose values are listed, e.g.
    ``{"keep_ratio": (0.125, 0.0625)}`` for a claim made only at aggressive compression.
    ``profiles`` restricts the claim to the named profiles (all when empty), for a claim whose metric only
    a dedicated profile measures (e.g. retrieval probes too costly for ``default``).
    ``contrast=(good, bad)`` is the claim's positive contrast: two systems the design must tell apart on
    ``metric`` if it can judge the claim at all (full cache vs random eviction, FP vs 2-bit RTN). It is
    judged first, at each point; unless ``good`` is shown better than ``bad`` the claim's verdict there is
    ``uninformative: design cannot resolve <good> vs <bad>``.
    ``paper_effect`` is the improvement the paper reports (positive = ours better; in the metric's unit, or
    a share of the baseline's mean with ``paper_effect_scale="relative"``) and ``paper_effect_source``
    where it says so; a verdict then says whether the interval is ``smaller than the paper's effect``.
    """

    text: str
    metric: str
    ours: str
    versus: tuple[str, ...]
    kind: ClaimKind = "better"
    margin: float = 0.0
    margin_source: str = ""
    margin_scale: MarginScale = "relative"
    controls: tuple[str, ...] = ()
    per_point: bool = True
    where: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    profiles: tuple[str, ...] = ()
    contrast: tuple[str, str] | None = None
    paper_effect: float | None = None
    paper_effect_source: str = ""
    paper_effect_scale: MarginScale = "absolute"

    def systems(self) -> tuple[str, ...]:
        """Every system the claim names: ours, the baselines, the controls and the contrast."""
        return (self.ours, *self.versus, *self.controls, *(self.contrast or ()))

    def judged_in(self, profile: str) -> bool:
        """Whether the claim is judged in the profile named ``profile``."""
        return not self.profiles or profile in self.profiles

    def covers(self, point: Mapping[str, Any]) -> bool:
        """Whether the claim is made at grid point ``point``."""
        return all(point.get(key) in values for key, values in self.where.items())

    def __post_init__(self) -> None:
        if self.kind not in ("better", "noninferior"):
            raise ValueError(f"Claim.kind must be 'better' or 'noninferior', got {self.kind!r}")
        if self.margin < 0:
            raise ValueError(f"Claim.margin must be >= 0, got {self.margin}")
        if self.kind == "noninferior" and not (self.margin > 0 and self.margin_source.strip()):
            # margin 0 can never be shown on an exact tie, and a margin without a source is a free knob
            raise ValueError(
                f"Claim {self.text!r}: kind='noninferior' needs margin > 0 and a margin_source "
                f"(got margin={self.margin}, margin_source={self.margin_source!r})"
            )
        if self.margin_scale not in ("relative", "absolute"):
            raise ValueError(
                f"Claim.margin_scale must be 'relative' or 'absolute', got {self.margin_scale!r}"
            )
        if self.kind == "better" and self.margin != 0:
            raise ValueError(f"Claim {self.text!r}: margin applies to kind='noninferior' only")
        if not self.versus:
            raise ValueError("Claim.versus must name at least one baseline")
        if self.ours in self.versus:
            raise ValueError(f"Claim.versus must not contain ours ({self.ours!r})")
        if self.ours in self.controls:
            raise ValueError(f"Claim.controls must not contain ours ({self.ours!r})")
        for name in ("versus", "controls", "profiles"):
            if isinstance(getattr(self, name), str):
                raise TypeError(f"Claim.{name} must be a tuple of system names, got a string")
        self._check_contrast_and_paper_effect()

    def _check_contrast_and_paper_effect(self) -> None:
        if self.contrast is not None:
            if isinstance(self.contrast, str) or len(self.contrast) != 2:
                raise TypeError(
                    f"Claim.contrast must be a (good, bad) pair of system names, got {self.contrast!r}"
                )
            if self.contrast[0] == self.contrast[1]:
                raise ValueError(f"Claim.contrast must name two different systems, got {self.contrast!r}")
        if self.paper_effect is not None:
            if not math.isfinite(self.paper_effect):
                raise ValueError(f"Claim.paper_effect must be finite, got {self.paper_effect}")
            if not self.paper_effect_source.strip():
                raise ValueError(f"Claim {self.text!r}: paper_effect needs its paper_effect_source")
        if self.paper_effect_scale not in ("relative", "absolute"):
            raise ValueError(
                f"Claim.paper_effect_scale must be 'relative' or 'absolute', got {self.paper_effect_scale!r}"
            )


@dataclass(frozen=True)
class Profile:
    """A scale at which the experiment runs.

    ``overrides`` are applied to the method's default config; ``grid`` maps config keys to the values
    swept (their cartesian product gives the grid points); ``budget_s`` is the expected wall time of the
    whole profile for all systems and seeds on 2 cores (the smoke budget is asserted by the tests).
    """

    name: str
    budget_s: float
    seeds: int = 1
    overrides: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    systems: tuple[str, ...] | None = None  # None: every system of the experiment

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise ValueError(f"Profile {self.name!r}: budget_s must be > 0, got {self.budget_s}")
        if self.seeds < 1:
            raise ValueError(f"Profile {self.name!r}: seeds must be >= 1, got {self.seeds}")
        for key, values in self.grid.items():
            if len(values) == 0:
                raise ValueError(f"Profile {self.name!r}: grid[{key!r}] is empty")

    def points(self) -> list[dict[str, Any]]:
        """The grid points, in a fixed order (a single empty point when there is no grid)."""
        keys = list(self.grid)
        return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*self.grid.values())]


class NotApplicable(Exception):
    """Raised by ``run`` when a system does not apply at a grid point (e.g. an additive-only baseline on a
    non-additive model). The cell is recorded as ``n/a``, not as an error, and left out of comparisons."""


class Progress(Protocol):
    """What a run function may report while it works (a tqdm-like sink; silent in CI)."""

    def loop(self, iterable: Any, total: int | None = None, desc: str = "") -> Any: ...


class SilentProgress:
    """A progress sink that reports nothing."""

    def loop(self, iterable: Any, total: int | None = None, desc: str = "") -> Any:
        return iterable


RunFunction = Callable[..., Mapping[str, float]]
# without a setup stage: run(system, config, profile, seed, progress)
# with one:              run(system, config, context, profile, seed, progress)


@dataclass(frozen=True)
class Analysis:
    """A derived reading of a published result (e.g. "is the gain larger where baselines have headroom?"),
    computed from the result's cells alone, so a README can show it as generated text, never pasted.

    ``markdown``: the text shown in the README's ``<!-- analysis:NAME:PROFILE:start/end -->`` block (must
    be deterministic: seed any permutation test). ``figure``: optional; called with a PNG path to draw.
    """

    markdown: str
    figure: Callable[[Path], Any] | None = None


AnalysisFunction = Callable[[Mapping[str, Any]], Analysis]


@dataclass(frozen=True)
class Experiment:
    """Everything the runner needs to evaluate one method against its baselines.

    Parameters
    ----------
    slug: the method's folder name.
    config_cls: the method's config dataclass; its defaults are the ``default`` profile's base.
    claims: the claims to check; the first is the headline shown in the summary table.
    metrics: every metric ``run`` returns (quality and cost).
    systems: name -> factory ``(config) -> system``; ours first, then every baseline.
    profiles: ``smoke``, ``default`` and ``full``.
    run: ``run(system, config, profile, seed, progress) -> {metric: value}``; with ``setup``,
        ``run(system, config, context, profile, seed, progress)``.
    ours: the name of our system (the one drawn thicker in figures).
    pareto_x: optional cost metric (e.g. measured bits per weight); the report then also plots the
        headline metric against it, one curve per system (a Pareto figure).
    analyses: name -> ``fn(result) -> Analysis``: derived readings of a published result that
        ``neurips26 report --readme`` writes into the README's ``analysis:NAME:PROFILE`` blocks.
    setup: work shared by cells (a model, a seed's data, a reference), as one ``Setup`` or a tuple of
        stages (:mod:`neurips26.bench.setup`): built once per key in each worker, timed apart from the
        cells, and handed to ``run`` as ``context``. Never a module-level cache.
    devices: the torch devices ``run`` honours (``neurips26.core.device.default_device()``); a run asked
        for another device falls back to the first one listed and the cell records where it ran.
    floors: metric -> its trivial floor: a number (chance) or the name of a system that measures it per
        cell (a constant predictor, the un-adapted model); see ``Metric.floor`` for what a floor does.
    """

    slug: str
    config_cls: type
    claims: tuple[Claim, ...]
    metrics: tuple[Metric, ...]
    systems: Mapping[str, Callable[[Any], Any]]
    profiles: Mapping[str, Profile]
    run: RunFunction
    ours: str
    pareto_x: str | None = None
    devices: tuple[str, ...] = ("cpu",)
    analyses: Mapping[str, AnalysisFunction] = field(default_factory=dict)
    floors: Mapping[str, float | str] = field(default_factory=dict)
    setup: Setup | tuple[Setup, ...] | None = None

    def __post_init__(self) -> None:
        try:
            setup_stages(self.setup)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.slug}: {exc}") from None
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.slug}: duplicate metric names in {names}")
        for metric in self.metrics:
            if metric.points_metric is not None and metric.points_metric not in names:
                raise ValueError(
                    f"{self.slug}: metric {metric.name!r}: points_metric {metric.points_metric!r} "
                    f"not in metrics {names}"
                )
        if self.pareto_x is not None and self.pareto_x not in names:
            raise ValueError(f"{self.slug}: pareto_x {self.pareto_x!r} not in metrics {names}")
        if not self.devices or set(self.devices) - {"cpu", "cuda"}:
            raise ValueError(
                f"{self.slug}: devices must be a non-empty subset of ('cpu', 'cuda'), got {self.devices}"
            )
        if self.ours not in self.systems:
            raise ValueError(f"{self.slug}: ours={self.ours!r} is not among systems {list(self.systems)}")
        for claim in self.claims:
            if claim.metric not in names:
                raise ValueError(f"{self.slug}: claim metric {claim.metric!r} not in metrics {names}")
            for system in claim.systems():
                if system not in self.systems:
                    raise ValueError(f"{self.slug}: claim names unknown system {system!r}")
            self._reject_one_system_under_two_names(claim)
            for profile_name in claim.profiles:
                if profile_name not in self.profiles:
                    raise ValueError(f"{self.slug}: claim names unknown profile {profile_name!r}")
        for name in self.analyses:
            if not name.isidentifier():
                raise ValueError(
                    f"{self.slug}: analysis name {name!r} must be an identifier (it names markers)"
                )
        self._check_floors(names)
        for required in ("smoke", "default"):
            if required not in self.profiles:
                raise ValueError(f"{self.slug}: profile {required!r} is required")
        for profile in self.profiles.values():
            for system in profile.systems or ():
                if system not in self.systems:
                    raise ValueError(f"{self.slug}: profile {profile.name!r} names unknown system {system!r}")

    def _reject_one_system_under_two_names(self, claim: Claim) -> None:
        """A control or contrast built by the very factory of a compared system is that system: it can only
        tie it (issue #43: a control bit-identical to a baseline). Systems that differ only inside ``run``
        are caught from the results instead (a warning on the claim)."""
        pairs = [(control, other) for control in claim.controls for other in (claim.ours, *claim.versus)]
        if claim.contrast is not None:
            pairs.append(claim.contrast)
        for first, second in pairs:
            if first != second and self.systems[first] is self.systems[second]:
                raise ValueError(
                    f"{self.slug}: claim {claim.text!r} compares {first!r} with {second!r}, but both are "
                    "built by the same factory: they are one system under two names"
                )

    def _check_floors(self, names: list[str]) -> None:
        for metric, floor in self.floors.items():
            if metric not in names:
                raise ValueError(f"{self.slug}: floors names unknown metric {metric!r}; metrics: {names}")
            if self.metric(metric).floor is not None:
                raise ValueError(f"{self.slug}: metric {metric!r} has a floor in Metric and in floors")
            if isinstance(floor, str):
                if floor not in self.systems:
                    raise ValueError(f"{self.slug}: floors[{metric!r}] names unknown system {floor!r}")
            elif isinstance(floor, bool) or not isinstance(floor, (int, float)) or not math.isfinite(floor):
                raise TypeError(
                    f"{self.slug}: floors[{metric!r}] must be a finite number or a system name, got {floor!r}"
                )

    def floor_of(self, metric: str) -> float | str | None:
        """The floor of ``metric``: a number, the name of the system that measures it, or None."""
        declared = self.metric(metric).floor
        return declared if declared is not None else self.floors.get(metric)

    def metric(self, name: str) -> Metric:
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(f"{self.slug}: no metric {name!r}; metrics: {[m.name for m in self.metrics]}")

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise ValueError(f"{self.slug}: unknown profile {name!r}; choose one of {sorted(self.profiles)}")
        return self.profiles[name]

    def system_names(self, profile: Profile) -> list[str]:
        return list(profile.systems) if profile.systems else list(self.systems)

    def config_for(self, profile: Profile, point: Mapping[str, Any], overrides: Mapping[str, Any]) -> Any:
        """Default config, then the profile's overrides, then the user's ``--set``, then the grid point.

        Keys may be dotted (``method.pool_factor``) to reach a nested config. A ``--set`` on a key the
        profile's grid sweeps is refused: the grid would overwrite it in every cell, and the run would record
        a value that no cell used.
        """
        swept = sorted(set(overrides) & set(profile.grid))
        if swept:
            grid = ", ".join(f"{key}={list(profile.grid[key])}" for key in swept)
            raise ValueError(
                f"{self.slug}: --set {', '.join(swept)} is swept by profile {profile.name!r}'s grid "
                f"({grid}); choose a profile that does not sweep it, or drop the --set"
            )
        config = self.config_cls()
        config = apply_overrides(config, {**profile.overrides, **overrides})
        return apply_overrides(config, point) if point else config

    def build_system(self, name: str, config: Any) -> Any:
        """The system ``name`` built from ``config`` by its factory."""
        if name not in self.systems:
            raise ValueError(f"{self.slug}: unknown system {name!r}; systems: {list(self.systems)}")
        return self.systems[name](config)

    def run_cell(
        self,
        system: Any,
        config: Any,
        profile: Profile,
        seed: int,
        progress: Progress | None = None,
        context: SetupContext | None = None,
    ) -> Mapping[str, float]:
        """Call ``run`` with the signature the experiment declares: with a setup, ``context`` is passed
        (built afresh when not given, for tests and scripts that run one cell). No progress: silent."""
        progress = progress or SilentProgress()
        if self.setup is None:
            return self.run(system, config, profile, seed, progress)
        if context is None:
            from neurips26.bench.setup import build_context

            context = build_context(self, config, profile, seed)
        return self.run(system, config, context, profile, seed, progress)

    def with_profile(self, name: str, profile: Profile) -> Experiment:
        """A copy with one profile replaced (handy in tests)."""
        return dataclasses.replace(self, profiles={**self.profiles, name: profile})
