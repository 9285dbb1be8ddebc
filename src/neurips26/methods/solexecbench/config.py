"""Configuration of the SOL-ExecBench harness and experiment; each default says where it comes from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from neurips26.core.config import nested, param
from neurips26.core.validation import check_choice, check_in_range, check_positive
from neurips26.methods.solar import FIDELITIES
from neurips26.methods.solexecbench.backends import TIMERS, parse_device
from neurips26.methods.solexecbench.sandbox import ALLOCATORS

MODES = ("solexecbench", "naive", "kernelbench")
EXTRA_RUNGS = ("cpp", "compile")
TIMING_ESTIMATORS = ("median", "paired_ratio")
DEFENCES = ("integrity", "threads", "processes", "mutation", "recheck", "sol_floor")


# The switch that forces how each evaluation's /tmp is privatised, whatever ``private_tmp`` says: "namespace"
# (a private tmpfs per evaluation, or a RUNTIME_ERROR naming the kernel's refusal: never a silent fallback),
# "fallback" (no mount namespace: HOME/TMPDIR in the staging dir and a scan for leftovers) or "auto" (unset:
# the config decides, the namespace when the kernel allows it). CI runs the sandbox tests once each way.
PRIVATE_TMP_SWITCH = "NEURIPS26_SOLEXECBENCH_TMP"
PRIVATE_TMP_POLICIES = ("auto", "namespace", "fallback")


def private_tmp_policy(private_tmp: bool, environ: Mapping[str, str] = os.environ) -> str:
    """The driver's ``private_tmp`` policy: :data:`PRIVATE_TMP_SWITCH` when set, else the config's."""
    forced = environ.get(PRIVATE_TMP_SWITCH, "").strip().lower()
    if forced and forced not in PRIVATE_TMP_POLICIES:
        choices = f"choose one of {PRIVATE_TMP_POLICIES} (or unset it)"
        raise ValueError(f"{PRIVATE_TMP_SWITCH}={forced!r}; {choices}")
    if forced and forced != "auto":
        return forced
    return "auto" if private_tmp else "fallback"


def default_flush_bytes() -> int:
    """Twice the last-level cache of cpu0 from sysfs (64 MiB when sysfs says nothing)."""
    import glob
    from pathlib import Path

    units = {"K": 2**10, "M": 2**20, "G": 2**30}

    best = 0
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index[0-9]*"):
        try:
            if Path(index, "type").read_text().strip() == "Instruction":
                continue
            size = Path(index, "size").read_text().strip()
            best = max(best, int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size))
        except (OSError, ValueError):
            continue
    return 2 * (best or 32 * 2**20)


@dataclass
class SolExecBenchConfig:
    """Harness settings: timing, defences, sandbox limits, scoring (what a user of the harness sets)."""

    mode: str = param("solexecbench", "ours; 'naive' and 'kernelbench' are the baseline harnesses")
    threads: int = param(1, "ours: fixed thread count, the 2-core CI machine is shared")
    correctness_rounds: int = param(3, "upstream uses 10 rounds with fresh inputs; 3 keeps CPU CI fast")
    warmup: int = param(5, "research notes 2.2: warmup 3-10 on GPU; README Timing CV: 5 (was 2)")
    min_reps: int = param(15, "research notes 2.2: adaptive 10-50 timed reps; README Timing CV: 15 (was 5)")
    max_reps: int = param(60, "research notes 2.2: up to 50 on GPU; README Timing CV: 60 (was 20)")
    time_budget_s: float = param(
        0.6, "ours: stop adding reps after this much wall time per workload (was 0.3)"
    )
    flush_bytes: int = param(0, "issue: write 2x LLC before each timed call; 0 = 2x LLC from sysfs")
    timing_estimator: str = param(
        "paired_ratio",
        "README Timing CV: T_b median x median of the i-th T_k/T_b ratios (T_b from the trusted judge, issue"
        " #44); 'median' = upstream's median T_k",
    )
    interleave_block: int = param(
        3,
        "issue #44 (SOL-score CV): T_k and T_b in alternating blocks of this many timed calls, each side in"
        " its own process, the other side stopped (CPU only); 0 = the solution's timing, then the"
        " reference's",
    )
    settle_ms: float = param(
        1.0,
        "issue #44 (SOL-score CV): sleep this long between the cache flush and each timed CPU call, so the"
        " call starts a fresh scheduler slice (both sides; not counted)",
    )
    steady_allocator: bool = param(
        True,
        "issue #44 (SOL-score CV): fixed glibc malloc thresholds, or on jemalloc an arena of the process's"
        " own, in every evaluation process, so a call's temporaries reuse pages instead of faulting on fresh"
        " ones depending on the allocation history (the fork server's, inherited)",
    )
    inputs_off_heap: bool = param(
        True,
        "issue #44 (SOL-score CV): each timed call's CPU inputs and outputs in a mapping of their own (kept"
        " alive on the heap, they pushed the call's temporaries onto fresh pages)",
    )
    off_cpu_filter: bool = param(
        True,
        "issue #44 (SOL-score CV): paired_ratio keeps the pairs whose two calls stayed on the CPU (wall"
        " time within 5% of the thread's CPU time), if at least half do",
    )
    pin_cpu: int = param(-1, "ours: pin the evaluation child to this CPU (-1 = no pinning)")
    recheck_k: int = param(2, "ours: outputs of k random timed iterations re-checked (honest-then-stale)")
    time_reference: bool = param(
        True,
        "upstream times the reference for speedup_factor; ours in the trusted judge process, right after the"
        " solution's, with the same loop and reps (issue #44)",
    )
    timeout_s: float = param(60.0, "ours: wall timeout per (solution, problem) evaluation")
    compile_timeout_s: float = param(300.0, "upstream: compile step separate, its own timeout (120 s GPU)")
    cpu_seconds: int = param(120, "ours: RLIMIT_CPU of the evaluation child")
    address_space_extra_bytes: int = param(4 * 2**30, "ours: RLIMIT_AS headroom above the forked driver")
    file_bytes: int = param(16 * 2**20, "ours: RLIMIT_FSIZE, the log is the only file a child writes")
    max_processes: int = param(
        16, "issue: a process rlimit; RLIMIT_NPROC headroom (tasks: processes and threads) of the child"
    )
    sandbox_uid: int = param(
        65534, "ours: a harness running as root drops the child to this uid (nobody); -1 keeps root"
    )
    network_isolation: bool = param(
        True, "issue: no network; a fresh user+network namespace per child (socket guard if refused)"
    )
    private_tmp: bool = param(
        True,
        "issue #33: each evaluation gets an empty tmpfs on /tmp, /var/tmp, /dev/shm and a private HOME (mount"
        " namespace; the interpreter and sys.path bound back read-only); refused or off: HOME/TMPDIR in the"
        " staging dir and a scan for files left behind. $NEURIPS26_SOLEXECBENCH_TMP=namespace|fallback"
        " forces one",
    )
    static_check: bool = param(True, "research notes 2.2: AST check before staging")
    disabled_defences: str = param(
        "", "ours: comma-separated dynamic defences to switch off (tests, ablations)"
    )
    tolerance_scale: float = param(
        1.0,
        "ours: every workload's error bounds times this (0 = bitwise equality: the over-strict checker the"
        " experiment runs as a negative control for false positives)",
    )
    sol_fidelity: str = param("fused", "ours: SOLAR's fused bound (compulsory bytes and FLOPs) is T_SOL")
    sol_floor_tolerance: float = param(
        0.0, "research notes 2.2: T_k < T_SOL (1 - tol) is REWARD_HACK; added to the spec's measured noise"
    )
    sol_floor_noise: bool = param(
        True,
        "issue #33: widen the SOL floor by the calibration's measured noise band (solar spec"
        " calibration['noise']; 0 for datasheet specs); the tolerance used is in each trace's sol block",
    )
    hardware: str = param("cpu-local", "issue: the host's measured spec from solar.calibrate_cpu_local")
    fast_p: float = param(1.0, "KernelBench fast_p: correct and speedup over the baseline > p")
    isolation: str = param("fork", "ours: fork a clean torch-imported driver per evaluation ('spawn' = new)")
    allocator: str = param(
        "auto",
        "issue #44 (SOL-score CV): the evaluation processes' malloc; 'auto' = jemalloc where installed"
        " (PyTorch's CPU tuning guide), else glibc's",
    )
    seed: int = param(-1, "ours: -1 draws input seeds from os.urandom (no precomputable inputs)")
    device: str = param("cpu", "issue: 'cpu', 'cuda', 'cuda:N' or 'auto' (cuda:0 when CUDA is available)")
    timer: str = param(
        "auto", "upstream: CUPTI kernel spans when cupti-python imports, else CUDA events; 'cpu' on CPU"
    )
    triton_interpreter: bool = param(
        True, "ours: without CUDA, run triton solutions under TRITON_INTERPRET=1 (numerics only)"
    )
    gpu_memory_fraction: float = param(
        0.9, "ours: torch.cuda.set_per_process_memory_fraction in the child (caching allocator only)"
    )

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, MODES)
        check_choice("sol_fidelity", self.sol_fidelity, FIDELITIES)
        check_choice("isolation", self.isolation, ("fork", "spawn"))
        check_choice("allocator", self.allocator, ALLOCATORS)
        check_choice("timing_estimator", self.timing_estimator, TIMING_ESTIMATORS)
        if isinstance(self.pin_cpu, bool) or not isinstance(self.pin_cpu, int) or self.pin_cpu < -1:
            raise ValueError(f"pin_cpu must be a CPU index >= 0 or -1 (no pinning), got {self.pin_cpu!r}")
        for name in (
            "threads",
            "correctness_rounds",
            "warmup",
            "min_reps",
            "max_reps",
            "cpu_seconds",
            "max_processes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.max_reps < self.min_reps:
            raise ValueError(f"max_reps ({self.max_reps}) must be >= min_reps ({self.min_reps})")
        for name in (
            "recheck_k",
            "interleave_block",
            "flush_bytes",
            "address_space_extra_bytes",
            "file_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if (
            isinstance(self.sandbox_uid, bool)
            or not isinstance(self.sandbox_uid, int)
            or self.sandbox_uid < -1
        ):
            raise ValueError(
                f"sandbox_uid must be a uid >= 0 or -1 (keep the harness's uid), got {self.sandbox_uid!r}"
            )
        check_positive("tolerance_scale", self.tolerance_scale, allow_zero=True)
        check_positive("settle_ms", self.settle_ms, allow_zero=True)
        for name in ("steady_allocator", "inputs_off_heap", "off_cpu_filter"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name in ("time_budget_s", "timeout_s", "fast_p", "compile_timeout_s"):
            check_positive(name, getattr(self, name), allow_zero=name == "fast_p")
        unknown = sorted(self._disabled() - set(DEFENCES))
        if unknown:
            raise ValueError(f"disabled_defences names unknown defences {unknown}; allowed: {list(DEFENCES)}")
        check_in_range("sol_floor_tolerance", self.sol_floor_tolerance, 0.0, 1.0)
        check_in_range("gpu_memory_fraction", self.gpu_memory_fraction, 0.0, 1.0)
        parse_device(self.device)
        check_choice("timer", self.timer, TIMERS)

    def _disabled(self) -> set[str]:
        return {name.strip() for name in self.disabled_defences.split(",") if name.strip()}

    def defence_on(self, name: str) -> bool:
        return self.mode == "solexecbench" and name not in self._disabled()

    def driver_settings(self) -> dict:
        """The JSON settings block the sandboxed driver reads."""
        return {
            "mode": self.mode,
            "threads": self.threads,
            "correctness_rounds": self.correctness_rounds,
            "warmup": self.warmup,
            "min_reps": self.min_reps,
            "max_reps": self.max_reps,
            "time_budget_s": self.time_budget_s,
            "flush_bytes": self.flush_bytes or default_flush_bytes(),
            "recheck_k": self.recheck_k,
            "tolerance_scale": self.tolerance_scale,
            "timing_estimator": self.timing_estimator,
            "pin_cpu": self.pin_cpu,
            "interleave_block": self.interleave_block,
            "settle_ms": self.settle_ms,
            "steady_allocator": self.steady_allocator,
            "inputs_off_heap": self.inputs_off_heap,
            "off_cpu_filter": self.off_cpu_filter,
            "time_reference": self.time_reference,
            "timeout_s": self.timeout_s,
            "seed": None if self.seed < 0 else self.seed,
            "defences": {name: name not in self._disabled() for name in DEFENCES},
            "limits": {
                "cpu_seconds": self.cpu_seconds,
                "address_space_extra_bytes": self.address_space_extra_bytes,
                "file_bytes": self.file_bytes,
                "max_processes": self.max_processes,
                "network_namespace": self.network_isolation,
                "private_tmp": private_tmp_policy(self.private_tmp),
                "sandbox_uid": self.sandbox_uid,
            },
        }


@dataclass
class SolExecBenchExperimentConfig:
    """The experiment: the harness settings (``method``) and which problems, rungs and cheats it runs."""

    method: SolExecBenchConfig = nested(SolExecBenchConfig, "the harness defaults (SolExecBenchConfig)")
    problems: str = param(
        "default", "ours: 'smoke' (2), 'default' (12, every op family) or 'all' (32) problems"
    )
    max_workloads: int = param(0, "ours: evaluate only the first n workloads of each problem (0 = all)")
    repeats: int = param(2, "issue: run-to-run CV of per-problem SOL score needs >= 2 repeated evaluations")
    red_team: bool = param(True, "ours: evaluate the red-team suite (off: ladder only)")
    red_team_problems: int = param(0, "ours: run the red team on the first n problems only (0 = all)")
    extra_rungs: str = param(
        "",
        "issue: ladder rungs 'cpp' (C++ extension, 3 problems) and 'compile' (torch.compile, 5 problems),"
        " comma-separated; opt-in: each C++ build or inductor compile takes 30-100 s on this CPU",
    )
    compile_file_bytes: int = param(2**30, "ours: RLIMIT_FSIZE for the compile rung (inductor's g++ output)")

    def __post_init__(self) -> None:
        check_choice("problems", self.problems, ("smoke", "default", "all"))
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1:
            raise ValueError(f"repeats must be a positive integer, got {self.repeats!r}")
        for name in ("max_workloads", "red_team_problems", "compile_file_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        unknown = sorted(set(self.extra_rung_list()) - set(EXTRA_RUNGS))
        if unknown:
            raise ValueError(
                f"extra_rungs={self.extra_rungs!r}; allowed: comma-separated {list(EXTRA_RUNGS)}"
            )

    def extra_rung_list(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.extra_rungs.split(",") if name.strip())
