"""The "how" of StyleRoute on plain tensors: AdaIN, style and content losses, conflict projection, low-pass.

Images here are ``(B, 3, H, W)`` tensors in [-1, 1]; routing maps ``(B, 1, H, W)`` in [0, 1].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

GUIDANCE_BANK_SEED = 1_234


class GuidanceBank(nn.Module):
    """The fixed random conv bank whose Gram matrices guide style (never used for evaluation).

    Two 3x3 layers then one 5x5 layer (widths 16/32/48), tanh, 2x average pooling between layers
    (random shallow nets capture texture statistics: Ustyuzhaninov et al., ICLR 2017).
    """

    def __init__(self, seed: int = GUIDANCE_BANK_SEED) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        shapes = ((16, 3, 3), (32, 16, 3), (48, 32, 5))
        self.weights = [
            torch.randn((o, i, k, k), generator=generator) * (1.0 / (i * k * k)) ** 0.5 for o, i, k in shapes
        ]
        # tanh(2 conv(h, w)) = tanh(conv(h, 2 w)) exactly (scaling by 2 is exact in floating point), one
        # elementwise op and its backward less per layer
        self._doubled = [2.0 * w for w in self.weights]

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The bank's activations ``tanh(2 conv(h, w))`` per layer (2x average pooling between layers)."""
        feats, h = [], x
        for index, w in enumerate(self._doubled):
            if index:
                h = F.avg_pool2d(h, 2)
            h = torch.tanh(F.conv2d(h, w, padding=w.shape[-1] // 2))
            feats.append(h)
        return feats


def layer_weights(weight: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A routing map ``(B, 1, H, W)`` resampled (bilinear) to a feature grid ``size``: ``(B, 1, h * w)``."""
    b = weight.shape[0]
    return F.interpolate(weight, size=size, mode="bilinear", align_corners=False).reshape(b, 1, -1)


def gram_matrices(
    features: torch.Tensor, weight: torch.Tensor | None = None, flat_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Gram ``(B, C, C)`` of ``(B, C, H, W)`` features, optionally weighted per position ``(B, 1, H, W)``.

    ``flat_weight``: the weight already resampled by :func:`layer_weights` (takes precedence).
    """
    b, c, h, w = features.shape
    flat = features.reshape(b, c, h * w)
    if weight is None and flat_weight is None:
        return flat @ flat.transpose(1, 2) / (h * w)
    wf = layer_weights(weight, (h, w)) if flat_weight is None else flat_weight
    return (flat * wf) @ flat.transpose(1, 2) / wf.sum(-1, keepdim=True).clamp_min(1e-6)


def style_targets(bank: GuidanceBank, style: torch.Tensor) -> list[torch.Tensor]:
    """The style's Gram matrix per bank layer, ``(1, C, C)`` each (computed once per sampling run)."""
    with torch.no_grad():
        return [gram_matrices(fs).mean(0, keepdim=True) for fs in bank.features(style)]


def style_loss(
    bank: GuidanceBank,
    x0: torch.Tensor,
    style: torch.Tensor,
    route: torch.Tensor,
    targets: list[torch.Tensor] | None = None,
    weights: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Sum over layers of ||G_r(x0) - G(style)||^2 / ||G(style)||^2 (x0's Gram weighted by r): ``(B,)``.

    ``targets``: the style's Grams from :func:`style_targets` (recomputed from ``style`` when None);
    ``weights``: ``route`` per layer from :func:`route_weights` (resampled here when None).
    """
    targets = style_targets(bank, style) if targets is None else targets
    loss = x0.new_zeros(x0.shape[0])
    for index, (fx, target) in enumerate(zip(bank.features(x0), targets, strict=True)):
        flat_weight = None if weights is None else weights[index]
        gram = gram_matrices(fx, route, flat_weight=flat_weight)
        loss = loss + ((gram - target) ** 2).sum((1, 2)) / (target**2).sum()
    return loss


def style_loss_and_gradient(
    bank: GuidanceBank, x0: torch.Tensor, targets: list[torch.Tensor], weights: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`style_loss` ``(B,)`` and its gradient ``d sum(loss) / d x0``, the bank's backward written out.

    Per layer, with F the flattened features, w the resampled route, S = sum(w), G = (F w) F^T / S and
    n = ||G(style)||^2: dL/dF = 2 (D + D^T) (F w) / (n S), D = G - G(style); then through tanh
    (1 - f^2), the conv (its adjoint, ``conv_transpose2d`` with the same weights and padding) and the 2x
    average pooling (1/4 of the gradient to each pixel of a kept window). Equal to autograd within float
    rounding (tested); without the autograd graph it runs the convolutions on the fast no-grad kernels.
    ``targets`` from :func:`style_targets`, ``weights`` from :func:`route_weights`.
    """
    with torch.no_grad():
        feats = bank.features(x0)
        loss = x0.new_zeros(x0.shape[0])
        grad_next: torch.Tensor | None = None
        for index in reversed(range(len(feats))):
            f, target, wf = feats[index], targets[index], weights[index]
            b, c, hh, ww = f.shape
            flat = f.reshape(b, c, hh * ww)
            weighted = flat * wf
            total = wf.sum(-1, keepdim=True).clamp_min(1e-6)
            diff = weighted @ flat.transpose(1, 2) / total - target
            norm = (target**2).sum()
            loss = loss + (diff**2).sum((1, 2)) / norm
            grad_f = ((diff + diff.transpose(1, 2)) @ weighted * (2.0 / norm) / total).reshape(b, c, hh, ww)
            if grad_next is not None:
                grad_f = grad_f + grad_next
            w = bank._doubled[index]
            grad_in = F.conv_transpose2d(grad_f * (1 - f * f), w, padding=w.shape[-1] // 2)
            if index == 0:
                return loss, grad_in
            height, width = feats[index - 1].shape[-2:]
            up = F.interpolate(grad_in * 0.25, scale_factor=2, mode="nearest")
            grad_next = F.pad(up, (0, width - up.shape[-1], 0, height - up.shape[-2]))
    raise ValueError("the guidance bank has no layers")


def route_weights(bank: GuidanceBank, route: torch.Tensor) -> list[torch.Tensor]:
    """``route`` resampled to every bank layer's grid (:func:`layer_weights`), for :func:`style_loss`.

    The routing map is fixed during sampling, so its per-layer resampling is done once per call.
    """
    h, w = route.shape[-2:]
    sizes = []
    for index in range(len(bank.weights)):
        if index:  # avg_pool2d(2) floors each side
            h, w = h // 2, w // 2
        sizes.append((h, w))
    return [layer_weights(route, size) for size in sizes]


def luminance_gradients(x: torch.Tensor) -> torch.Tensor:
    """Finite-difference gradients of the luminance: ``(B, 3, H, W) -> (B, 2, H, W)``."""
    lum = x.mean(1, keepdim=True)
    gx = F.pad(lum[..., :, 1:] - lum[..., :, :-1], (0, 1, 0, 0))
    gy = F.pad(lum[..., 1:, :] - lum[..., :-1, :], (0, 0, 0, 1))
    return torch.cat([gx, gy], 1)


def content_loss(x0: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
    """Gradient-domain structure loss ``sum ||grad lum(x0) - grad lum(c)||^2``: ``(B,)``."""
    return ((luminance_gradients(x0) - luminance_gradients(content)) ** 2).sum((1, 2, 3))


def content_gradient(x0: torch.Tensor, content_gradients: torch.Tensor) -> torch.Tensor:
    """The gradient of :func:`content_loss` with respect to ``x0``, in closed form: ``(B, 3, H, W)``.

    ``content_gradients`` is ``luminance_gradients(content)`` (fixed during sampling). With the residual
    e = grad lum(x0) - grad lum(c), the gradient is 2 D^T e / 3 on every channel, D the forward
    differences of :func:`luminance_gradients` (zero in the padded last column / row). Equal to
    autograd's within float rounding (tested); it replaces a backward pass per step.
    """
    e = luminance_gradients(x0) - content_gradients
    ex, ey = e[:, :1, :, :-1], e[:, 1:, :-1, :]  # the padded last column / row carry no gradient
    dx = F.pad(ex, (1, 0, 0, 0)) - F.pad(ex, (0, 1, 0, 0))  # D_x^T e_x
    dy = F.pad(ey, (0, 0, 1, 0)) - F.pad(ey, (0, 0, 0, 1))
    return ((2.0 / 3.0) * (dx + dy)).expand_as(x0)


def adain(content: torch.Tensor, style: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """AdaIN (Huang & Belongie 2017): content's per-channel statistics replaced by the style's."""
    cm, cs = content.mean((2, 3), keepdim=True), content.std((2, 3), keepdim=True)
    sm, ss = style.mean((2, 3), keepdim=True), style.std((2, 3), keepdim=True)
    return (content - cm) / (cs + eps) * ss + sm


def project_conflicts(
    g_style: torch.Tensor,
    g_content: torch.Tensor,
    labels: torch.Tensor,
    region_r: torch.Tensor,
    threshold: float = 0.5,
) -> torch.Tensor:
    """PCGrad-style surgery (Yu et al., NeurIPS 2020) per region.

    In every region R with r_R < ``threshold`` where <g_s, g_c>_R < 0, replace g_s on R by
    g_s - <g_s, g_c>_R / ||g_c||_R^2 g_c, so the projected style gradient never opposes the content one.

    Parameters
    ----------
    g_style, g_content: ``(B, C, H, W)``.
    labels: ``(B, H, W)`` long region labels ``0..R-1``.
    region_r: ``(B, R)`` routing value per region.
    """
    b, _, h, w = g_style.shape
    n = region_r.shape[1]
    idx = labels.reshape(b, h * w)
    dot = torch.zeros(b, n, dtype=g_style.dtype).scatter_add_(
        1, idx, (g_style * g_content).sum(1).reshape(b, -1)
    )
    norm = torch.zeros(b, n, dtype=g_style.dtype).scatter_add_(1, idx, (g_content**2).sum(1).reshape(b, -1))
    conflict = (dot < 0) & (region_r < threshold) & (norm > 0)
    coef = torch.where(conflict, dot / norm.clamp_min(1e-20), torch.zeros_like(dot))
    coef_map = coef.gather(1, idx).reshape(b, 1, h, w)
    return g_style - coef_map * g_content


def low_pass(x: torch.Tensor, factor: int) -> torch.Tensor:
    """ILVR's phi_N: average-pool by ``factor`` then bilinear upsampling to the input size."""
    if factor <= 1:
        return x
    small = F.avg_pool2d(x, factor, ceil_mode=True, count_include_pad=False)
    return F.interpolate(small, size=x.shape[-2:], mode="bilinear", align_corners=False)


def rms_normalise(g: torch.Tensor) -> torch.Tensor:
    """Scale each image's gradient to unit RMS (so ``guidance_scale`` is in image units)."""
    return g / g.pow(2).mean((1, 2, 3), keepdim=True).sqrt().clamp_min(1e-12)
