"""The catalogue of the 19 methods: import strings only, so ``neurips26 list`` never imports torch.

Adding a method: ``neurips26 new <slug>`` writes its folder and appends its line here (the list stays
written by hand: title, family and claim are data, and listing must import nothing); then fill in
``experiment=``, ``default_budget_s=`` and the rest (``src/neurips26/methods/README.md``).
A spec without ``experiment`` is *planned*: listed honestly, never faked.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

Status = Literal["ready", "planned", "unavailable"]


@cache
def extra_requirements() -> dict[str, tuple[str, ...]]:
    """Extra -> the distributions it installs on this platform, read from pyproject (one declaration).

    The installed package's metadata is read first; a source tree run without installing (``PYTHONPATH``)
    reads ``pyproject.toml`` beside it. Self-references (``all``'s ``neurips26[...]``) are skipped.
    """
    from packaging.requirements import Requirement

    extras, requirements = _declared_requirements()
    found: dict[str, list[str]] = {extra: [] for extra in extras}
    for text in requirements:
        requirement = Requirement(text)
        if _canonical(requirement.name) == "neurips26" or requirement.marker is None:
            continue
        for extra in extras:
            if requirement.marker.evaluate({"extra": extra}):
                found[extra].append(_canonical(requirement.name))
    return {extra: tuple(dict.fromkeys(names)) for extra, names in found.items()}


def _declared_requirements() -> tuple[list[str], list[str]]:
    """(extra names, requirement strings with their markers) of this package."""
    import importlib.metadata
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():  # a source tree: its pyproject is the truth even when an older install exists
        import tomllib

        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        optional = project.get("optional-dependencies", {})
        texts = [_with_extra(req, extra) for extra, reqs in optional.items() for req in reqs]
        return list(optional), texts
    metadata = importlib.metadata.metadata("neurips26")
    return metadata.get_all("Provides-Extra") or [], importlib.metadata.requires("neurips26") or []


def _with_extra(requirement: str, extra: str) -> str:
    """A pyproject requirement as the wheel's metadata writes it: its own marker and-ed with the extra."""
    spec, _, marker = requirement.partition(";")
    condition = f"extra == {extra!r}"
    return f"{spec}; ({marker.strip()}) and {condition}" if marker.strip() else f"{spec}; {condition}"


def _canonical(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def installed_distributions() -> frozenset[str]:
    """Canonical names of the distributions installed in this environment (one scan)."""
    import importlib.metadata

    return frozenset(_canonical(d.metadata["Name"]) for d in importlib.metadata.distributions())


def missing_distributions(extra: str) -> list[str]:
    """The distributions of ``extra`` not installed here (an unknown extra is an error)."""
    requirements = extra_requirements()
    if extra not in requirements:
        raise KeyError(f"unknown extra {extra!r}; pyproject declares {sorted(requirements)}")
    return [name for name in requirements[extra] if name not in installed_distributions()]


@dataclass(frozen=True)
class MethodSpec:
    """One paper: where its code lives (as import strings), its family, extras and claim."""

    slug: str
    title: str
    family: str
    api: str
    claim: str
    extras: tuple[str, ...] = ()
    experiment: str | None = None  # "module:ATTRIBUTE"; None while the method is planned
    # The experiment's ``default`` profile ``budget_s`` (seconds, one worker), copied here so that
    # `neurips26 list` adds up run times without importing 19 experiments (40 s and torch);
    # tests/test_package.py checks each copy against its experiment.
    default_budget_s: float | None = None

    def __post_init__(self) -> None:
        if self.experiment is not None and not (self.default_budget_s or 0) > 0:
            raise ValueError(
                f"method {self.slug!r}: default_budget_s must be > 0 (its default profile's budget_s), "
                f"got {self.default_budget_s!r}"
            )

    def missing_extras(self) -> list[str]:
        return [extra for extra in self.extras if missing_distributions(extra)]

    @property
    def status(self) -> Status:
        if self.experiment is None:
            return "planned"
        return "unavailable" if self.missing_extras() else "ready"

    def status_text(self) -> str:
        missing = self.missing_extras()
        if self.experiment is not None and missing:
            return f"unavailable: pip install 'neurips26[{','.join(missing)}]'"
        return self.status

    def load_experiment(self) -> Any:
        """Import and return the method's ``Experiment`` (raises a clear error if not runnable)."""
        if self.experiment is None:
            raise LookupError(f"method {self.slug!r} is planned, not built yet")
        missing = self.missing_extras()
        if missing:
            raise LookupError(
                f"method {self.slug!r} needs extras {missing}: pip install 'neurips26[{','.join(missing)}]'"
            )
        module_name, _, attribute = self.experiment.partition(":")
        return getattr(importlib.import_module(module_name), attribute or "EXPERIMENT")


_M = MethodSpec
METHODS: tuple[MethodSpec, ...] = (
    _M(
        "styleroute",
        "Region routing for diffusion style transfer",
        "vision",
        "pipeline hook",
        "Routing structure- vs style-dominant regions improves the content/style trade-off.",
        extras=("diffusion",),
        experiment="neurips26.methods.styleroute.experiment:EXPERIMENT",
        default_budget_s=90,
    ),
    _M(
        "dacs",
        "DACS: dual alignment for covariate shift in graph domain adaptation",
        "graph",
        "PyG trainer",
        "Aligning both feature shift (before message passing) and feature-conditional structure shift "
        "(in propagation) beats single-stage graph domain adaptation under coupled shift.",
        extras=("graph",),
        experiment="neurips26.methods.dacs.experiment:EXPERIMENT",
        default_budget_s=291,
    ),
    _M(
        "sast",
        "Self-training CLIP with reliability-aware pseudo-labels",
        "vision",
        "trainer",
        "Reliability-aware pseudo-labels make CLIP self-training robust.",
        extras=("clip",),
        experiment="neurips26.methods.sast.experiment:EXPERIMENT",
        default_budget_s=200,
    ),
    _M(
        "spectralkv",
        "SpectralKV: entropy-guided budgets and spectral coresets for KV caches",
        "llm",
        "kvpress press",
        "Entropy-guided layer budgets plus spectral coresets beat KV-cache baselines at equal budget.",
        extras=("llm",),
        experiment="neurips26.methods.spectralkv.experiment:EXPERIMENT",
        default_budget_s=350,
    ),
    _M(
        "sprepe",
        "SpRePE: spherical reflection position embedding",
        "vision",
        "nn.Module",
        "Householder-reflection position encoding beats other PEs for attention on the sphere.",
        extras=("vision",),
        experiment="neurips26.methods.sprepe.experiment:EXPERIMENT",
        default_budget_s=330,
    ),
    _M(
        "sad",
        "SAD: decomposition-based programming by example",
        "code",
        "synthesizer",
        "Learning subtask decomposition scales programming-by-example.",
        experiment="neurips26.methods.sad.experiment:EXPERIMENT",
        default_budget_s=270,
    ),
    _M(
        "snapmla",
        "SnapMLA: FP8 MLA decoding with RoPE-aware per-token KV quantization",
        "llm",
        "cache + attention",
        "Per-token FP8 latent cache with BF16 RoPE keeps MLA accuracy at FP8 cost.",
        extras=("llm",),
        experiment="neurips26.methods.snapmla.experiment:EXPERIMENT",
        default_budget_s=270,
    ),
    _M(
        "semfas",
        "SEM-FAS: single-pass evidence measurement for multimodal face anti-spoofing",
        "vision",
        "nn.Module",
        "Complex modality states, a density matrix and a constrained POVM head give lower HTER and "
        "exact per-modality attributions with three sampling-free uncertainties.",
        extras=("fas",),
        experiment="neurips26.methods.semfas.experiment:EXPERIMENT",
        default_budget_s=180,
    ),
    _M(
        "samhybrid",
        "Sharpness-aware hybrid model learning for architecture-agnostic parameter estimation",
        "sciml",
        "torch.optim.Optimizer",
        "SAM on the ML part lowers the scientific-parameter error of hybrid models versus ERM and L2, "
        "for additive and non-additive hybrids.",
        extras=("sciml",),
        experiment="neurips26.methods.samhybrid.experiment:EXPERIMENT",
        default_budget_s=253,
    ),
    _M(
        "semanticdialect",
        "Semantic dialects: block formats for low-bit video DiTs",
        "quant",
        "fake_quantize_dit_",
        "Semantic-aware block formats preserve DiT video quality at low bit width.",
        extras=("video",),
        experiment="neurips26.methods.semanticdialect.experiment:EXPERIMENT",
        default_budget_s=300,
    ),
    _M(
        "poes",
        "POES: choosing the evaluation examples of prompt optimizers",
        "agent",
        "optimizer hook",
        "Selecting informative evaluation examples makes prompt optimization cheaper and better.",
        extras=("prompt",),
        experiment="neurips26.methods.poes.experiment:EXPERIMENT",
        default_budget_s=260,
    ),
    _M(
        "screensearch",
        "ScreenSearch: ambiguity-aware exploration of desktop and web applications",
        "agent",
        "Explorer + backends (AT-SPI, Playwright, synthetic), StateGraph",
        "An ambiguity-aware PUCT over a deduplicated state graph keeps frontier-only discovery while "
        "the ambiguity signal flags aliased states; ambiguity reduction alone finds fewer states.",
        extras=("agent",),
        experiment="neurips26.methods.screensearch.experiment:EXPERIMENT",
        default_budget_s=92,
    ),
    _M(
        "scalebits",
        "ScaleBITS: scalable bit-width search for mixed-precision LLM quantization",
        "quant",
        "quantize_and_report",
        "Dynamic-sensitivity greedy bit allocation beats uniform and static "
        "mixed precision at equal average bits.",
        extras=("llm", "quant"),
        experiment="neurips26.methods.scalebits.experiment:EXPERIMENT",
        default_budget_s=340,
    ),
    _M(
        "stparopt",
        "STParOpt: uncertainty-aware C-to-CUDA parallelisation with execution stride features",
        "code",
        "analyze() / translate()",
        "Fusing execution stride evidence when the static branch is uncertain beats compiler and "
        "static-only parallelism detection and yields more correct CUDA.",
        extras=("code",),
        experiment="neurips26.methods.stparopt.experiment:EXPERIMENT",
        default_budget_s=180,
    ),
    _M(
        "star",
        "STAR: state-aware adapter for TSFM anomaly detection",
        "ts",
        "pyod detector",
        "Conditioning on discrete state variables improves TSFM anomaly detection.",
        extras=("ts",),
        experiment="neurips26.methods.star.experiment:EXPERIMENT",
        default_budget_s=330,
    ),
    _M(
        "srlmpc",
        "SRL-MPC: shape-aware navigation in heterogeneous crowds",
        "control",
        "gymnasium Env",
        "Shape-aware MPC navigates crowds more safely and efficiently.",
        extras=("control",),
        experiment="neurips26.methods.srlmpc.experiment:EXPERIMENT",
        default_budget_s=90,
    ),
    _M(
        "spcacw",
        "SP-CACW: convergence-aware client weighting for selfish personalization",
        "fl",
        "Flower Strategy",
        "Convergence-aware client weighting benefits every participant.",
        extras=("fl",),
        experiment="neurips26.methods.spcacw.experiment:EXPERIMENT",
        default_budget_s=45,
    ),
    _M(
        "solar",
        "SOLAR: validated speed-of-light bounds for deep-learning programs",
        "sol",
        "analyze()",
        "Derived SOL bounds cover the programs exactly and are never violated by measurements.",
        extras=("sol",),
        experiment="neurips26.methods.solar.experiment:EXPERIMENT",
        default_budget_s=225,
    ),
    _M(
        "solexecbench",
        "SOL-ExecBench: kernels scored against the speed of light",
        "sol",
        "harness",
        "Scoring kernels against SOL exposes headroom that speedup scores hide.",
        extras=("sol",),
        experiment="neurips26.methods.solexecbench.experiment:EXPERIMENT",
        default_budget_s=300,
    ),
)
del _M

SLUGS: tuple[str, ...] = tuple(spec.slug for spec in METHODS)


def method_readme(slug: str) -> Path:
    """Where method ``slug``'s README lives inside the installed package (it may not exist yet)."""
    return Path(__file__).resolve().parent / "methods" / slug / "README.md"


def get_spec(slug: str) -> MethodSpec:
    """The spec of ``slug``; an unknown slug raises ``KeyError`` listing the known ones."""
    for spec in METHODS:
        if spec.slug == slug:
            return spec
    raise KeyError(f"unknown method {slug!r}; known methods: {', '.join(SLUGS)}")


# Extra subcommands some methods ship: name -> (module with add_arguments(parser) and main(args), help).
# The modules must import lazily (no torch at import) so `neurips26 --help` stays instant.
TOOLS: dict[str, tuple[str, str]] = {
    "solar": ("neurips26.methods.solar.cli", "speed-of-light bounds: analyze, calibrate, hardware"),
    "solexecbench": (
        "neurips26.methods.solexecbench.cli",
        "evaluate kernel solutions scored against the SOL",
    ),
    "styleroute": ("neurips26.methods.styleroute.cli", "single-image diffusion priors: train-prior, priors"),
    "screensearch": (
        "neurips26.methods.screensearch.cli",
        "explore an app into a deduplicated state graph (synthetic, galculator, web)",
    ),
    "srlmpc": ("neurips26.methods.srlmpc.cli", "SRL-MPC: grid-tune constants, train the PPO tuner and PPO"),
    "stparopt": ("neurips26.methods.stparopt.cli", "C loops -> verdicts and CUDA: analyze, translate, train"),
    "zoo": ("neurips26.zoo.cli", "tiny trained language models: list, train, eval"),
    "data": ("neurips26.data.cli", "the data sets some profiles need downloaded: list, fetch NAME"),
    "new": ("neurips26.scaffold", "write the skeleton of a new method and register it: new SLUG"),
}
