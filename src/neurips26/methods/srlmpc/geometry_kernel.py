"""Compiled (numba) signed distance of polygon and disc pairs: the algorithm of ``geometry.signed_distance``.

Optional: used when numba imports (``HAVE_NUMBA``), else the vectorised numpy path runs. One loop per pair
over the edges of the Minkowski difference M = P_i (+) (-P_j): candidate normals (edge normals of both
polygons and the centre direction) give s(n) = n.d - h_M(n); if d lies outside M, s* is the distance from d
to M's nearest edge, along the direction from that nearest point to d.
"""

from __future__ import annotations

import math

import numpy as np

try:
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - numba is optional
    HAVE_NUMBA = False


def _kernel(delta, vertices, starts, ends, normals, i_idx, j_idx, out_s, out_n):
    n_pairs = delta.shape[0]
    width = vertices.shape[1]
    for p in range(n_pairs):
        i, j = i_idx[p], j_idx[p]
        dx, dy = delta[p, 0], delta[p, 1]
        best, bnx, bny = -1e300, 1.0, 0.0
        nearest, gx, gy = 1e300, 0.0, 0.0
        for side in range(2):
            a, b = (i, j) if side == 0 else (j, i)
            sign = 1.0 if side == 0 else -1.0
            for e in range(width):
                nx, ny = normals[a, e, 0], normals[a, e, 1]
                # support point of the other polygon: argmin over its vertices of n_e . w
                low, arg = 1e300, 0
                for w in range(width):
                    proj = nx * vertices[b, w, 0] + ny * vertices[b, w, 1]
                    if proj < low:
                        low, arg = proj, w
                sx, sy = starts[a, e, 0], starts[a, e, 1]
                # n = sign * n_e: s = n_e.(sign d - s_e) + min_w n_e.w
                value = nx * (sign * dx - sx) + ny * (sign * dy - sy) + low
                if value > best:
                    best, bnx, bny = value, sign * nx, sign * ny
                # the edge of M: sign * (edge - w*)
                ax = sign * (sx - vertices[b, arg, 0])
                ay = sign * (sy - vertices[b, arg, 1])
                bx = sign * (ends[a, e, 0] - vertices[b, arg, 0])
                by = sign * (ends[a, e, 1] - vertices[b, arg, 1])
                ex, ey = bx - ax, by - ay
                length2 = ex * ex + ey * ey
                t = 0.0
                if length2 > 0:
                    t = min(max(((dx - ax) * ex + (dy - ay) * ey) / length2, 0.0), 1.0)
                qx, qy = dx - (ax + t * ex), dy - (ay + t * ey)
                dist = math.sqrt(qx * qx + qy * qy)
                if dist < nearest:
                    nearest, gx, gy = dist, qx, qy
        norm_d = math.sqrt(dx * dx + dy * dy)
        ux, uy = (dx / norm_d, dy / norm_d) if norm_d > 1e-12 else (1.0, 0.0)
        high_i, low_j = -1e300, 1e300
        for w in range(width):
            high_i = max(high_i, ux * vertices[i, w, 0] + uy * vertices[i, w, 1])
            low_j = min(low_j, ux * vertices[j, w, 0] + uy * vertices[j, w, 1])
        value = ux * dx + uy * dy - high_i + low_j
        if value > best:
            best, bnx, bny = value, ux, uy
        if best > 0:
            out_s[p] = nearest
            if nearest > 1e-12:
                bnx, bny = gx / nearest, gy / nearest
        else:
            out_s[p] = best
        out_n[p, 0], out_n[p, 1] = bnx, bny


def _widths_kernel(normals, vertices, i_idx, j_idx, out):
    for p in range(normals.shape[0]):
        nx, ny = normals[p, 0], normals[p, 1]
        high_i, high_j = -1e300, -1e300
        for w in range(vertices.shape[1]):
            high_i = max(high_i, nx * vertices[i_idx[p], w, 0] + ny * vertices[i_idx[p], w, 1])
            high_j = max(high_j, -nx * vertices[j_idx[p], w, 0] - ny * vertices[j_idx[p], w, 1])
        out[p, 0], out[p, 1] = high_i, high_j


if HAVE_NUMBA:
    _compiled = njit(cache=True, nogil=True)(_kernel)
    _compiled_widths = njit(cache=True, nogil=True)(_widths_kernel)


def polygon_support_widths(
    normals: np.ndarray, vertices: np.ndarray, i: np.ndarray, j: np.ndarray
) -> np.ndarray:
    """(P, 2): max_v n.v over P_i and max_w -n.w over P_j (the polygon parts of the support widths)."""
    out = np.empty((len(i), 2))
    fn = _compiled_widths if HAVE_NUMBA else _widths_kernel
    fn(np.ascontiguousarray(normals), vertices, i.astype(np.int64), j.astype(np.int64), out)
    return out


def polygon_signed_distance(
    delta: np.ndarray,
    vertices: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    normals: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """s* and n* of the polygon parts of the pairs (i[p], j[p]) (radii not subtracted); compiled."""
    out_s = np.empty(len(i))
    out_n = np.empty((len(i), 2))
    fn = _compiled if HAVE_NUMBA else _kernel
    fn(delta, vertices, starts, ends, normals, i.astype(np.int64), j.astype(np.int64), out_s, out_n)
    return out_s, out_n
