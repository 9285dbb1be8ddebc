"""The SemanticDialect experiment: W4A4 fake quantization of ``tiny-vdit`` on moving-digit videos.

Every format samples the same class-conditional videos from the same noise (rectified-flow Euler,
``sampling_steps`` steps) with every linear layer and both attention products fake-quantized, weights
and activations (online). Quality is measured against the full-precision samples of the same seed (PSNR,
SSIM, Frechet distance of classifier features, flicker) and on its own (class accuracy, consecutive-frame
feature cosine); the denoiser's velocity error against the FP model on the same inputs is split into
high-noise (sigma > 0.5) and low-noise steps.

The committed FP model has not learned its data (its own samples are at chance under the classifier), so
sample-quality metrics cannot rank formats around it; the claims judge errors on the model's own
activations instead (issue #48, route (b)): at ``probe_steps`` steps of the FP trajectory, every quantized
linear layer is run on the FP model's input of that layer and compared with the FP output
(``linear_output_error``), and the attention products on FP Q/K/V with FP attention
(``attention_output_error``); ``sample_error`` is the final sample's relative error against FP.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile, Progress
from neurips26.bench.setup import Setup, SetupContext
from neurips26.core.config import nested, param
from neurips26.core.validation import check_in_range, check_int
from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.integration import FormatConfig, fake_quantize_dit_, temporal_report

__all__ = ["EXPERIMENT", "SemanticDialectExperimentConfig"]


@dataclass
class SemanticDialectExperimentConfig:
    """Data and sampling shared by every format; ``method`` is SemanticDialect's own config."""

    method: SemanticDialectConfig = nested(SemanticDialectConfig, "SemanticDialectConfig's defaults")
    n_videos: int = param(2, "ours: videos per seed (one core: each quantized step costs ~0.2 s/video)")
    sampling_steps: int = param(25, "issue: 25 sampling steps")
    high_noise_sigma: float = param(0.5, "ours: steps with sigma > 0.5 count as high-noise")
    probe_steps: int = param(
        1,
        "ours: FP-trajectory steps probing each layer (midpoints of equal spans; 1 = sigma 0.5)",
    )
    probe_videos: int = param(1, "ours: videos of the seed whose activations probe (512 tokens each)")

    def __post_init__(self) -> None:
        check_int("n_videos", self.n_videos)
        check_int("probe_videos", self.probe_videos)
        if self.probe_videos > self.n_videos:
            raise ValueError(f"probe_videos={self.probe_videos} must be <= n_videos={self.n_videos}")
        check_int("sampling_steps", self.sampling_steps, minimum=2)
        check_in_range("high_noise_sigma", self.high_noise_sigma, 0.0, 1.0)
        check_int("probe_steps", self.probe_steps)
        if self.probe_steps > self.sampling_steps:
            raise ValueError(
                f"probe_steps={self.probe_steps} must be <= sampling_steps={self.sampling_steps}"
            )


def _ours(c: SemanticDialectExperimentConfig, **changes: Any) -> SemanticDialectConfig:
    return replace(c.method, **changes)


SYSTEMS = {
    "semanticdialect": lambda c: c.method,
    "fp": lambda c: None,
    "int4": lambda c: FormatConfig("int4", tokens_per_frame=c.method.tokens_per_frame),
    "mxfp4": lambda c: FormatConfig("mxfp4", tokens_per_frame=c.method.tokens_per_frame),
    "nvfp4": lambda c: FormatConfig("nvfp4", tokens_per_frame=c.method.tokens_per_frame),
    "blockdialect": lambda c: FormatConfig("blockdialect", tokens_per_frame=c.method.tokens_per_frame),
    # ablations: the LUT formatbook alone (16/32/64), + decomposition, + SeDA
    "sd_lut16": lambda c: _ours(c, n_dialects=16, seda=False, decomposition_ratio=0.0),
    "sd_lut32": lambda c: _ours(c, n_dialects=32, seda=False, decomposition_ratio=0.0),
    "sd_lut64": lambda c: _ours(c, n_dialects=64, seda=False, decomposition_ratio=0.0),
    "sd_decomp": lambda c: _ours(c, seda=False),
    "sd_seda": lambda c: _ours(c, decomposition_ratio=0.0),
    "sd_seda_kmeans": lambda c: _ours(c, decomposition_ratio=0.0, seda_clustering="kmeans"),  # full only
    # negative controls: the same machinery without its idea
    "sd_random_dialect": lambda c: _ours(c, selection="random", seda=False, decomposition_ratio=0.0),
    "sd_seda_random": lambda c: _ours(c, decomposition_ratio=0.0, seda_clustering="random"),
    "sd_decomp_random": lambda c: _ours(c, seda=False, salient_selection="random"),
}
FORMAT_BASELINES = ("int4", "mxfp4", "nvfp4", "blockdialect")


def _models(
    config: SemanticDialectExperimentConfig, profile: Profile, seed: int, context: SetupContext
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The tiny video DiT and its classifier (one per worker)."""
    from neurips26.methods.semanticdialect.tiny_vdit import load_tiny_vdit

    return load_tiny_vdit()


def _reference(
    config: SemanticDialectExperimentConfig, profile: Profile, seed: int, context: SetupContext
) -> dict[str, Any]:
    """FP samples of one seed (shared by every format's cell of that seed)."""
    from neurips26.methods.semanticdialect.moving_digits import make_moving_digits
    from neurips26.methods.semanticdialect.tiny_vdit import sample_videos

    model, _ = context.models
    shape = model.config
    data = make_moving_digits(config.n_videos, seed=50_000 + seed, n_frames=shape.frames, size=shape.size)
    noise = torch.randn(data.videos.shape, generator=torch.Generator().manual_seed(60_000 + seed))
    start = time.perf_counter()
    samples = sample_videos(model, data.labels, noise, steps=config.sampling_steps)
    seconds = time.perf_counter() - start
    probes = _fp_trajectory_probes(
        model,
        data.labels[: config.probe_videos],
        noise[: config.probe_videos],
        config.sampling_steps,
        config.probe_steps,
    )
    return {"labels": data.labels, "noise": noise, "samples": samples, "seconds": seconds, "probes": probes}


@torch.no_grad()
def _fp_trajectory_probes(model, labels, noise, steps: int, n_probes: int) -> list[tuple[Any, ...]]:
    """(x_t, t, labels) of the FP Euler trajectory at the midpoints of ``n_probes`` equal spans of steps:
    the FP activations there probe every quantized layer."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=1.0)
    scheduler.set_timesteps(steps)
    chosen = {int((i + 0.5) * steps / n_probes) for i in range(n_probes)}  # interval midpoints
    x, probes = noise.clone(), []
    for index, t in enumerate(scheduler.timesteps):
        timestep = t.expand(x.shape[0])
        if index in chosen:
            probes.append((x.clone(), timestep, labels))
        x = scheduler.step(model(x, timestep, labels), t, x).prev_sample
    return probes


SETUP = (
    Setup("models", build=_models, key=lambda config, profile, seed: "tiny-vdit"),
    Setup(
        "reference",
        build=_reference,
        key=lambda config, profile, seed: (
            seed,
            config.n_videos,
            config.sampling_steps,
            config.probe_steps,
            config.probe_videos,
        ),
    ),
)


def _frechet(a: np.ndarray, b: np.ndarray) -> float:
    from scipy import linalg

    mu = a.mean(0) - b.mean(0)
    eye = 1e-6 * np.eye(a.shape[1])
    ca, cb = np.cov(a, rowvar=False) + eye, np.cov(b, rowvar=False) + eye
    root = linalg.sqrtm(ca @ cb)
    return float(mu @ mu + np.trace(ca + cb - 2 * np.real(root)))


@torch.no_grad()
def _sample_and_compare(qmodel, fp_model, labels, noise, steps, high_sigma):
    """Euler sampling with the quantized model; at each step also the FP velocity on the same input."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=1.0)
    scheduler.set_timesteps(steps)
    x = noise.clone()
    high, low = [], []
    for index, t in enumerate(scheduler.timesteps):
        timestep = t.expand(x.shape[0])
        v_q = qmodel(x, timestep, labels)
        v_fp = fp_model(x, timestep, labels)
        error = float(((v_q - v_fp) ** 2).sum() / (v_fp**2).sum())
        (high if float(scheduler.sigmas[index]) > high_sigma else low).append(error)
        x = scheduler.step(v_q, t, x).prev_sample
    return x, float(np.mean(high)), float(np.mean(low))


def _relative_error(approx: torch.Tensor, exact: torch.Tensor) -> float:
    return float(((approx - exact) ** 2).sum() / (exact**2).sum().clamp_min(1e-30))


@torch.no_grad()
def _capture_linears(
    model: torch.nn.Module, *inputs: Any
) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Layer name -> (input, output) of every ``nn.Linear`` call of one FP forward, in call order."""
    calls: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            hook = lambda m, args, out, name=name: calls.setdefault(name, []).append((args[0], out))  # noqa: E731
            handles.append(module.register_forward_hook(hook))
    try:
        model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def _prime_saliency_with_fp_attention(qmodel, fp_calls) -> list:
    """Hooks giving each quantized attention block, before its Q/K/V layers run, the attention mass of the
    FP model at the same input (in sampling they see the previous step's mass; a probe has no previous
    step, and an empty saliency would switch the attention-guided decomposition off for Q/K/V only)."""
    from neurips26.methods.semanticdialect.integration import QuantAttnProcessor

    state = qmodel._semanticdialect_state
    handles = []
    for name, module in qmodel.named_modules():
        processor = getattr(module, "processor", None)
        if not isinstance(processor, QuantAttnProcessor) or f"{name}.to_q" not in fp_calls:
            continue

        def hook(module, args, kwargs, name=name, block=processor.block):
            q, k = fp_calls[f"{name}.to_q"][0][1], fp_calls[f"{name}.to_k"][0][1]
            b, n, _ = q.shape
            q, k = (t.view(b, n, module.heads, -1).transpose(1, 2) for t in (q, k))
            probs = ((q @ k.transpose(-1, -2)) * module.scale).softmax(dim=-1)
            state.saliency[block] = probs.sum(dim=-2).mean(dim=1)

        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    return handles


@torch.no_grad()
def layer_errors_on_fp_activations(qmodel, fp_model, probes) -> dict[str, float]:
    """Relative errors of the quantized layers on the FP model's own activations (issue #48).

    Each probe input runs through the FP model (recording every linear layer's input and output) and
    through ``qmodel`` teacher-forced: every quantized linear layer gets the FP input of that layer and
    hands the FP output on, so each layer's error is its own on real activations and nothing compounds.
    A quantized layer's incoming input differs from the FP one only after the quantized attention
    products (``to_out``): that difference is the attention products' error on FP Q, K, V.
    """
    from neurips26.methods.semanticdialect.integration import FakeQuantLinear

    linear: dict[str, list[float]] = {}
    attention: list[float] = []
    for x, timestep, labels in probes:
        fp_calls = _capture_linears(fp_model, x, timestep, labels)
        seen: dict[str, int] = {}

        def pre_hook(module, args, fp_calls=fp_calls, seen=seen):
            fp_input, _ = fp_calls[module.name][seen.get(module.name, 0)]
            if module.name.endswith("to_out.0"):
                attention.append(_relative_error(args[0], fp_input))
            return (fp_input,)

        def hook(module, args, out, fp_calls=fp_calls, seen=seen):
            index = seen.get(module.name, 0)
            seen[module.name] = index + 1
            fp_output = fp_calls[module.name][index][1]
            linear.setdefault(module.name, []).append(_relative_error(out, fp_output))
            return fp_output

        layers = [m for m in qmodel.modules() if isinstance(m, FakeQuantLinear)]
        handles = [m.register_forward_pre_hook(pre_hook) for m in layers]
        handles += [m.register_forward_hook(hook) for m in layers]
        handles += _prime_saliency_with_fp_attention(qmodel, fp_calls)
        try:
            qmodel(x, timestep, labels)
        finally:
            for handle in handles:
                handle.remove()
    out = {"linear_output_error": float(np.mean([np.mean(v) for v in linear.values()]))}
    if attention:
        out["attention_output_error"] = float(np.mean(attention))
    return out


def _weight_bits(system: Any) -> float:
    if isinstance(system, SemanticDialectConfig):
        from neurips26.methods.semanticdialect.semantic import SemanticDialectQuantizer

        return SemanticDialectQuantizer(replace(system, seda=False)).bits_per_element
    return system.make_quantizer().bits_per_element


def _activation_bits(system: Any) -> float:
    if isinstance(system, SemanticDialectConfig):
        from neurips26.methods.semanticdialect.semantic import SemanticDialectQuantizer

        base = SemanticDialectQuantizer(system).bits_per_element
        return base * (1.0 + system.decomposition_ratio)  # the salient rows carry a second 4-bit term
    return system.make_quantizer().bits_per_element


@torch.no_grad()
def _activation_statistics(model: torch.nn.Module, labels, noise) -> dict[str, float]:
    """Kurtosis and outlier share (|x - mean| > 6 std) of every linear input, at a mid-noise step."""
    stats: list[tuple[float, float]] = []

    def hook(module, args):
        x = args[0].float().reshape(-1)
        z = (x - x.mean()) / x.std().clamp_min(1e-12)
        stats.append((float((z**4).mean()), float((z.abs() > 6).float().mean())))

    handles = [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        model(noise * 0.5, torch.full((noise.shape[0],), 500.0), labels)
    finally:
        for handle in handles:
            handle.remove()
    kurt = [s[0] for s in stats]
    return {
        "act_kurtosis_max": max(kurt),
        "act_kurtosis_median": float(np.median(kurt)),
        "act_outlier_share": float(np.mean([s[1] for s in stats])),
    }


@torch.no_grad()
def run(
    system: Any,
    config: SemanticDialectExperimentConfig,
    context: SetupContext,
    profile: Profile,
    seed: int,
    progress: Progress,
) -> dict[str, Any]:
    """One cell: sample the seed's videos with ``system``'s format and score them against FP."""
    from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

    fp_model, classifier = context.models
    ref = context.reference
    labels, noise, fp_samples = ref["labels"], ref["noise"], ref["samples"]
    classes = labels // 4
    metrics: dict[str, Any] = {"fp_sampling_seconds": ref["seconds"]}
    details: dict[str, Any] = {}
    if system is None:
        samples = fp_samples
        metrics.update(_activation_statistics(fp_model, labels, noise))
    else:
        qmodel = copy.deepcopy(fp_model)
        fake_quantize_dit_(qmodel, system)
        state = qmodel._semanticdialect_state
        metrics.update(layer_errors_on_fp_activations(qmodel, fp_model, ref["probes"]))
        state.reset()  # the probe's saliency must not leak into the sampling
        state.record = True
        start = time.perf_counter()
        samples, high, low = _sample_and_compare(
            qmodel, fp_model, labels, noise, config.sampling_steps, config.high_noise_sigma
        )
        metrics["sampling_seconds"] = time.perf_counter() - start
        metrics["velocity_error_high_noise"] = high
        metrics["velocity_error_low_noise"] = low
        report = temporal_report(qmodel)
        details["temporal_report"] = report
        errors = [np.mean(r["frame_error"]) for r in report.values()]
        metrics["activation_sqnr_db"] = float(np.mean(-10 * np.log10(np.maximum(errors, 1e-12))))
        disagreements = [
            np.mean(r["format_disagreement"]) for r in report.values() if "format_disagreement" in r
        ]
        if disagreements:
            metrics["format_disagreement"] = float(np.mean(disagreements))
        metrics["weight_bits"] = _weight_bits(system)
        metrics["activation_bits"] = _activation_bits(system)
        metrics["sample_error"] = _relative_error(samples, fp_samples)
        frames = lambda v: v.reshape(-1, 1, *v.shape[-2:])  # noqa: E731
        metrics["psnr"] = float(peak_signal_noise_ratio(frames(samples), frames(fp_samples), data_range=2.0))
        metrics["ssim"] = float(
            structural_similarity_index_measure(frames(samples), frames(fp_samples), data_range=2.0)
        )
        delta_q, delta_fp = samples.diff(dim=1), fp_samples.diff(dim=1)
        metrics["flicker"] = float((delta_q - delta_fp).abs().mean())
        fq = classifier.frame_features(samples).reshape(-1, 64).numpy().astype(np.float64)
        ffp = classifier.frame_features(fp_samples).reshape(-1, 64).numpy().astype(np.float64)
        metrics["frechet_distance"] = _frechet(fq, ffp)
    features = classifier.frame_features(samples)
    cosine = torch.nn.functional.cosine_similarity(features[:, 1:], features[:, :-1], dim=-1)
    metrics["temporal_consistency"] = float(cosine.mean())
    metrics["class_accuracy"] = float((classifier(samples).argmax(1) == classes).float().mean())
    if details:
        metrics["details"] = details
    return metrics


METRICS = (
    Metric(
        "linear_output_error",
        "min",
        "relative",
        "mean over linear layers of ||y_q - y_fp||^2/||y_fp||^2 on the FP model's own inputs (probe steps)",
    ),
    Metric(
        "attention_output_error",
        "min",
        "relative",
        "mean over blocks of the attention products' relative error on FP Q, K, V (probe steps)",
    ),
    Metric(
        "sample_error", "min", "relative", "||x_q - x_fp||^2/||x_fp||^2 of the final samples (same noise)"
    ),
    Metric("psnr", "max", "dB", "PSNR of the frames against the FP samples (same noise)"),
    Metric("ssim", "max", "", "SSIM of the frames against the FP samples (torchmetrics)"),
    Metric("frechet_distance", "min", "", "Frechet distance of per-frame classifier features to FP's"),
    Metric("class_accuracy", "max", "", "classifier accuracy of the generated videos' digit class"),
    Metric("temporal_consistency", "max", "", "cosine of consecutive-frame classifier features"),
    Metric("flicker", "min", "", "mean |delta frame_q - delta frame_fp| (pixels in [-1, 1])"),
    Metric("velocity_error_high_noise", "min", "relative", "||v_q - v_fp||^2/||v_fp||^2, sigma > 0.5"),
    Metric("velocity_error_low_noise", "min", "relative", "||v_q - v_fp||^2/||v_fp||^2, sigma <= 0.5"),
    Metric("activation_sqnr_db", "max", "dB", "mean over layers of the linear inputs' SQNR"),
    Metric(
        "format_disagreement",
        "min",
        "",
        "share of blocks whose dialect differs from the same patch in the previous frame",
    ),
    Metric("weight_bits", "min", "bits", "bits per weight element (codes + scales + ids)"),
    Metric("activation_bits", "min", "bits", "bits per activation element (incl. the residual rows)"),
    Metric(
        "sampling_seconds", "min", "s", "wall time of the quantized sampling (fake quant, CPU)", timing=True
    ),
    Metric("fp_sampling_seconds", "min", "s", "wall time of the FP sampling of the same videos", timing=True),
    Metric("act_kurtosis_max", "max", "", "FP: largest kurtosis of a linear layer's input"),
    Metric("act_kurtosis_median", "max", "", "FP: median kurtosis of the linear inputs"),
    Metric("act_outlier_share", "max", "", "FP: share of linear inputs beyond 6 standard deviations"),
)

# Positive contrast of every claim (issue #48): NVFP4 (FP8 scales per 16) is known closer to FP than MXFP4
# (power-of-two scales per 32); a design that cannot rank them cannot rank 4-bit formats.
CONTRAST = ("nvfp4", "mxfp4")

# The claims judge errors on the FP model's own activations, not sample quality: the FP model samples at
# chance, so PSNR/FD/flicker against its blobs are reported but judge nothing (README, "Which route").
CLAIMS = (
    Claim(
        "SemanticDialect has the lowest layer-output error on FP activations among the 4-bit formats",
        "linear_output_error",
        "semanticdialect",
        FORMAT_BASELINES,
        controls=("sd_random_dialect",),
        contrast=CONTRAST,
    ),
    Claim(
        "SemanticDialect's final samples are closest to the FP samples among the 4-bit formats",
        "sample_error",
        "semanticdialect",
        FORMAT_BASELINES,
        controls=("sd_random_dialect",),
        contrast=CONTRAST,
    ),
    Claim(
        "SeDA lowers the layer-output error on FP activations versus the same book without SeDA",
        "linear_output_error",
        "sd_seda",
        ("sd_lut64",),
        controls=("sd_seda_random",),
        contrast=CONTRAST,
    ),
    Claim(
        "attention-guided decomposition lowers the layer-output error versus no decomposition",
        "linear_output_error",
        "sd_decomp",
        ("sd_lut64",),
        controls=("sd_decomp_random",),
        contrast=CONTRAST,
    ),
    Claim(
        "attention-guided salient tokens lower the layer-output error versus random salient tokens",
        "linear_output_error",
        "sd_decomp",
        ("sd_decomp_random",),
        controls=("sd_lut64",),  # the same book without decomposition must not beat random salient tokens
        contrast=CONTRAST,
    ),
)

DEFAULT_SYSTEMS = (
    "semanticdialect",
    "fp",
    "int4",
    "mxfp4",
    "nvfp4",
    "blockdialect",
    "sd_lut16",
    "sd_lut32",
    "sd_lut64",
    "sd_decomp",
    "sd_seda",
    "sd_random_dialect",
    "sd_seda_random",
    "sd_decomp_random",
)

EXPERIMENT = Experiment(
    slug="semanticdialect",
    config_cls=SemanticDialectExperimentConfig,
    claims=CLAIMS,
    metrics=METRICS,
    systems=SYSTEMS,
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=45,
            seeds=1,
            overrides={"n_videos": 1, "sampling_steps": 2},
            systems=("semanticdialect", "fp", "mxfp4", "nvfp4", "sd_lut16"),
        ),
        "default": Profile(
            "default",
            budget_s=300,  # measured: 295 s wall before the probe (one worker, the other core busy); the
            # probe adds 18-23% of a cell (one process, loaded machine): remeasure at the republish
            seeds=5,
            overrides={"sampling_steps": 8},
            systems=DEFAULT_SYSTEMS,
        ),
        "full": Profile("full", budget_s=3600, seeds=5, overrides={"n_videos": 4}),
    },
    run=run,
    setup=SETUP,
    ours="semanticdialect",
    pareto_x="activation_bits",
)
