"""StyleRoute's per-call fast paths (issue #29 speed) against the straightforward computations they replace.

Each fast path must give the same numbers: the closed-form content gradient (vs autograd), the per-layer
route resampling and the guided-rows-only step (vs the full-batch step with autograd everywhere), the
last probe step without its unused DDIM update, the style caches keyed by pixels, the bincount histograms.
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers.utils.torch_utils import randn_tensor

from neurips26.methods.styleroute.guidance import (
    GuidanceBank,
    adain,
    content_gradient,
    content_loss,
    gram_matrices,
    low_pass,
    luminance_gradients,
    project_conflicts,
    rms_normalise,
    route_weights,
    style_loss,
    style_loss_and_gradient,
    style_targets,
)
from neurips26.methods.styleroute.pipeline import to_tensor
from neurips26.methods.styleroute.router import (
    _STYLE_TILE_CACHE,
    lab_codes,
    region_histograms,
    style_tile_histograms,
)
from tests.methods.styleroute_helpers import images, tiny_pipeline

torch.set_num_threads(1)


def _reference_step(pipe, x, t, content, style, route, noise, labels, region_r):
    """The step as written before the fast paths: full batch, autograd for both gradients, Grams per step."""
    cfg, den = pipe.route_config, pipe.denoiser
    with torch.no_grad():
        output = den(x, t)
    x0 = den.split(output, x, t)[0]
    if float(route.max()) > 0:
        x0_var = x0.detach().requires_grad_(True)
        loss = torch.zeros(x0.shape[0])
        for fx, target in zip(pipe.bank.features(x0_var), style_targets(pipe.bank, style), strict=True):
            loss = loss + ((gram_matrices(fx, route) - target) ** 2).sum((1, 2)) / (target**2).sum()
        g_style = rms_normalise(torch.autograd.grad(loss.sum(), x0_var)[0])
        if labels is not None:
            x0_var = x0.detach().requires_grad_(True)
            g_content = torch.autograd.grad(content_loss(x0_var, content).sum(), x0_var)[0]
            g_style = project_conflicts(g_style, g_content, labels, region_r, cfg.projection_threshold)
        step_size = cfg.guidance_scale * float((1 - den.alpha_bar(t)).sqrt())
        x0 = (x0 - step_size * route * g_style).detach()
        output = den.compose(x0, x, t)
    x = den.scheduler.step(output, t, x).prev_sample
    t_prev = int(t) - den.scheduler.config.num_train_timesteps // den.scheduler.num_inference_steps
    if cfg.use_ilvr and t_prev > cfg.ilvr_until * den.scheduler.config.num_train_timesteps:
        reference = den.scheduler.add_noise(content, noise, torch.tensor([t_prev]))
        x = x - (1 - route) * (low_pass(x, cfg.ilvr_factor) - low_pass(reference, cfg.ilvr_factor))
    return x, x0


def test_closed_form_content_gradient_equals_autograd() -> None:
    g = torch.Generator().manual_seed(0)
    x0, content = (
        torch.randn(2, 3, 13, 17, generator=g, dtype=torch.float64),
        torch.randn(2, 3, 13, 17, generator=g, dtype=torch.float64),
    )
    x0_var = x0.clone().requires_grad_(True)
    autograd = torch.autograd.grad(content_loss(x0_var, content).sum(), x0_var)[0]
    closed = content_gradient(x0, luminance_gradients(content))
    assert float(autograd.abs().max()) > 1.0  # a real gradient, not zeros
    assert torch.allclose(closed, autograd, atol=1e-12)


def test_cached_route_weights_give_the_same_style_loss() -> None:
    bank, g = GuidanceBank(), torch.Generator().manual_seed(1)
    x0, style = torch.randn(2, 3, 36, 28, generator=g), torch.randn(1, 3, 40, 40, generator=g)
    route = torch.rand(2, 1, 36, 28, generator=g)
    plain = style_loss(bank, x0, style, route)
    cached = style_loss(bank, x0, style, route, style_targets(bank, style), route_weights(bank, route))
    assert torch.equal(plain, cached)


def test_closed_form_style_gradient_equals_autograd() -> None:
    bank, g = GuidanceBank(), torch.Generator().manual_seed(3)
    bank._doubled = [w.double() for w in bank._doubled]  # float64: compare the math, not the rounding
    for shape in ((2, 3, 32, 32), (1, 3, 37, 29)):  # odd sides: the pooling drops a row / column
        x0, style = torch.randn(shape, generator=g).double(), torch.randn(1, 3, 40, 40, generator=g).double()
        route = torch.rand(shape[0], 1, *shape[-2:], generator=g).double()
        targets, weights = style_targets(bank, style), route_weights(bank, route)
        x0_var = x0.clone().requires_grad_(True)
        loss = style_loss(bank, x0_var, style, route, targets, weights)
        autograd = torch.autograd.grad(loss.sum(), x0_var)[0]
        closed_loss, closed = style_loss_and_gradient(bank, x0, targets, weights)
        assert float(autograd.abs().max()) > 1e-3
        assert torch.allclose(closed_loss, loss.detach(), rtol=1e-12)
        assert torch.allclose(closed, autograd, rtol=1e-10, atol=1e-14)


def test_fast_step_equals_the_reference_step_with_projection_and_a_zero_route_row() -> None:
    pipe = tiny_pipeline()
    den = pipe.denoiser
    content, style = to_tensor(images(0, batch=3)), to_tensor(images(1))
    g = torch.Generator().manual_seed(2)
    noise = torch.randn(content.shape, generator=g)
    route = torch.rand(3, 1, 32, 32, generator=g)
    route[1] = 0.0  # a protected row: guidance is skipped for it, which must change nothing
    blocks = torch.arange(64).reshape(8, 8).repeat_interleave(4, 0).repeat_interleave(4, 1)
    labels = blocks.expand(3, 32, 32).contiguous()  # 64 square regions of 4x4 px
    region_r = torch.rand(3, 64, generator=g)
    ts = den.start_timesteps(10, 0.45)
    x = den.scheduler.add_noise(content, noise, ts[:1])
    for t in ts[:3]:  # with ILVR (t' > 0.1 T) and guidance
        fast = pipe._step(x, t, content, style, route, noise, labels, region_r, guidance=True)
        reference = _reference_step(pipe, x, t, content, style, route, noise, labels, region_r)
        unprojected = _reference_step(pipe, x, t, content, style, route, noise, None, None)
        assert float((reference[1] - unprojected[1]).abs().max()) > 1e-4  # the projection acts here
        for a, b in zip(fast, reference, strict=True):
            assert torch.allclose(a, b, atol=1e-6)
        x = fast[0]


def test_probes_equal_the_reference_probe_loop() -> None:
    pipe = tiny_pipeline(probe_scale=1)
    cfg, den = pipe.route_config, pipe.denoiser
    content, style = to_tensor(images(3, batch=2)), to_tensor(images(4))
    fast = pipe.probes(content, style, torch.Generator().manual_seed(7))
    noise = randn_tensor(content.shape, generator=torch.Generator().manual_seed(7), dtype=content.dtype)
    ts = den.start_timesteps(cfg.num_inference_steps, cfg.probe_t)[: cfg.probe_steps]
    ones = torch.ones_like(content[:, :1])
    init, route = torch.cat([content, adain(content, style)]), torch.cat([0.0 * ones, ones])
    anchor, noise2 = torch.cat([content, content]), torch.cat([noise, noise])
    x = den.scheduler.add_noise(init, noise2, ts[:1])
    for t in ts:  # every step with its DDIM update and ILVR, the last one's included
        x, x0 = _reference_step(pipe, x, t, anchor, style, route, noise2, None, None)
    reference = (x0[:2] - x0[2:]).abs().mean(1)
    assert float(reference.abs().mean()) > 1e-3
    assert torch.allclose(fast, reference, atol=1e-6)


def test_style_targets_are_cached_by_pixels_not_by_tensor_identity() -> None:
    pipe = tiny_pipeline()
    style = to_tensor(images(5))
    first = pipe._targets(style)
    assert pipe._targets(style.clone()) is first  # a new tensor with the same pixels hits the cache
    changed = style.clone()
    changed[0, 0, 0, 0] += 0.5
    other = pipe._targets(changed)
    assert other is not first and not torch.equal(other[0], first[0])
    for a, b in zip(other, style_targets(pipe.bank, changed), strict=True):
        assert torch.equal(a, b)


def test_style_tile_histograms_cache_and_bincount_histograms_equal_the_direct_counts() -> None:
    style = images(6, size=48)[0]
    _STYLE_TILE_CACHE.clear()
    first = style_tile_histograms(style)
    assert style_tile_histograms(style.copy()) is first
    codes, tile = lab_codes(style), 8
    direct = np.stack(
        [
            np.bincount(codes[i : i + tile, j : j + tile].reshape(-1), minlength=216) / tile**2
            for i in range(0, 48, tile)
            for j in range(0, 48, tile)
        ]
    )
    assert np.array_equal(first, direct)
    changed = style.copy()
    changed[:8, :8] = 1.0 - changed[:8, :8]
    assert not np.array_equal(style_tile_histograms(changed), first)
    rng = np.random.default_rng(0)
    labels, values = rng.integers(0, 5, (12, 12)), rng.integers(0, 10, (12, 12))
    naive = np.zeros((5, 10))
    np.add.at(naive, (labels.reshape(-1), values.reshape(-1)), 1.0)
    assert np.array_equal(region_histograms(labels, values, 5, 10), naive)
