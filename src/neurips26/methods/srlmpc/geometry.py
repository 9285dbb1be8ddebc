"""Convex shapes, their support functions and the geometric separation features (GSFs) of SRL-MPC.

Every body is a convex set ``K = P (+) E``: a convex polygon ``P`` (possibly a single point) plus an
ellipse ``E = {S^(1/2) z : |z| <= 1}`` (possibly a point). A disc of radius r is ``S = r^2 I``, a polygon
has ``S = 0``. The support function of a Minkowski sum is the sum of the support functions, so

    h_K(n) = max_v v . n + sqrt(n^T S n)                                   (support function)

and for bodies i, j at positions p_i, p_j and a unit normal n (paper's "support-function transformation")

    s_ij(n) = n . (p_j - p_i) - h_Ki(n) - h_Kj(-n),      s* = max_{|n|=1} s_ij(n)          (GSF)

``s*`` is the signed distance between the two bodies (the distance when they are apart, minus the
penetration depth when they overlap): ``d = p_j - p_i`` against the Minkowski difference ``Ki (+) (-Kj)``.
Every ``s_ij(n)`` is a lower bound of ``s*`` (weak duality), which is what makes a frozen normal
conservative in the MPC.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.methods.srlmpc.geometry_kernel import (
    HAVE_NUMBA,
    polygon_signed_distance,
    polygon_support_widths,
)

SHAPE_KINDS = ("polygon", "rectangle", "ellipse", "disc")
_ANGLE_GRID = 32  # coarse angle search for pairs with an anisotropic ellipse (then golden-section)
_GOLDEN_ITERS = 16
_ANGLE_BRACKETS = 3  # grid maxima refined: s(n) has several local maxima when shapes overlap
_GOLDEN_RATIO = (np.sqrt(5.0) - 1.0) / 2.0
# How far (radians) the refined angle can lie from a smooth maximum of s(n) inside its bracket: the bracket
# starts 2 grid steps wide and each golden-section iteration keeps a fraction _GOLDEN_RATIO of it.
ANGLE_SEARCH_RESOLUTION = (2 * np.pi / _ANGLE_GRID) * _GOLDEN_RATIO**_GOLDEN_ITERS


@dataclass(frozen=True)
class ConvexShape:
    """A convex body shape in its own frame, centred at the origin: polygon (+) ellipse.

    Parameters
    ----------
    kind : one of ``SHAPE_KINDS`` (``rectangle`` is a polygon, ``disc`` an isotropic ellipse).
    vertices : (V, 2) counter-clockwise polygon vertices (one zero vertex for curved shapes).
    ellipse : (2, 2) symmetric PSD matrix ``S`` of the ellipse part (zero for polygons).
    """

    kind: str
    vertices: np.ndarray
    ellipse: np.ndarray

    @property
    def isotropic(self) -> bool:
        """True when the ellipse part is a disc or a point (exact GSFs without an angle search)."""
        s = self.ellipse
        return bool(abs(s[0, 1]) < 1e-12 and abs(s[0, 0] - s[1, 1]) < 1e-12)

    def support(self, normals: np.ndarray) -> np.ndarray:
        """h_K(n) for normals of shape (..., 2)."""
        normals = np.asarray(normals, dtype=float)
        poly = (normals @ self.vertices.T).max(axis=-1)
        quad = np.einsum("...i,ij,...j->...", normals, self.ellipse, normals)
        return poly + np.sqrt(np.maximum(quad, 0.0))

    def circumradius(self) -> float:
        """Radius of the smallest origin-centred disc containing the shape (the circle baselines' disc)."""
        poly = float(np.linalg.norm(self.vertices, axis=1).max())
        return poly + float(np.sqrt(np.linalg.eigvalsh(self.ellipse).max().clip(min=0.0)))

    def rotated(self, angle: float) -> ConvexShape:
        """The same shape rotated by ``angle`` radians."""
        c, s = np.cos(angle), np.sin(angle)
        rot = np.array([[c, -s], [s, c]])
        return ConvexShape(self.kind, self.vertices @ rot.T, rot @ self.ellipse @ rot.T)

    def boundary(self, n_points: int = 64) -> np.ndarray:
        """(M, 2) boundary points (exact for polygons; a fine polygon for curved shapes)."""
        if self.kind in ("polygon", "rectangle"):
            return self.vertices.copy()
        theta = np.linspace(0.0, 2 * np.pi, n_points, endpoint=False)
        circle = np.stack([np.cos(theta), np.sin(theta)], axis=1)
        root = _psd_sqrt(self.ellipse)
        return circle @ root.T


def _psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def polygon(vertices: np.ndarray, index: int | None = None) -> ConvexShape:
    """A convex polygon shape from (V, 2) vertices (any orientation; re-centred on its centroid).

    Raises ``ValueError`` naming the shape ``index`` for non-convex or degenerate input.
    """
    where = f"shape {index}" if index is not None else "polygon"
    vertices = np.asarray(vertices, dtype=float)
    if vertices.ndim != 2 or vertices.shape[1] != 2 or len(vertices) < 3:
        raise ValueError(f"{where}: vertices must have shape (V >= 3, 2), got {vertices.shape}")
    if not np.all(np.isfinite(vertices)):
        raise ValueError(f"{where}: vertices must be finite")
    edges = np.roll(vertices, -1, axis=0) - vertices
    area2 = float(
        np.sum(vertices[:, 0] * np.roll(vertices[:, 1], -1) - np.roll(vertices[:, 0], -1) * vertices[:, 1])
    )
    if abs(area2) < 1e-9 or np.any(np.linalg.norm(edges, axis=1) < 1e-9):
        raise ValueError(
            f"{where} is degenerate (zero area or repeated vertices); pass distinct vertices of a "
            "polygon with positive area"
        )
    if area2 < 0:  # clockwise: reverse to counter-clockwise
        vertices = vertices[::-1]
        edges = np.roll(vertices, -1, axis=0) - vertices
    cross = edges[:, 0] * np.roll(edges[:, 1], -1) - edges[:, 1] * np.roll(edges[:, 0], -1)
    if np.any(cross < -1e-9):
        bad = int(np.argmin(cross))
        raise ValueError(
            f"{where} is not convex (it turns the other way at vertex {(bad + 1) % len(vertices)}); "
            "pass its convex hull, e.g. shapely.MultiPoint(vertices).convex_hull"
        )
    centroid = _polygon_centroid(vertices)
    return ConvexShape("polygon", vertices - centroid, np.zeros((2, 2)))


def _polygon_centroid(vertices: np.ndarray) -> np.ndarray:
    x, y = vertices[:, 0], vertices[:, 1]
    xn, yn = np.roll(x, -1), np.roll(y, -1)
    cross = x * yn - xn * y
    area = cross.sum() / 2.0
    return np.array([((x + xn) * cross).sum(), ((y + yn) * cross).sum()]) / (6.0 * area)


def rectangle(width: float, height: float) -> ConvexShape:
    """An axis-aligned rectangle ``width x height`` centred at the origin."""
    if width <= 0 or height <= 0:
        raise ValueError(f"rectangle width and height must be > 0, got {width}, {height}")
    w, h = width / 2, height / 2
    shape = polygon(np.array([[-w, -h], [w, -h], [w, h], [-w, h]]))
    return ConvexShape("rectangle", shape.vertices, shape.ellipse)


def ellipse(a: float, b: float) -> ConvexShape:
    """An axis-aligned ellipse with semi-axes ``a`` (x) and ``b`` (y)."""
    if a <= 0 or b <= 0:
        raise ValueError(f"ellipse semi-axes must be > 0, got a={a}, b={b}")
    return ConvexShape("ellipse", np.zeros((1, 2)), np.diag([a * a, b * b]))


def disc(radius: float) -> ConvexShape:
    """A disc of ``radius``."""
    if radius <= 0:
        raise ValueError(f"disc radius must be > 0, got {radius}")
    return ConvexShape("disc", np.zeros((1, 2)), np.eye(2) * radius * radius)


def random_convex_polygon(rng: np.random.Generator, radius: float, n_vertices: int = 6) -> ConvexShape:
    """A random convex polygon inscribed in a circle of ``radius`` (sorted random angles)."""
    angles = np.sort(rng.uniform(0, 2 * np.pi, n_vertices))
    radii = radius * rng.uniform(0.6, 1.0, n_vertices)
    points = np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1)
    hull = _convex_hull(points)
    if len(hull) < 3:
        return rectangle(radius, radius)
    return polygon(hull)


def _cross(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def _convex_hull(points: np.ndarray) -> np.ndarray:
    """Monotone-chain convex hull (counter-clockwise), for generating random shapes."""
    pts = points[np.lexsort((points[:, 1], points[:, 0]))]

    def half(seq: np.ndarray) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for p in seq:
            while len(out) >= 2 and _cross(out[-1] - out[-2], p - out[-2]) <= 1e-12:
                out.pop()
            out.append(p)
        return out

    lower, upper = half(pts), half(pts[::-1])
    return np.array(lower[:-1] + upper[:-1])


def circumscribed_disc(shape: ConvexShape) -> ConvexShape:
    """The bounding disc the circle baselines (ORCA, social force, MPC-CBF) see."""
    return disc(shape.circumradius())


@dataclass(frozen=True)
class ShapeBatch:
    """N shapes stacked for vectorised support functions (padded by repeating the first edge).

    Attributes
    ----------
    vertices : (N, V, 2) polygon-part vertices; edge_start, edge_end : (N, V, 2) polygon edges;
    normals : (N, V, 2) their outward unit normals; ellipse : (N, 2, 2) ellipse parts;
    radius : (N,) radius of an isotropic ellipse part (0 for polygons); isotropic : (N,) bool.
    """

    shapes: tuple[ConvexShape, ...]
    vertices: np.ndarray
    edge_start: np.ndarray
    edge_end: np.ndarray
    normals: np.ndarray
    ellipse: np.ndarray
    radius: np.ndarray
    isotropic: np.ndarray

    @classmethod
    def from_shapes(cls, shapes: list[ConvexShape] | tuple[ConvexShape, ...]) -> ShapeBatch:
        if len(shapes) == 0:
            raise ValueError("shapes must hold at least one shape")
        width = max(len(s.vertices) for s in shapes)
        n = len(shapes)
        vertices, start, end = np.zeros((n, width, 2)), np.zeros((n, width, 2)), np.zeros((n, width, 2))
        normals = np.zeros((n, width, 2))
        normals[..., 0] = 1.0
        for i, shape in enumerate(shapes):
            v = shape.vertices
            vertices[i, : len(v)] = v
            vertices[i, len(v) :] = v[0]
            if len(v) >= 3:
                nxt = np.roll(v, -1, axis=0)
                edges = nxt - v
                outward = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
                outward /= np.linalg.norm(outward, axis=1, keepdims=True)
                start[i, : len(v)], end[i, : len(v)], normals[i, : len(v)] = v, nxt, outward
                start[i, len(v) :], end[i, len(v) :], normals[i, len(v) :] = v[0], nxt[0], outward[0]
            else:
                start[i], end[i] = v[0], v[0]
        ellipses = np.stack([s.ellipse for s in shapes])
        isotropic = np.array([s.isotropic for s in shapes])
        radius = np.where(isotropic, np.sqrt(np.clip(ellipses[:, 0, 0], 0.0, None)), 0.0)
        return cls(tuple(shapes), vertices, start, end, normals, ellipses, radius, isotropic)

    def __len__(self) -> int:
        return len(self.shapes)


def support(vertices: np.ndarray, ellipse_mat: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Vectorised h_K(n): vertices (P, V, 2), ellipse (P, 2, 2), normals (P, C, 2) -> (P, C)."""
    poly = np.matmul(normals, vertices.transpose(0, 2, 1)).max(axis=-1)  # max_v v . n
    if not ellipse_mat.any():
        return poly
    quad = (np.matmul(normals, ellipse_mat) * normals).sum(axis=-1)  # n^T S n
    return poly + np.sqrt(np.maximum(quad, 0.0))


def separation_along(
    delta: np.ndarray, batch: ShapeBatch, i: np.ndarray, j: np.ndarray, normals: np.ndarray
) -> np.ndarray:
    """s_ij(n) = n.(p_j - p_i) - h_Ki(n) - h_Kj(-n) for P pairs and C normals each: -> (P, C)."""
    h_i = support(batch.vertices[i], batch.ellipse[i], normals)
    h_j = support(batch.vertices[j], batch.ellipse[j], -normals)
    return np.matmul(normals, delta[:, :, None])[..., 0] - h_i - h_j


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    safe = np.where(norm > 1e-12, norm, 1.0)
    fallback = np.zeros_like(x)
    fallback[..., 0] = 1.0
    return np.where(norm > 1e-12, x / safe, fallback)


def signed_distance(
    positions: np.ndarray, batch: ShapeBatch, i: np.ndarray, j: np.ndarray, compiled: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """s* and n* for the pairs (i[p], j[p]): exact for polygons and discs, angle search for ellipses.

    The polygon parts give the Minkowski difference ``M = P_i (+) (-P_j)``, whose edges are the edges of
    P_i shifted by -P_j's support point along their normal and the edges of -P_j shifted by P_i's. With
    ``d = p_j - p_i``: if d lies outside M (some edge normal has s(n) > 0), s* is the distance from d to
    the nearest edge of M and n* points from that nearest point to d; otherwise s* = max_e s(n_e), the
    penetration depth, along an edge normal. Isotropic (disc) parts subtract their radii. Pairs with an
    anisotropic ellipse use a 1-D angle grid refined by golden-section search.

    Returns
    -------
    s_star : (P,) signed distances; n_star : (P, 2) unit normals pointing from body i towards body j.
    """
    i = np.asarray(i, dtype=int)
    j = np.asarray(j, dtype=int)
    delta = positions[j] - positions[i]  # (P, 2)
    if compiled and HAVE_NUMBA:  # the same algorithm, one compiled loop per pair (geometry_kernel.py)
        s_star, n_star = polygon_signed_distance(
            delta, batch.vertices, batch.edge_start, batch.edge_end, batch.normals, i, j
        )
    else:
        s_star, n_star = _polygon_signed_distance(delta, batch, i, j)
    s_star = s_star - batch.radius[i] - batch.radius[j]  # isotropic parts: h(n) = r for every n
    curved = ~(batch.isotropic[i] & batch.isotropic[j])
    if np.any(curved):
        idx = np.flatnonzero(curved)
        s_c, n_c = _angle_search(delta[idx], batch, i[idx], j[idx])
        s_star[idx], n_star[idx] = s_c, n_c
    return s_star, n_star


def _polygon_signed_distance(
    delta: np.ndarray, batch: ShapeBatch, i: np.ndarray, j: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The vectorised numpy path: s* and n* of the polygon parts (radii not subtracted)."""
    vi, vj = batch.vertices[i], batch.vertices[j]
    ni, nj = batch.normals[i], batch.normals[j]
    # edges of P_i shifted by -P_j's support point along n_e: -argmin_w n_e . w
    proj_j = np.matmul(ni, vj.transpose(0, 2, 1))  # (P, Vi, Vj): n_e . w
    w_star = np.take_along_axis(vj, proj_j.argmin(axis=2)[..., None], axis=1)  # (P, Vi, 2)
    # edges of -P_j (outward normal -n_f) shifted by P_i's support point along -n_f: argmin_v n_f . v
    proj_i = np.matmul(nj, vi.transpose(0, 2, 1))  # (P, Vj, Vi): n_f . v
    v_star = np.take_along_axis(vi, proj_i.argmin(axis=2)[..., None], axis=1)  # (P, Vj, 2)
    start_i, start_j = batch.edge_start[i], batch.edge_start[j]
    seg_a = np.concatenate([start_i - w_star, v_star - start_j], axis=1)
    seg_b = np.concatenate([batch.edge_end[i] - w_star, v_star - batch.edge_end[j]], axis=1)
    # s(n) = n.d - h_Ki(n) - h_Kj(-n) along the candidate normals, from the projections above:
    # n = n_e (edge of P_i, extreme at its start): n_e.d - n_e.s_e + min_w n_e.w
    # n = -n_f (edge of P_j): -n_f.d + min_v n_f.v - n_f.s_f;  n = d/|d|: |d| - max_v u.v + min_w u.w
    unit_d = _unit(delta)
    along_i = ((ni * (delta[:, None, :] - start_i)).sum(axis=2)) + proj_j.min(axis=2)
    along_j = proj_i.min(axis=2) - (nj * (delta[:, None, :] + start_j)).sum(axis=2)
    along_d = (
        (unit_d * delta).sum(axis=1)
        - np.matmul(vi, unit_d[:, :, None])[..., 0].max(axis=1)
        + np.matmul(vj, unit_d[:, :, None])[..., 0].min(axis=1)
    )
    values = np.concatenate([along_i, along_j, along_d[:, None]], axis=1)
    normals = np.concatenate([ni, -nj, unit_d[:, None, :]], axis=1)
    best = values.argmax(axis=1)
    rows = np.arange(len(i))
    s_star = values[rows, best]
    n_star = normals[rows, best]
    # outside: distance from d to the nearest point of M's boundary segments
    edge = seg_b - seg_a
    length2 = (edge * edge).sum(axis=2)
    t = np.clip(((delta[:, None, :] - seg_a) * edge).sum(axis=2) / np.where(length2 > 0, length2, 1.0), 0, 1)
    closest = seg_a + t[..., None] * edge
    gap = delta[:, None, :] - closest
    dist = np.sqrt((gap * gap).sum(axis=2))
    nearest = dist.argmin(axis=1)
    outside = s_star > 0
    s_star = np.where(outside, dist[rows, nearest], s_star)
    n_out = gap[rows, nearest]
    n_star = np.where(outside[:, None] & (dist[rows, nearest] > 1e-12)[:, None], _unit(n_out), n_star)
    return s_star, n_star


def _angle_search(
    delta: np.ndarray, batch: ShapeBatch, i: np.ndarray, j: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """max over the unit circle by a coarse grid then golden-section search in the best brackets.

    s(n) is not unimodal for overlapping shapes (a polygon over an ellipse has several local maxima), so
    the ``_ANGLE_BRACKETS`` best grid angles are each refined, every polygon edge normal (where s(n) has a
    kink) is evaluated exactly, and the best of them is kept. At a smooth maximum the result falls short
    of s* by at most ``|s''| * ANGLE_SEARCH_RESOLUTION**2 / 2`` (see :func:`angle_search_tolerance`).
    """
    grid = np.linspace(-np.pi, np.pi, _ANGLE_GRID, endpoint=False)
    normals = np.broadcast_to(np.stack([np.cos(grid), np.sin(grid)], axis=1), (len(i), _ANGLE_GRID, 2))
    values = separation_along(delta, batch, i, j, np.ascontiguousarray(normals))
    step = 2 * np.pi / _ANGLE_GRID
    best = np.argsort(-values, axis=1, kind="stable")[:, :_ANGLE_BRACKETS]  # (P, K)
    k = best.shape[1]
    delta_k, i_k, j_k = np.repeat(delta, k, axis=0), np.repeat(i, k), np.repeat(j, k)
    lo = grid[best.ravel()] - step
    hi = lo + 2 * step
    ratio = _GOLDEN_RATIO

    def evaluate(theta: np.ndarray) -> np.ndarray:
        n = np.empty((len(theta), 1, 2))
        n[:, 0, 0], n[:, 0, 1] = np.cos(theta), np.sin(theta)
        return separation_along(delta_k, batch, i_k, j_k, n)[:, 0]

    a = hi - ratio * (hi - lo)
    b = lo + ratio * (hi - lo)
    fa, fb = evaluate(a), evaluate(b)
    for _ in range(_GOLDEN_ITERS):  # golden-section: one new evaluation per iteration
        left = fa > fb  # the maximum lies in [lo, b], else in [a, hi]
        hi = np.where(left, b, hi)
        lo = np.where(left, lo, a)
        new_point = np.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
        f_new = evaluate(new_point)
        a, b = np.where(left, new_point, b), np.where(left, a, new_point)
        fa, fb = np.where(left, f_new, fb), np.where(left, fa, f_new)
    theta = ((lo + hi) / 2).reshape(-1, k)
    refined = evaluate(theta.ravel()).reshape(-1, k)
    # The polygon parts make s(n) peak with a kink at their edge normals (n_e of P_i, -n_f of P_j): the
    # coarse grid can miss such a narrow peak and golden-section only approaches it linearly, so each is
    # evaluated exactly (padding and curved shapes hold placeholder normals: any unit normal is a lower
    # bound of s*, so an extra candidate can only bring the maximum closer).
    kinks = np.concatenate([batch.normals[i], -batch.normals[j]], axis=1)  # (P, Vi + Vj, 2)
    at_kinks = separation_along(delta, batch, i, j, kinks)
    candidates = np.concatenate([refined, at_kinks], axis=1)
    normals = np.concatenate([np.stack([np.cos(theta), np.sin(theta)], axis=2), kinks], axis=1)
    winner = candidates.argmax(axis=1)
    rows = np.arange(len(winner))
    return candidates[rows, winner], normals[rows, winner]


def angle_search_tolerance(offset: float, shapes: list[ConvexShape] | tuple[ConvexShape, ...]) -> float:
    """How far below the true s* the angle search may report it, for two of ``shapes`` ``offset`` apart.

    With s(theta) = n.d - h_i(n) - h_j(-n) and h + h'' = rho (the radius of curvature, >= 0),
    |s''| <= |d| + sum over both bodies of (h_max + rho_max); the golden-section error at a smooth maximum
    is at most |s''| * ANGLE_SEARCH_RESOLUTION**2 / 2, and rounding adds a few ulps of that scale. Kinks
    (polygon edge normals) are evaluated exactly. ``shapes`` bounds both bodies: the largest
    circumradius and curvature radius (a^2 / b for an ellipse with semi-axes a >= b) among them are used.
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if len(shapes) == 0:
        raise ValueError("shapes must hold at least one shape")
    reach = max(shape.circumradius() for shape in shapes)
    curvature = max(_max_curvature_radius(shape) for shape in shapes)
    bound = offset + 2 * (reach + curvature)
    return 0.5 * bound * ANGLE_SEARCH_RESOLUTION**2 + 64 * np.finfo(float).eps * bound


def _max_curvature_radius(shape: ConvexShape) -> float:
    """The largest radius of curvature of the ellipse part, a^2 / b (0 for a polygon or point)."""
    semi_axes2 = np.linalg.eigvalsh(shape.ellipse).clip(min=0.0)  # b^2 <= a^2
    if semi_axes2[1] == 0.0:
        return 0.0
    if semi_axes2[0] == 0.0:
        return np.inf  # a segment: its support function has a kink, not a curvature
    return float(semi_axes2[1] / np.sqrt(semi_axes2[0]))


@dataclass(frozen=True)
class GSF:
    """Geometric separation features of the pairs (i, j): all arrays have leading dimension P.

    s_star: signed distance; normal: n* from i to j; closing_speed: -n*.(v_j - v_i) (> 0 approaching);
    width_i = h_Ki(n*), width_j = h_Kj(-n*): the support widths along n*.
    """

    s_star: np.ndarray
    normal: np.ndarray
    closing_speed: np.ndarray
    width_i: np.ndarray
    width_j: np.ndarray


def geometric_separation_features(
    positions: np.ndarray, velocities: np.ndarray, batch: ShapeBatch, i: np.ndarray, j: np.ndarray
) -> GSF:
    """GSFs of the pairs (i[p], j[p]) at once (vectorised over pairs)."""
    i = np.asarray(i, dtype=int)
    j = np.asarray(j, dtype=int)
    s_star, n_star = signed_distance(positions, batch, i, j)
    rel_v = velocities[j] - velocities[i]
    if HAVE_NUMBA:  # polygon parts compiled, isotropic parts add their radius
        widths = polygon_support_widths(n_star, batch.vertices, i, j)
        width_i, width_j = widths[:, 0] + batch.radius[i], widths[:, 1] + batch.radius[j]
        curved = ~(batch.isotropic[i] & batch.isotropic[j])
        if np.any(curved):
            idx = np.flatnonzero(curved)
            normals = n_star[idx, None, :]
            width_i[idx] = support(batch.vertices[i[idx]], batch.ellipse[i[idx]], normals)[:, 0]
            width_j[idx] = support(batch.vertices[j[idx]], batch.ellipse[j[idx]], -normals)[:, 0]
    else:
        width_i = support(batch.vertices[i], batch.ellipse[i], n_star[:, None, :])[:, 0]
        width_j = support(batch.vertices[j], batch.ellipse[j], -n_star[:, None, :])[:, 0]
    return GSF(s_star, n_star, -np.einsum("pd,pd->p", n_star, rel_v), width_i, width_j)


def pairwise_signed_distance(positions: np.ndarray, batch: ShapeBatch) -> np.ndarray:
    """(N, N) matrix of signed distances between all bodies (diagonal +inf), all pairs in one call."""
    n = len(batch)
    i, j = np.triu_indices(n, k=1)
    out = np.full((n, n), np.inf)
    if len(i):
        s, _ = signed_distance(positions, batch, i, j)
        out[i, j] = s
        out[j, i] = s
    return out
