"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the suite experiment.

For every authored program: count MACs/FLOPs, derive a bound for the calibrated ``cpu-local`` spec, time the
program with cold and warm caches, and compare. The grid variable ``suite`` runs the 36 PyTorch programs
(timed eagerly) and the 6 JAX programs (timed under ``jax.jit``). Systems: ours (``solar``: the cache-aware
bound, the tightest of its lower bounds) on both suites; on PyTorch FlopCounterMode on CPU and on meta, fvcore
(FLOP-only rooflines) and a naive per-op roofline; on JAX XLA's ``cost_analysis`` and
``jax.experimental.roofline`` (rooflines from their FLOPs and bytes). A baseline outside its framework is
``n/a``. Claims: exact counts, full coverage, zero cold-cache violations, tighter valid bounds.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, NotApplicable, Profile, Progress
from neurips26.bench.setup import Setup, SetupContext
from neurips26.methods.solar.baselines import (
    JaxCount,
    flop_counter_flops,
    fvcore_flops,
    jax_roofline,
    naive_roofline_seconds,
    xla_cost_analysis,
)
from neurips26.methods.solar.config import SOLARConfig
from neurips26.methods.solar.core import analyze
from neurips26.methods.solar.hardware import HardwareSpec, calibrate
from neurips26.methods.solar.suite import PROGRAMS, get_program
from neurips26.methods.solar.timing import Timing, time_programs

# the framework of each suite's programs (a baseline of another framework is n/a there)
FRAMEWORKS = {"torch": "torch", "jax": "jax", "real_lm": "torch"}

# XLA's CPU backend runs its own thread pool; the cpu-local spec is calibrated for `threads` = 1
_XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


@dataclass(frozen=True)
class Program:
    """One suite program of either framework: ``build()`` gives the callable and its example inputs."""

    name: str
    framework: str
    hand_macs: int
    build: Callable[[], tuple[Any, list[Any]]]
    # the program's shapes without its weights (the real LMs: built on meta); None: analyse build()'s
    build_meta: Callable[[], tuple[Any, list[Any]]] | None = None


def _real_lm_suite(config: SOLARConfig) -> list[Program]:
    """The real LMs at each sequence length: analysed on meta from their config, timed with their weights."""
    from neurips26.methods.solar import real_lm

    def program(name: str, tokens: int) -> Program:
        return Program(
            f"{name}@{tokens}",
            "torch",
            real_lm.decoder_macs(name, tokens),
            lambda: (real_lm.Forward(real_lm.real_model(name)), [real_lm.meta_ids(tokens, "cpu")]),
            lambda: (real_lm.meta_model(name), [real_lm.meta_ids(tokens)]),
        )

    return [program(name, tokens) for name in config.real_models for tokens in config.real_tokens]


def _torch_program(program: Any) -> Program:
    return Program(program.name, "torch", program.hand_macs, lambda: program.build("cpu"))


def _jax_suite() -> list[Program]:
    if "jax" not in sys.modules:
        os.environ.setdefault("XLA_FLAGS", _XLA_ONE_THREAD)
    from neurips26.methods.solar.suite.jax_programs import programs

    return [
        Program(e["name"], "jax", int(e["macs"]), lambda e=e: (e["fn"], e["inputs"]())) for e in programs()
    ]


def cpu_spec(config: SOLARConfig) -> HardwareSpec:
    """``cpu-local`` calibrated (:func:`~neurips26.methods.solar.hardware.calibrate`:
    ``method.calibration_trials`` trials, the maximum kept, times ``method.headroom``) for the config's
    threads; the experiment calibrates it once per worker (setup stage ``spec``) and the spec's numbers and
    noise go into every cell's metrics."""
    torch.set_num_threads(config.threads)
    return calibrate(
        trials=config.method.calibration_trials, factor=config.method.headroom, copy_bytes=128 * 2**20
    )


@dataclass
class Estimate:
    flops: int
    bound: float
    fidelities: dict[str, float]
    validated: bool
    seconds: float
    gaps: list[str] = field(default_factory=list)
    conventional_flops: int | None = None  # ours: padded taps and masked attention included


class _Readable:
    """``neurips26 info`` prints systems: show their settings (the spec by name), not an address.

    A system is built without a spec (``hw=None``); :meth:`on` gives the copy that bounds on the run's
    calibrated spec."""

    hw: HardwareSpec | None

    def on(self, hw: HardwareSpec) -> Any:
        """A copy of this system that bounds on ``hw``."""
        bound = copy.copy(self)
        bound.hw = hw
        return bound

    def __repr__(self) -> str:
        shown = {
            k: v.name if isinstance(v, HardwareSpec) else v for k, v in vars(self).items() if not callable(v)
        }
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class SOLARSystem(_Readable):
    """Ours: ``analyze`` (PyTorch programs on meta through ``torch.export``, JAX through its jaxpr); the
    reported bound is ``cache_aware``, times ``scale`` (1 for ours; > 1 for the overclaiming control).

    ``loop_trips=False`` counts each JAX loop body once (the loop-blind control)."""

    def __init__(
        self,
        hw: HardwareSpec | None,
        validate: bool = True,
        *,
        name: str = "solar",
        scale: float = 1.0,
        loop_trips: bool = True,
        frameworks: tuple[str, ...] = ("torch", "jax"),
    ) -> None:
        self.hw, self.validate, self.name = hw, validate, name
        self.scale, self.loop_trips, self.frameworks = scale, loop_trips, frameworks

    def estimate(self, program: Program) -> Estimate:
        fn, inputs = (program.build_meta or program.build)()
        start = time.perf_counter()
        # export first, as the published results were made (the default dispatch path has the same MACs
        # and lower bounds on the suite; its unfused model differs on 8 programs)
        report = analyze(
            fn, inputs, hw=self.hw, validate=self.validate, loop_trips=self.loop_trips, frontend="auto"
        )
        seconds = time.perf_counter() - start
        fid = {k: self.scale * report.bound(k) for k in ("flop_only", "fused", "cache_aware")}
        gaps = [f"{op} x{n} unknown" for op, n in report.unknown_ops.items()]
        return Estimate(
            report.flops,
            self.scale * report.bounds.cache_aware,
            fid,
            report.validated and report.complete,
            seconds,
            gaps + (["trip-unknown"] if "trip-unknown" in report.frontend else []),
            report.flops_conventional,
        )


class FlopOnlySystem(_Readable):
    """A library FLOP counter (FlopCounterMode or fvcore, adapters); bound = FLOPs / fp32 peak."""

    frameworks = ("torch",)

    def __init__(
        self, name: str, count_flops: Callable[[Any, Any], int], hw: HardwareSpec | None = None
    ) -> None:
        self.name = name
        self.count_flops = count_flops
        self.hw = hw

    def estimate(self, program: Program) -> Estimate:
        model, inputs = program.build()
        start = time.perf_counter()
        flops = self.count_flops(model, inputs)
        seconds = time.perf_counter() - start
        bound = flops / self.hw.flops_rate("float32")
        return Estimate(
            flops, bound, dict.fromkeys(("flop_only", "fused", "cache_aware"), bound), False, seconds
        )


class NaiveRooflineSystem(_Readable):
    """Per-op unfused roofline (re-implemented, LLM-Viewer/RuntimeEstimator style)."""

    name = "naive_roofline"
    frameworks = ("torch",)

    def __init__(self, hw: HardwareSpec | None = None) -> None:
        self.hw = hw

    def estimate(self, program: Program) -> Estimate:
        model, inputs = program.build()
        start = time.perf_counter()
        bound, flops = naive_roofline_seconds(model, inputs, self.hw)
        seconds = time.perf_counter() - start
        return Estimate(
            flops, bound, dict.fromkeys(("flop_only", "fused", "cache_aware"), bound), False, seconds
        )


class JaxRooflineSystem(_Readable):
    """A JAX library's roofline (XLA ``cost_analysis`` or ``jax.experimental.roofline``, adapters):
    ``flop_only = FLOPs / fp32 peak``, bound ``= max(FLOPs / peak, bytes / BW)`` from its own counts."""

    frameworks = ("jax",)

    def __init__(
        self,
        name: str,
        count: Callable[[Any, Any], JaxCount],
        hw: HardwareSpec | None,
        requires: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.name = name
        self.count = count
        self.hw = hw
        self.requires = requires  # (module, install hint): a missing one makes the cells n/a, not errors

    def estimate(self, program: Program) -> Estimate:
        fn, inputs = program.build()
        start = time.perf_counter()
        counted = self.count(fn, inputs)
        seconds = time.perf_counter() - start
        compute = counted.flops / self.hw.flops_rate("float32")
        bound = max(compute, counted.bytes / self.hw.dram_bandwidth_Bps)
        fid = {"flop_only": compute, "fused": bound, "cache_aware": bound}
        return Estimate(int(counted.flops), bound, fid, False, seconds, counted.gaps)


def _programs(config: SOLARConfig) -> list[Program]:
    if config.suite == "real_lm":
        return _real_lm_suite(config)
    if config.suite == "jax":
        suite = _jax_suite()
        return [p for p in suite if p.name in config.jax_programs] if config.jax_programs else suite
    chosen = [get_program(n) for n in config.programs] if config.programs else list(PROGRAMS)
    return [_torch_program(p) for p in chosen]


def evaluate(
    system: Any, config: SOLARConfig, progress: Progress, timings: dict[str, Timing] | None = None
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Per-program rows and the suite metrics for one system (bound to a spec, :meth:`_Readable.on`) on
    ``config.suite``, against ``timings`` (program name -> :class:`Timing`; measured here when not given)."""
    if FRAMEWORKS[config.suite] not in system.frameworks:
        raise NotApplicable(f"{system.name} analyses {'/'.join(system.frameworks)} programs only")
    for module, hint in getattr(system, "requires", ()) + (
        (("jax", "pip install jax"),) if config.suite == "jax" else ()
    ):
        if importlib.util.find_spec(module) is None:
            raise NotApplicable(f"{system.name} on {config.suite} programs needs {module}: {hint}")
    if system.hw is None:
        raise ValueError(f"{system.name} has no hardware spec: evaluate system.on(cpu_spec(config))")
    timings = time_programs(_programs(config), config) if timings is None else timings
    torch.set_num_threads(config.threads)
    hw = system.hw
    rows = []
    for program in progress.loop(_programs(config), desc=system.name):
        est = system.estimate(program)
        timing = timings[program.name]
        cold, band, warm = timing.cold, timing.band, timing.warm
        noise = band + hw.noise  # the timing's own spread plus the spec's calibration spread
        rows.append(
            {
                "program": program.name,
                "flops": est.flops,
                "conventional_flops": est.flops if est.conventional_flops is None else est.conventional_flops,
                "hand_flops": 2 * program.hand_macs,
                "bound": est.bound,
                "cold": cold,
                "warm": warm,
                "noise": noise,
                # as measured: the median cold time is below the bound
                "violated_raw": cold < est.bound,
                # counted: below the bound by more than the noise band
                "violated": cold * (1.0 + noise) < est.bound,
                "validated": est.validated,
                "seconds": est.seconds,
                "gaps": est.gaps,
                **{f"ratio_{k}": v / cold for k, v in est.fidelities.items()},
            }
        )
    return suite_metrics(rows, hw), rows


def suite_metrics(rows: list[dict[str, Any]], hw: HardwareSpec) -> dict[str, float]:
    """The suite metrics from per-program rows (see :func:`evaluate`) and the spec they were bounded on."""
    ratios = [r["bound"] / r["cold"] for r in rows]
    metrics = {
        "count_agreement": sum(r["flops"] == r["hand_flops"] for r in rows) / len(rows),
        "coverage": sum(r["flops"] >= r["hand_flops"] for r in rows) / len(rows),
        "validated_fraction": sum(r["validated"] for r in rows) / len(rows),
        "violations": float(sum(r["violated"] for r in rows)),
        "violations_raw": float(sum(r["violated_raw"] for r in rows)),
        "valid_fraction": sum(not r["violated"] for r in rows) / len(rows),
        "violations_warm": float(sum(r["warm"] < r["bound"] for r in rows)),
        "median_bound_over_measured": statistics.median(ratios),
        # a violated bound is never tighter: it counts 0; a bound inside the noise band counts at most 1
        "median_valid_tightness": statistics.median(
            0.0 if r["violated"] else min(1.0, r["bound"] / r["cold"]) for r in rows
        ),
        "median_noise_band": statistics.median(r["noise"] for r in rows),
        "spec_fp32_gflops": hw.flops_rate("float32") / 1e9,
        "spec_bandwidth_gbps": hw.dram_bandwidth_Bps / 1e9,
        "spec_noise": hw.noise,
        "spec_load_average": float(hw.calibration.get("load_average", float("nan"))),
        "max_bound_over_measured": max(ratios),
        "median_ratio_flop_only": statistics.median(r["ratio_flop_only"] for r in rows),
        "median_ratio_fused": statistics.median(r["ratio_fused"] for r in rows),
        "median_ratio_cache_aware": statistics.median(r["ratio_cache_aware"] for r in rows),
        "analysis_seconds": sum(r["seconds"] for r in rows),
    }
    return metrics


def _suite_timings(config: SOLARConfig, profile: Profile, seed: int, context: SetupContext) -> Any:
    """The suite timed cold and warm once per seed: every system of a seed is compared with the same
    measurement (paired), each seed measures afresh (None when the suite's framework is missing: n/a)."""
    if config.suite == "jax" and importlib.util.find_spec("jax") is None:
        return None
    return time_programs(_programs(config), config)


def _timings_key(config: SOLARConfig, profile: Profile, seed: int) -> tuple[Any, ...]:
    programs = (config.suite, tuple(config.programs), tuple(config.jax_programs))
    programs += (tuple(config.real_models), tuple(config.real_tokens))
    return (*programs, config.reps, config.warmup, config.flush_factor, config.threads, seed)


SETUP = (
    Setup(
        "spec",
        build=lambda config, profile, seed, context: cpu_spec(config),
        key=lambda c, profile, seed: (c.method.headroom, c.threads, c.method.calibration_trials),
    ),
    Setup("timings", build=_suite_timings, key=_timings_key),
)


def run(
    system: Any,
    config: SOLARConfig,
    context: SetupContext,
    profile: Profile,
    seed: int,
    progress: Progress,
) -> dict[str, float]:
    torch.manual_seed(seed)
    metrics, rows = evaluate(system.on(context.spec), config, progress, context.timings)
    if config.suite == "real_lm":  # the few real-LM rows are the result: the bound beside each forward
        return {**metrics, "details": {"rows": [_real_row(row) for row in rows]}}
    return metrics


def _real_row(row: dict[str, Any]) -> dict[str, Any]:
    """A real-LM row as stored: the bound beside the measured forward (ms) and whether it holds."""
    return {
        "program": row["program"],
        "gflop": round(row["flops"] / 1e9, 3),
        "counted_as_closed_form": row["flops"] == row["hand_flops"],
        "bound_ms": round(row["bound"] * 1e3, 3),
        "cold_ms": round(row["cold"] * 1e3, 3),
        "warm_ms": round(row["warm"] * 1e3, 3),
        "bound_over_cold": round(row["bound"] / row["cold"], 4),
        "holds": not row["violated_raw"],
        "analysis_s": round(row["seconds"], 2),
    }


SYSTEMS: dict[str, Callable[[SOLARConfig], Any]] = {
    # every system bounds on the spec calibrated for the config (setup stage ``spec``: once per worker)
    "solar": lambda c: SOLARSystem(None, c.method.validate),
    "flopcounter_cpu": lambda c: FlopOnlySystem(
        "flopcounter_cpu", lambda model, inputs: flop_counter_flops(model, inputs, "cpu")
    ),
    "flopcounter_meta": lambda c: FlopOnlySystem(
        "flopcounter_meta", lambda model, inputs: flop_counter_flops(model, inputs, "meta")
    ),
    "fvcore": lambda c: FlopOnlySystem("fvcore", fvcore_flops),
    "naive_roofline": lambda c: NaiveRooflineSystem(),
    "xla_cost_analysis": lambda c: JaxRooflineSystem("xla_cost_analysis", xla_cost_analysis, None),
    "jax_roofline": lambda c: JaxRooflineSystem(
        "jax_roofline",
        jax_roofline,
        None,
        (("absl", "jax.experimental.roofline imports absl: pip install absl-py"),),
    ),
    # negative controls. A bound that claims control_overclaim (100) x ours must be caught as violated (so the
    # validity claims could fail) and never count as tighter; the same bound without validation (it does
    # not change the bound) keeps the control cheap.
    "overclaimed_bound": lambda c: SOLARSystem(
        None, False, name="overclaimed_bound", scale=c.control_overclaim
    ),
    # our own jaxpr walker with every loop body counted once: must not cover the JAX programs' MACs
    "loop_blind_jaxpr": lambda c: SOLARSystem(
        None, False, name="loop_blind_jaxpr", loop_trips=False, frameworks=("jax",)
    ),
}

SMOKE_PROGRAMS = (
    "gemm_square",
    "conv2d_padded",
    "softmax",
    "add",
    "sdpa_causal",
    "swiglu_mlp",
    "rmsnorm",
    "tiny_gpt",
)

SMOKE_JAX_PROGRAMS = ("jax_mlp", "jax_scan_rnn", "jax_while_solver")
TORCH_FLOP_COUNTERS = ("flopcounter_cpu", "flopcounter_meta", "fvcore")
JAX_BASELINES = ("xla_cost_analysis", "jax_roofline")

# Each baseline runs on one framework's programs (n/a elsewhere), so each claim is made on its suite only.
TORCH_SUITE = {"suite": ("torch",)}
JAX_SUITE = {"suite": ("jax",)}
# Measured against wall-clock times (cold-cache validity, tightness, spec): left out by `report --compare`
_TIMING_METRICS = frozenset(
    {"violations", "violations_raw", "valid_fraction", "violations_warm", "median_bound_over_measured"}
    | {"median_valid_tightness", "median_noise_band", "max_bound_over_measured", "analysis_seconds"}
    | {"spec_fp32_gflops", "spec_bandwidth_gbps", "spec_noise", "spec_load_average"}
    | {"median_ratio_flop_only", "median_ratio_fused", "median_ratio_cache_aware"}
)


def _marked_timing(*metrics: Metric) -> tuple[Metric, ...]:
    return tuple(dataclasses.replace(m, timing=m.name in _TIMING_METRICS) for m in metrics)


# Positive contrasts (issue #48). Counts: an exact counter (ours with an overclaimed bound: same counts)
# vs fvcore, which skips attention; JAX coverage: the same vs XLA's cost analysis, which counts loop bodies
# once. Validity and tightness: a per-op roofline vs a bound scaled past the hardware by construction.
COUNT_CONTRAST = ("overclaimed_bound", "fvcore")
JAX_COUNT_CONTRAST = ("overclaimed_bound", "xla_cost_analysis")
BOUND_CONTRAST = ("naive_roofline", "overclaimed_bound")
JAX_BOUND_CONTRAST = ("jax_roofline", "overclaimed_bound")

EXPERIMENT = Experiment(
    slug="solar",
    config_cls=SOLARConfig,
    claims=(
        Claim(
            "Counts match hand formulas (exact domains) on every program; FlopCounterMode and fvcore miss "
            "CPU attention, causal triangles and padded taps",
            "count_agreement",
            "solar",
            TORCH_FLOP_COUNTERS,
            controls=("naive_roofline",),  # per-op counts through the dispatcher: must not be exact
            contrast=COUNT_CONTRAST,
            where=TORCH_SUITE,
        ),
        Claim(
            "Our bounds hold on every program under cold-cache timing (valid fraction no worse than any "
            "baseline's, within 1%; a violation counts when the median is below the bound by more than the "
            "noise band of repeated identical runs plus the spec's calibration noise; raw counts reported)",
            "valid_fraction",
            "solar",
            ("naive_roofline", "flopcounter_meta"),
            kind="noninferior",
            margin=0.01,
            margin_source="ours: one program in a hundred",
            controls=("overclaimed_bound",),
            contrast=BOUND_CONTRAST,
            where=TORCH_SUITE,
        ),
        Claim(
            "Our valid bounds are tighter than FLOP-only rooflines and the naive per-op roofline (median "
            "bound / cold time, a violated bound counting 0)",
            "median_valid_tightness",
            "solar",
            (*TORCH_FLOP_COUNTERS, "naive_roofline"),
            controls=("overclaimed_bound",),
            contrast=BOUND_CONTRAST,
            where=TORCH_SUITE,
        ),
        Claim(
            "JAX: every MAC is counted (loops by their trips, while loops and convolutions included); XLA "
            "cost_analysis and jax.experimental.roofline undercount loop bodies",
            "coverage",
            "solar",
            JAX_BASELINES,
            controls=("loop_blind_jaxpr",),
            contrast=JAX_COUNT_CONTRAST,
            where=JAX_SUITE,
        ),
        Claim(
            "JAX: our bounds hold under cold-cache jax.jit timing (valid fraction no worse than the JAX "
            "libraries' rooflines, within 1%)",
            "valid_fraction",
            "solar",
            JAX_BASELINES,
            kind="noninferior",
            margin=0.01,
            margin_source="ours: one program in a hundred",
            controls=("overclaimed_bound",),
            contrast=JAX_BOUND_CONTRAST,
            where=JAX_SUITE,
        ),
    ),
    metrics=_marked_timing(
        Metric("count_agreement", "max", "fraction", "programs whose FLOPs equal 2 x the hand MAC formula"),
        Metric("coverage", "max", "fraction", "programs whose FLOPs are >= 2 x hand MACs (nothing missed)"),
        Metric("validated_fraction", "max", "fraction", "programs with a validated, complete lowering"),
        Metric(
            "violations",
            "min",
            "programs",
            "cold-cache median below the bound by more than the noise band (timing IQR/median + spec noise)",
        ),
        Metric("violations_raw", "min", "programs", "cold-cache median time below the bound, as measured"),
        Metric("valid_fraction", "max", "fraction", "programs whose bound is not violated (noise band)"),
        Metric("violations_warm", "min", "programs", "warm-cache median time below the bound (expected > 0)"),
        Metric("median_bound_over_measured", "max", "ratio", "tightness; <= 1 for a valid bound"),
        Metric(
            "median_valid_tightness",
            "max",
            "ratio",
            "median of bound / cold time, a violated bound counting 0 and a bound within the band at most 1",
        ),
        Metric("median_noise_band", "min", "ratio", "median noise band (timing IQR/median + spec noise)"),
        Metric("spec_fp32_gflops", "min", "GFLOP/s", "the cpu-local spec this cell used: fp32 peak"),
        Metric("spec_bandwidth_gbps", "min", "GB/s", "the cpu-local spec this cell used: DRAM bandwidth"),
        Metric("spec_noise", "min", "ratio", "the spec's calibration noise (relative spread of its trials)"),
        Metric("spec_load_average", "min", "load", "1-min load average during the spec's calibration"),
        Metric("max_bound_over_measured", "min", "ratio", "> 1 means some program violates the bound"),
        Metric("median_ratio_flop_only", "max", "ratio", "FLOP-only fidelity bound / cold time"),
        Metric("median_ratio_fused", "max", "ratio", "fused fidelity bound / cold time"),
        Metric("median_ratio_cache_aware", "max", "ratio", "cache-aware fidelity bound / cold time"),
        Metric("analysis_seconds", "min", "s", "analysis wall time summed over the suite"),
    ),
    systems=SYSTEMS,
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=60,
            seeds=2,
            overrides={"programs": SMOKE_PROGRAMS, "jax_programs": SMOKE_JAX_PROGRAMS, "reps": 3},
            grid={"suite": ("torch", "jax")},
        ),
        # >= 5 seeds wherever a verdict is drawn (issue #19); measured 223 s wall, one worker, 9 systems
        "default": Profile(
            "default", budget_s=225, seeds=5, overrides={"reps": 7}, grid={"suite": ("torch", "jax")}
        ),
        "full": Profile(
            "full", budget_s=900, seeds=5, overrides={"reps": 15}, grid={"suite": ("torch", "jax")}
        ),
        # issue #45 item 5: Gemma 3 270M and Qwen2.5-Coder-0.5B, bound on meta beside a measured forward of
        # the real weights (`neurips26 zoo fetch-real NAME` first); no claim: the verdict is the violations
        # metric (bound <= measured); its measured wall time is in the README (load-dependent)
        "real": Profile(
            "real",
            budget_s=600,
            seeds=1,
            overrides={"reps": 3, "real_tokens": (16, 64)},
            grid={"suite": ("real_lm",)},
            systems=("solar",),
        ),
    },
    run=run,
    setup=SETUP,
    ours="solar",
)
