"""``StyleRoutePipeline``: region-aware diffusion stylisation on any diffusers-style denoiser.

"Where": :class:`RegionRouter` turns structure/texture confidences and the route disagreement of two
short probes into a routing map r(x). "How", at every DDIM step t (descending):

1. region-wise start time t0(x) = t_min + r(x)(t_max - t_min): where t > t0(x) T the pixel is still
   pending and is overwritten by the forward-noised (r-weighted AdaIN'd) content q(c', t) (Blended
   Diffusion / RePaint style);
2. the denoiser predicts x0-hat; style guidance (Gram of a fixed random bank, weighted by r) and a
   gradient-domain content loss give gradients g_s, g_c on x0-hat; in low-r regions where they conflict,
   g_s is projected off g_c (PCGrad); x0-hat <- x0-hat - s * r * g_s (a manifold-preserving step on x0);
3. after the DDIM step to t', while t' > ilvr_until T, ILVR anchors the coarse layout:
   x <- x - (1 - r) (LP(x) - LP(q(c, t'))).

The initial latent is StyleID's AdaIN of the content toward the style, weighted by r. Pixels whose start
time is 0 are never diffused and come back as the content.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from diffusers import DiffusionPipeline
from diffusers.utils import BaseOutput
from diffusers.utils.torch_utils import randn_tensor

from neurips26.methods.styleroute.attention import InjectionController
from neurips26.methods.styleroute.config import StyleRouteConfig
from neurips26.methods.styleroute.guidance import (
    GuidanceBank,
    adain,
    content_gradient,
    low_pass,
    luminance_gradients,
    project_conflicts,
    rms_normalise,
    route_weights,
    style_loss_and_gradient,
    style_targets,
)
from neurips26.methods.styleroute.router import RegionRouter, Routing
from neurips26.methods.styleroute.sampler import Denoiser, ddim_denoise, ddim_invert
from neurips26.methods.styleroute.validation import check_budget, check_image


@dataclass
class StyleRouteOutput(BaseOutput):
    """Stylised images ``(B, H, W, 3)`` in [0, 1], routing maps ``(B, H, W)`` and per-region rows."""

    images: np.ndarray
    routing_map: np.ndarray
    regions: list[list[dict[str, float]]]
    labels: np.ndarray | None = None  # (B, H, W) SLIC labels the regions refer to


@dataclass
class RouteInputs:
    """Budget-independent routing evidence of a batch: SLIC labels, inversion error and disagreement maps."""

    labels: list[np.ndarray]
    inversion_error: list[np.ndarray | None]
    disagreement: list[np.ndarray | None]


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """``(B, H, W, 3)`` in [0, 1] -> ``(B, 3, H, W)`` in [-1, 1] (float32)."""
    return torch.from_numpy(np.ascontiguousarray(images)).float().permute(0, 3, 1, 2) * 2 - 1


def to_images(x: torch.Tensor) -> np.ndarray:
    """``(B, 3, H, W)`` in [-1, 1] -> ``(B, H, W, 3)`` in [0, 1]."""
    return ((x.detach().clamp(-1, 1) + 1) / 2).permute(0, 2, 3, 1).cpu().numpy()


def evidence_grid(size: tuple[int, ...] | torch.Size, scale: int) -> tuple[int, int]:
    """The (h, w) grid the routing evidence runs on: ``size // scale`` rounded down to multiples of 8.

    Falls back to ``size`` when ``scale`` is 1 or a side would drop below 16 px (multiples of 8 keep the
    grid valid for strided denoisers; the evidence is only averaged over regions, see ``upsample``).
    """
    h, w = int(size[0]), int(size[1])
    if scale <= 1:
        return h, w
    gh, gw = (h // scale) // 8 * 8, (w // scale) // 8 * 8
    return (h, w) if min(gh, gw) < 16 else (gh, gw)


def to_grid(x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Area-average ``(B, C, H, W)`` onto ``grid`` (identity when the grid is the input's size)."""
    if tuple(x.shape[-2:]) == tuple(grid):
        return x
    return torch.nn.functional.interpolate(x, size=grid, mode="area")


def upsample(x: torch.Tensor, size: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """Bilinear upsampling of an evidence map ``(B, 1, h, w)`` to ``size`` (identity at equal size)."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    return torch.nn.functional.interpolate(x, size=tuple(size), mode="bilinear", align_corners=False)


def _batch(content: Any, name: str) -> np.ndarray:
    array = content.detach().cpu().numpy() if isinstance(content, torch.Tensor) else content
    if isinstance(array, (list, tuple)):
        array = np.stack([check_image(np.asarray(a), name) for a in array])
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be an array (H, W, 3) or (B, H, W, 3), got {type(content).__name__}")
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4:
        raise ValueError(f"{name} must have shape (H, W, 3) or (B, H, W, 3), got {array.shape}")
    return np.stack([check_image(a, name) for a in array])


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _config_as_json(config: StyleRouteConfig) -> dict[str, Any]:
    """The config's fields as plain JSON values (tuples become lists; ``StyleRouteConfig`` takes both)."""
    return json.loads(json.dumps(asdict(config)))


class StyleRoutePipeline(DiffusionPipeline):
    """Region-aware stylisation: ``pipe(content, style, budget=0.5, generator=g) -> StyleRouteOutput``.

    Parameters
    ----------
    unet: any diffusers-style denoiser in the image space of ``content`` (our ``SingleImagePrior``, a
        ``UNet2DModel``; a latent model needs the images encoded first, see the README).
    scheduler: a ``DDIMScheduler`` (eta = 0).
    route_config: :class:`StyleRouteConfig` (defaults with their sources there), or its fields as a dict.
    unet_kwargs: extra keyword arguments for every denoiser call (e.g. ``encoder_hidden_states``).
    """

    def __init__(
        self,
        unet: torch.nn.Module,
        scheduler: Any,
        route_config: StyleRouteConfig | dict[str, Any] | None = None,
        unet_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.register_modules(unet=unet, scheduler=scheduler)
        if isinstance(route_config, dict):  # as ``from_pretrained`` hands it back from model_index.json
            route_config = StyleRouteConfig(**route_config)
        if route_config is not None and not isinstance(route_config, StyleRouteConfig):
            raise TypeError(f"route_config must be a StyleRouteConfig, got {type(route_config).__name__}")
        self.route_config = route_config or StyleRouteConfig()
        self.unet_kwargs = dict(unet_kwargs or {})
        # Recorded in model_index.json, so save_pretrained -> from_pretrained restores the same pipeline.
        self.register_to_config(route_config=_config_as_json(self.route_config))
        if _is_json(self.unet_kwargs):
            self.register_to_config(unet_kwargs=self.unet_kwargs)
        self.bank = GuidanceBank()
        self._target_cache: dict[bytes, list[torch.Tensor]] = {}

    def _targets(self, style: torch.Tensor) -> list[torch.Tensor]:
        """The style's guidance Grams, cached by the style's pixels (they depend on nothing else).

        The key is a digest of the tensor's shape and bytes, so a new tensor holding the same style (every
        call converts its input) hits the cache and a changed style misses it. At most 8 styles are kept.
        """
        cache = getattr(self, "_target_cache", None)
        if not isinstance(cache, dict):
            cache = self._target_cache = {}
        array = style.detach().cpu().contiguous().numpy()
        key = hashlib.blake2b(repr((array.shape, array.dtype.str)).encode() + array.tobytes()).digest()
        if key not in cache:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            cache[key] = style_targets(self.bank, style)
        return cache[key]

    def save_pretrained(self, save_directory: str | Path, **kwargs: Any) -> None:
        """diffusers' ``save_pretrained``; the route config travels in ``model_index.json``.

        ``unet_kwargs`` holding tensors (e.g. ``encoder_hidden_states``) cannot be written to JSON: saving
        refuses rather than reloading a pipeline that silently calls the denoiser without them.
        """
        if not _is_json(self.unet_kwargs):
            raise ValueError(
                f"unet_kwargs {sorted(self.unet_kwargs)} are not JSON values and would be lost: save the "
                "tensors yourself and pass them again as StyleRoutePipeline.from_pretrained(path, "
                "unet_kwargs=...), or save a pipeline without them"
            )
        super().save_pretrained(save_directory, **kwargs)

    @property
    def denoiser(self) -> Denoiser:
        return Denoiser(self.unet, self.scheduler, self.unet_kwargs)

    def with_config(self, **changes: Any) -> StyleRoutePipeline:
        """A pipeline sharing the denoiser with some config fields changed (ablations)."""
        return StyleRoutePipeline(
            self.unet, self.scheduler, replace(self.route_config, **changes), self.unet_kwargs
        )

    # ---------------------------------------------------------------- where
    @torch.no_grad()
    def inversion_error(self, content: torch.Tensor) -> torch.Tensor:
        """|DDIM-reconstruct(DDIM-invert(c) at inversion_t) - c|, channel mean: ``(B, H, W)``.

        Computed on a grid downsampled by ``inversion_scale`` and upsampled to the content's size.
        """
        cfg, den = self.route_config, self.denoiser
        small = to_grid(content, evidence_grid(content.shape[-2:], cfg.inversion_scale))
        latent, ts = ddim_invert(den, small, cfg.inversion_t, cfg.num_inference_steps)
        recon = ddim_denoise(den, latent, ts)
        return upsample((recon - small).abs().mean(1, keepdim=True), content.shape[-2:])[:, 0]

    def probes(
        self, content: torch.Tensor, style: torch.Tensor, generator: torch.Generator | None
    ) -> torch.Tensor:
        """Route disagreement |x0_protect - x0_inject| after ``probe_steps`` steps, one noise: ``(B, H, W)``.

        protect: content, full ILVR anchoring, no guidance; inject: AdaIN'd content, full style guidance;
        both on a grid downsampled by ``probe_scale``, the map upsampled to the content's size. The two
        routes run one after the other on ``B`` rows each: on one CPU thread a batch of ``2B`` through our
        prior measured no faster, and up to ~25% slower at 96-128 px, than two batches of ``B``
        (``benchmarks/styleroute/bench_styleroute.py`` README table). Only x0-hat of the last step is
        used, so that
        step skips its DDIM update.
        """
        cfg, den = self.route_config, self.denoiser
        small = to_grid(content, evidence_grid(content.shape[-2:], cfg.probe_scale))
        noise = randn_tensor(small.shape, generator=generator, dtype=small.dtype)
        ts = den.start_timesteps(cfg.num_inference_steps, cfg.probe_t)[: cfg.probe_steps]
        x0s = []
        for value, init in ((0.0, small), (1.0, adain(small, style))):  # protect, inject
            route = torch.full_like(small[:, :1], value)
            fixed = self._fixed(small, style, route)
            x, x0 = den.scheduler.add_noise(init, noise, ts[:1]), init
            for index, t in enumerate(ts):
                x, x0 = self._step(
                    x, t, small, style, route, noise, None, None, value > 0, fixed, update=index < len(ts) - 1
                )
            x0s.append(x0)
        return upsample((x0s[0] - x0s[1]).abs().mean(1, keepdim=True).detach(), content.shape[-2:])[:, 0]

    def route_inputs(self, content: Any, style: Any, generator: torch.Generator | None = None) -> RouteInputs:
        """The budget-independent evidence (reuse it across budgets of one batch)."""
        cfg = self.route_config
        contents = _batch(content, "content")
        style_np = check_image(
            np.asarray(style.detach().cpu() if isinstance(style, torch.Tensor) else style), "style"
        )
        c, s = to_tensor(contents), to_tensor(style_np[None])
        labels = [RegionRouter(cfg).segment(x) for x in contents]
        needs_evidence = cfg.route_mode not in ("uniform",)
        inv = self.inversion_error(c) if needs_evidence and cfg.use_inversion_error else None
        dis = (
            self.probes(c, s, generator)
            if needs_evidence
            and cfg.route_mode != "structure"
            and cfg.weight_disagreement > 0
            and cfg.route_mode != "no_disagreement"
            else None
        )
        return RouteInputs(
            labels,
            [None if inv is None else inv[i].numpy() for i in range(len(contents))],
            [None if dis is None else dis[i].numpy() for i in range(len(contents))],
        )

    # ---------------------------------------------------------------- how
    def _fixed(self, content: torch.Tensor, style: torch.Tensor, route: torch.Tensor) -> dict[str, Any]:
        """What every step of one run reuses: the guided rows, their route per bank layer, the style's
        Grams, the content's luminance gradients and its low-pass (all fixed while sampling)."""
        cfg = self.route_config
        active = route.reshape(route.shape[0], -1).amax(1) > 0  # rows with r = 0 get no guidance
        rows = None if bool(active.all()) else active.nonzero()[:, 0]
        guided = route if rows is None else route[rows]
        fixed: dict[str, Any] = {"rows": rows, "any": bool(active.any())}
        if fixed["any"] and cfg.use_guidance and cfg.guidance_scale > 0:
            fixed["weights"] = route_weights(self.bank, guided)
            fixed["targets"] = self._targets(style)
            fixed["content_gradients"] = luminance_gradients(content if rows is None else content[rows])
        return fixed

    def _step(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        content: torch.Tensor,
        style: torch.Tensor,
        route: torch.Tensor,
        noise: torch.Tensor,
        labels: torch.Tensor | None,
        region_r: torch.Tensor | None,
        guidance: bool,
        fixed: dict[str, Any] | None = None,
        update: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One DDIM step with x0-hat guidance, conflict projection and ILVR; returns (x_prev, x0-hat).

        ``fixed``: :meth:`_fixed` of this run (computed here when None). Guidance runs on the rows whose
        route is not all zero (their r-weighted step is exactly zero otherwise), the style and content
        gradients in closed form (:func:`guidance.style_loss_and_gradient`,
        :func:`guidance.content_gradient`). ``update=False`` returns ``(x, x0-hat)`` without the DDIM
        update and ILVR (the probes' last step, whose x is not used).
        """
        cfg, den = self.route_config, self.denoiser
        with torch.no_grad():
            output = den(x, t)
        x0 = den.split(output, x, t)[0]
        if guidance and cfg.use_guidance and cfg.guidance_scale > 0:
            fixed = self._fixed(content, style, route) if fixed is None else fixed
        if guidance and cfg.use_guidance and cfg.guidance_scale > 0 and fixed["any"]:
            rows = fixed["rows"]
            x0_rows = x0 if rows is None else x0[rows]
            route_rows = route if rows is None else route[rows]
            _, g_style = style_loss_and_gradient(self.bank, x0_rows, fixed["targets"], fixed["weights"])
            g_style = rms_normalise(g_style)
            if cfg.use_projection and labels is not None and region_r is not None:
                g_content = content_gradient(x0_rows.detach(), fixed["content_gradients"])
                row_labels = labels if rows is None else labels[rows]
                row_r = region_r if rows is None else region_r[rows]
                g_style = project_conflicts(g_style, g_content, row_labels, row_r, cfg.projection_threshold)
            # a manifold-preserving step on x0-hat, annealed with the noise level sqrt(1 - alpha_bar_t)
            step_size = cfg.guidance_scale * float((1 - den.alpha_bar(t)).sqrt())
            if rows is None:
                x0 = (x0 - step_size * route * g_style).detach()
            else:
                x0 = x0.detach().clone()
                x0[rows] = x0[rows] - step_size * route_rows * g_style
            output = den.compose(x0, x, t)
        if not update:
            return x, x0
        x = den.scheduler.step(output, t, x).prev_sample
        step = den.scheduler.config.num_train_timesteps // den.scheduler.num_inference_steps
        t_prev = int(t) - step
        if cfg.use_ilvr and t_prev > cfg.ilvr_until * den.scheduler.config.num_train_timesteps:
            reference = den.scheduler.add_noise(content, noise, torch.tensor([t_prev]))
            x = x - (1 - route) * (low_pass(x, cfg.ilvr_factor) - low_pass(reference, cfg.ilvr_factor))
        return x, x0

    def __call__(
        self,
        content: Any,
        style: Any,
        budget: float = 0.5,
        mask: np.ndarray | None = None,
        generator: torch.Generator | None = None,
        route_inputs: RouteInputs | None = None,
        callback: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None,
    ) -> StyleRouteOutput:
        """Stylise ``content`` with ``style``.

        Parameters
        ----------
        content: float ``(H, W, 3)`` or ``(B, H, W, 3)`` in [0, 1], sides >= 32 and multiples of the
            denoiser's stride.
        style: float ``(h, w, 3)`` in [0, 1].
        budget: mean routing value in [0, 1] (0: protect everything; 1: uniform injection, i.e. SDEdit
            at ``t_max`` plus guidance).
        mask: optional ``(H, W)`` or ``(B, H, W)`` override of r(x) (NaN = automatic).
        generator: seeds the noise (drawn first, so equal seeds give SDEdit's noise) and the probes.
        route_inputs: reuse :meth:`route_inputs` across budgets.
        callback: ``callback(t, x, pending, forward_noised)`` before every denoiser call (tests).
        """
        cfg = self.route_config
        budget = check_budget(budget)
        contents = _batch(content, "content")
        style_np = check_image(
            np.asarray(style.detach().cpu() if isinstance(style, torch.Tensor) else style), "style"
        )
        c, s = to_tensor(contents), to_tensor(style_np[None])
        noise = randn_tensor(c.shape, generator=generator, dtype=c.dtype)
        if mask is not None:
            mask = np.asarray(mask, dtype=np.float64)
            mask = np.broadcast_to(mask, (len(contents), *mask.shape[-2:])) if mask.ndim == 2 else mask
            if mask.shape[0] != len(contents):
                raise ValueError(f"mask must be (H, W) or (B, H, W) with B={len(contents)}, got {mask.shape}")
        if route_inputs is None:
            trivial = budget in (0.0, 1.0) or cfg.route_mode == "uniform"
            route_inputs = (
                RouteInputs(
                    [RegionRouter(cfg).segment(x) for x in contents],
                    [None] * len(contents),
                    [None] * len(contents),
                )
                if trivial
                else self.route_inputs(contents, style_np, generator)
            )
        router = RegionRouter(cfg)
        seed = (
            int(torch.randint(0, 2**31 - 1, (1,), generator=generator)) if cfg.route_mode == "random" else 0
        )
        routings: list[Routing] = [
            router.route(
                contents[i],
                style_np,
                budget,
                labels=route_inputs.labels[i],
                inversion_error=route_inputs.inversion_error[i],
                disagreement=route_inputs.disagreement[i],
                mask=None if mask is None else mask[i],
                seed=seed + i,
            )
            for i in range(len(contents))
        ]
        route = torch.from_numpy(np.stack([r.map for r in routings])).float()[:, None]
        labels = torch.from_numpy(np.stack([r.labels for r in routings])).long()
        n_max = max(len(r.region_r) for r in routings)
        region_r = torch.ones(len(routings), n_max)
        for i, r in enumerate(routings):
            region_r[i, : len(r.region_r)] = torch.from_numpy(np.asarray(r.region_r)).float()
        images = self._sample(c, s, route, noise, labels, region_r, callback)
        regions = [r.region_table(cfg.t_min, cfg.t_max) for r in routings]
        return StyleRouteOutput(
            images=to_images(images), routing_map=route[:, 0].numpy(), regions=regions, labels=labels.numpy()
        )

    def _sample(
        self,
        c: torch.Tensor,
        s: torch.Tensor,
        route: torch.Tensor,
        noise: torch.Tensor,
        labels: torch.Tensor,
        region_r: torch.Tensor,
        callback: Callable[..., None] | None,
    ) -> torch.Tensor:
        cfg, den = self.route_config, self.denoiser
        total = den.scheduler.config.num_train_timesteps
        t0 = (cfg.t_min + route * (cfg.t_max - cfg.t_min)) * total  # region-wise start time, in timesteps
        started_ever = t0 > 0
        ts = den.start_timesteps(cfg.num_inference_steps, float(t0.max()) / total)
        ts = ts[ts >= 0]
        if len(ts) == 0 or not bool(started_ever.any()):
            return c.clone()
        init = c + route * (adain(c, s) - c) if cfg.use_adain else c  # StyleID's init AdaIN, weighted by r
        x = den.scheduler.add_noise(init, noise, ts[:1])
        controller = None
        if cfg.attention_injection:
            controller = self._record_attention(c, s, ts, route)
        fixed = self._fixed(c, s, route)
        try:
            for t in ts:
                pending = (t > t0) | ~started_ever
                forward = den.scheduler.add_noise(init, noise, t.reshape(1))
                if bool(pending.any()):
                    x = torch.where(pending, forward, x)
                if callback is not None:
                    callback(int(t), x, pending, forward)
                if controller is not None:
                    controller.set(mode="inject", timestep=int(t), weights=route[:, 0])
                x, _ = self._step(x, t, c, s, route, noise, labels, region_r, guidance=True, fixed=fixed)
        finally:
            if controller is not None:
                controller.__exit__()
        return torch.where(started_ever, x, c)

    def _record_attention(
        self, c: torch.Tensor, s: torch.Tensor, ts: torch.Tensor, route: torch.Tensor
    ) -> InjectionController:
        """Invert style and content once, recording their attention (StyleID); returns the live controller."""
        cfg, den = self.route_config, self.denoiser
        controller = InjectionController(
            self.unet, cfg.attention_gamma, cfg.attention_temperature
        ).__enter__()
        style_crop = _crop_like(s, c).expand_as(c)
        t_start = float(ts[0]) / den.scheduler.config.num_train_timesteps
        for role, image in (("style", style_crop), ("content", c)):
            controller.set(mode="record", role=role)
            ddim_invert(
                den, image, t_start, cfg.num_inference_steps, on_step=lambda t: controller.set(timestep=t)
            )
        return controller


def _crop_like(style: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
    """Centre crop (or tile, if smaller) of ``style (1, 3, h, w)`` to the content's spatial size."""
    h, w = content.shape[-2:]
    reps = (1, 1, -(-h // style.shape[-2]), -(-w // style.shape[-1]))
    tiled = style.repeat(*reps)
    top, left = (tiled.shape[-2] - h) // 2, (tiled.shape[-1] - w) // 2
    return tiled[..., top : top + h, left : left + w]


def save_routing(
    output: StyleRouteOutput, content: np.ndarray, directory: str | Path, index: int = 0
) -> tuple[Path, Path]:
    """Write image ``index``'s routing map as a PNG overlay (content | r in red) and its regions as JSON."""
    from PIL import Image
    from skimage.segmentation import find_boundaries

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    contents = _batch(content, "content")
    r = output.routing_map[index]
    overlay = 0.5 * contents[index] + 0.5 * np.stack([r, np.zeros_like(r), 1 - r], -1)
    if output.labels is not None:
        overlay[find_boundaries(output.labels[index])] = 1.0
    png, js = directory / f"routing_{index}.png", directory / f"routing_{index}.json"
    Image.fromarray(
        (np.clip(np.concatenate([contents[index], overlay], 1), 0, 1) * 255).astype(np.uint8)
    ).save(png)
    js.write_text(json.dumps({"mean_r": float(r.mean()), "regions": output.regions[index]}, indent=1) + "\n")
    return png, js
