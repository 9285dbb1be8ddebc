"""The "where" of StyleRoute: a region-level routing variable r in [0, 1] (0 protect, 1 inject).

Per SLIC region R (Achanta et al. 2012, skimage) of the content image:

- structure confidence  S_R = mean z( coherence x gradient energy, Canny edge density, DDIM-inversion error )
- texture confidence    T_R = mean z( LBP-histogram entropy, high-frequency ratio, style compatibility )
- route disagreement    D_R = z( mean |x0_protect - x0_inject| over R )  (computed by the pipeline's probes)

with z the rank-normalisation over the image's regions (robust to a few extreme regions), then

    r_R = sigmoid(a T_R - b S_R - c D_R + d),

smoothed over the region adjacency graph (k steps of r <- (1 - rate) r + rate * neighbour mean) and
feathered to a pixel map r(x) by Gaussian-blurring each region's indicator. The bias d is solved by bisection
so that the mean of r(x) equals the caller's ``budget`` (budget 0 and 1 give r = 0 and r = 1 exactly).
A user mask overrides r(x) wherever it is finite.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import gaussian_filter

from neurips26.methods.styleroute.config import StyleRouteConfig
from neurips26.methods.styleroute.validation import check_budget, check_image, check_mask


def _zscore(values: np.ndarray) -> np.ndarray:
    """Rank-normalise ``values`` over the image's regions (zero mean, unit variance; robust to outliers)."""
    from scipy.stats import rankdata

    if values.size < 2 or np.ptp(values) < 1e-12:
        return np.zeros_like(values, dtype=float)
    ranks = rankdata(values)
    return (ranks - ranks.mean()) / ranks.std()


def region_means(values: np.ndarray, labels: np.ndarray, n_regions: int) -> np.ndarray:
    """Mean of a pixel map ``(H, W)`` over each label ``0..n_regions-1`` (vectorised with bincount)."""
    flat = labels.reshape(-1)
    counts = np.bincount(flat, minlength=n_regions)
    return np.bincount(flat, values.reshape(-1), minlength=n_regions) / np.maximum(counts, 1)


def region_histograms(labels: np.ndarray, codes: np.ndarray, n_regions: int, n_bins: int) -> np.ndarray:
    """Counts ``(R, n_bins)`` of integer ``codes`` per region (one bincount over label * n_bins + code)."""
    flat = labels.reshape(-1).astype(np.int64) * n_bins + codes.reshape(-1)
    return np.bincount(flat, minlength=n_regions * n_bins).reshape(n_regions, n_bins).astype(float)


_LAB_BINS = np.linspace(-1, 1, 7)
_STYLE_TILE_CACHE: dict[bytes, np.ndarray] = {}


def lab_codes(image: np.ndarray) -> np.ndarray:
    """Each pixel's bin ``0..215`` of a 6x6x6 Lab histogram (L/50 - 1, a/64, b/64 on 6 bins of [-1, 1])."""
    from skimage.color import rgb2lab

    lab = rgb2lab(image) / np.array([50.0, 64.0, 64.0]) - np.array([1.0, 0.0, 0.0])
    q = np.clip(np.digitize(lab, _LAB_BINS) - 1, 0, 5)
    return q[..., 0] * 36 + q[..., 1] * 6 + q[..., 2]


def style_tile_histograms(style: np.ndarray) -> np.ndarray:
    """Normalised 216-bin Lab histograms ``(tiles, 216)`` of the style's tiles (side ``max(8, h // 6)``).

    They depend on the style alone, so they are cached by a digest of its pixels (at most 8 styles).
    """
    style = np.ascontiguousarray(style)
    key = hashlib.blake2b(repr((style.shape, style.dtype.str)).encode() + style.tobytes()).digest()
    if key not in _STYLE_TILE_CACHE:
        tile = max(8, style.shape[0] // 6)
        s_codes = lab_codes(style)
        tiles = [
            s_codes[i : i + tile, j : j + tile].reshape(-1)
            for i in range(0, style.shape[0] - tile + 1, tile)
            for j in range(0, style.shape[1] - tile + 1, tile)
        ]
        if len(_STYLE_TILE_CACHE) >= 8:
            _STYLE_TILE_CACHE.pop(next(iter(_STYLE_TILE_CACHE)))
        _STYLE_TILE_CACHE[key] = np.stack([np.bincount(t, minlength=216) / len(t) for t in tiles])
    return _STYLE_TILE_CACHE[key]


def region_adjacency(labels: np.ndarray, n_regions: int) -> np.ndarray:
    """Symmetric 0/1 adjacency ``(R, R)`` of 4-connected regions (the region adjacency graph's edges)."""
    adjacency = np.zeros((n_regions, n_regions))
    for a, b in ((labels[:, :-1], labels[:, 1:]), (labels[:-1, :], labels[1:, :])):
        diff = a != b
        adjacency[a[diff], b[diff]] = 1.0
    return np.maximum(adjacency, adjacency.T)


@dataclass
class Routing:
    """One image's routing: the pixel map, the regions and their diagnostics.

    Attributes
    ----------
    map: ``(H, W)`` float in [0, 1]; 1 = inject texture, 0 = protect structure.
    labels: ``(H, W)`` int region labels ``0..R-1``.
    region_r: ``(R,)`` routing value per region after smoothing (before feathering and the user mask).
    structure, texture, disagreement: ``(R,)`` the confidences S, T, D (z-scored).
    bias: the solved d.
    """

    map: np.ndarray
    labels: np.ndarray
    region_r: np.ndarray
    structure: np.ndarray
    texture: np.ndarray
    disagreement: np.ndarray
    bias: float
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    def region_table(self, t_min: float, t_max: float) -> list[dict[str, float]]:
        """Per-region JSON rows: S, T, D, r and start time t0 = t_min + r (t_max - t_min)."""
        n = len(self.region_r)
        mean_r = region_means(self.map, self.labels, n)
        size = np.bincount(self.labels.reshape(-1), minlength=n)
        return [
            {
                "region": int(i),
                "pixels": int(size[i]),
                "S": float(self.structure[i]),
                "T": float(self.texture[i]),
                "D": float(self.disagreement[i]),
                "r": float(mean_r[i]),
                "start_time": float(t_min + mean_r[i] * (t_max - t_min)),
            }
            for i in range(n)
        ]


class RegionRouter:
    """Decide per SLIC region whether to protect structure or inject texture (StyleRoute's "where").

    Parameters
    ----------
    config: :class:`StyleRouteConfig` (``n_segments``, ``weight_*``, ``smoothing_*``, ``feather_sigma``,
        ``route_mode``).

    ``route_mode``: ``full`` (S, T, D), ``structure`` (S only), ``no_disagreement`` (S, T), ``uniform``
    (r = budget everywhere) and ``random`` (the full r values shuffled over regions: same amount of
    stylisation, wrong places; the negative control).
    """

    def __init__(self, config: StyleRouteConfig | None = None) -> None:
        self.config = config or StyleRouteConfig()

    def segment(self, content: np.ndarray) -> np.ndarray:
        """SLIC labels ``(H, W)`` of ``content (H, W, 3)``, relabelled to ``0..R-1``."""
        from skimage.segmentation import slic

        content = check_image(content, "content")
        labels = slic(
            content,
            n_segments=self.config.n_segments,
            compactness=self.config.compactness,
            start_label=0,
            channel_axis=2,
        )
        return np.unique(labels, return_inverse=True)[1].reshape(labels.shape)

    def structure_maps(self, content: np.ndarray) -> dict[str, np.ndarray]:
        """Pixel maps of structure evidence: coherence x gradient energy and Canny edges (sigma 1)."""
        from skimage.feature import canny, structure_tensor, structure_tensor_eigenvalues

        gray = content.mean(2)
        tensor = structure_tensor(gray, sigma=1.0, order="rc")
        l1, l2 = structure_tensor_eigenvalues(tensor)
        energy = l1 + l2
        coherence = ((l1 - l2) / (energy + 1e-8)) ** 2
        # coherence x energy, damped where the image is flat (energy well below its mean)
        coherent_energy = coherence * energy / (energy + energy.mean() + 1e-8)
        # edges count as structure when they are coherent (noise makes incoherent Canny edges)
        coherent_edges = canny(gray, sigma=1.0) * coherence
        return {"coherent_energy": coherent_energy, "edges": coherent_edges}

    def texture_features(
        self, content: np.ndarray, style: np.ndarray, labels: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Per-region LBP entropy, high-frequency energy ratio and compatibility with the style."""
        from skimage.feature import local_binary_pattern

        n = int(labels.max()) + 1
        gray = content.mean(2)
        codes = local_binary_pattern((gray * 255).astype(np.uint8), 8, 1, method="uniform").astype(int)
        hist = region_histograms(labels, codes, n, 10)
        p = hist / np.maximum(hist.sum(1, keepdims=True), 1)
        entropy = -(p * np.log(np.where(p > 0, p, 1))).sum(1)
        high = gray - gaussian_filter(gray, 1.5)
        # fine-scale energy against coarse-scale (sigma 2) gradient energy: ~1 for texture, low for edges and
        # flat regions (an edge keeps its gradient after smoothing, texture does not)
        gy, gx = np.gradient(gaussian_filter(gray, 2.0))
        fine = region_means(high**2, labels, n)
        hf_ratio = fine / (fine + 4.0 * region_means(gx**2 + gy**2, labels, n) + 1e-4)
        # style compatibility: -min chi^2 between the region's Lab histogram and the style's tiles' histograms
        region_hist = region_histograms(labels, lab_codes(content), n, 216)
        region_hist /= region_hist.sum(1, keepdims=True)
        tile_hist = style_tile_histograms(style)
        num = (region_hist[:, None] - tile_hist[None]) ** 2
        chi2 = (num / (region_hist[:, None] + tile_hist[None] + 1e-12)).sum(2) / 2
        return {"lbp_entropy": entropy, "high_frequency": hf_ratio, "style_compatibility": -chi2.min(1)}

    def route(
        self,
        content: np.ndarray,
        style: np.ndarray,
        budget: float,
        *,
        labels: np.ndarray | None = None,
        inversion_error: np.ndarray | None = None,
        disagreement: np.ndarray | None = None,
        mask: np.ndarray | None = None,
        seed: int = 0,
    ) -> Routing:
        """The routing of one content image.

        Parameters
        ----------
        content, style: float ``(H, W, 3)`` in [0, 1] (style of any size >= 32 px).
        budget: target mean of r(x) in [0, 1].
        labels: precomputed SLIC labels (else :meth:`segment`).
        inversion_error, disagreement: pixel maps ``(H, W)`` from the pipeline (skipped when None).
        mask: optional ``(H, W)`` user override: finite values in [0, 1] replace r(x); NaN keeps it.
        seed: seeds the region shuffle of ``route_mode="random"``.
        """
        cfg = self.config
        content = check_image(content, "content")
        style = check_image(style, "style")
        budget = check_budget(budget)
        labels = self.segment(content) if labels is None else labels
        n = int(labels.max()) + 1
        maps = self.structure_maps(content)
        s_parts = [_zscore(region_means(maps[k], labels, n)) for k in ("coherent_energy", "edges")]
        if inversion_error is not None and cfg.use_inversion_error:
            s_parts.append(_zscore(region_means(inversion_error, labels, n)))
        texture = self.texture_features(content, style, labels)
        S = np.mean(s_parts, 0)
        T = np.mean([_zscore(v) for v in texture.values()], 0)
        D = _zscore(region_means(disagreement, labels, n)) if disagreement is not None else np.zeros(n)
        a, b, c = cfg.weight_texture, cfg.weight_structure, cfg.weight_disagreement
        if cfg.route_mode == "structure":
            a, c = 0.0, 0.0
        elif cfg.route_mode == "no_disagreement":
            c = 0.0
        logits = a * T - b * S - c * D  # r_R = sigmoid(logits + d)
        adjacency = region_adjacency(labels, n)
        smoother = self._smoother(adjacency)
        basis = self._feather_basis(labels, n)  # (R, H, W) feathered indicators, rows sum to 1 per pixel
        weights = basis.reshape(n, -1).mean(1)  # mean of r(x) = weights . (smoother @ r)
        permutation = np.random.default_rng(seed).permutation(n) if cfg.route_mode == "random" else None

        def region_values(d: float) -> np.ndarray:
            if cfg.route_mode == "uniform":
                return np.full(n, budget)
            r = 1.0 / (1.0 + np.exp(-(logits + d)))
            return smoother @ r

        if budget in (0.0, 1.0):
            d, region_r = (np.inf if budget else -np.inf), np.full(n, budget)
        else:
            d = self._solve_bias(lambda d: float(weights @ region_values(d)), budget)
            region_r = region_values(d)
        if permutation is not None:
            region_r = region_r[permutation]
        pixel = np.tensordot(region_r, basis, axes=1)
        pixel = np.clip(pixel, 0.0, 1.0)
        if budget in (0.0, 1.0):
            pixel = np.full(labels.shape, budget)
        if mask is not None:
            mask = check_mask(mask, labels.shape)
            pixel = np.where(np.isfinite(mask), mask, pixel)
        return Routing(pixel, labels, region_r, S, T, D, float(d), extras={**maps})

    def _smoother(self, adjacency: np.ndarray) -> np.ndarray:
        n = len(adjacency)
        degree = adjacency.sum(1, keepdims=True)
        neighbour_mean = np.where(degree > 0, adjacency / np.maximum(degree, 1), np.eye(n))
        step = (1 - self.config.smoothing_rate) * np.eye(n) + self.config.smoothing_rate * neighbour_mean
        return np.linalg.matrix_power(step, self.config.smoothing_steps)

    def _feather_basis(self, labels: np.ndarray, n: int) -> np.ndarray:
        onehot = (labels[None] == np.arange(n)[:, None, None]).astype(float)
        if self.config.feather_sigma > 0:
            onehot = gaussian_filter(
                onehot, (0, self.config.feather_sigma, self.config.feather_sigma), mode="nearest"
            )
        return onehot / onehot.sum(0, keepdims=True)

    @staticmethod
    def _solve_bias(mean_of: object, budget: float, iterations: int = 50) -> float:
        lo, hi = -30.0, 30.0
        for _ in range(iterations):  # mean r is increasing in d
            mid = (lo + hi) / 2
            if mean_of(mid) < budget:  # type: ignore[operator]
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2
