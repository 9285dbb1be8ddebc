"""SRL-MPC geometry and HOCBF-MPC: exact signed distance, conservative normals, QP constraints, backends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("casadi")
shapely_geometry = pytest.importorskip("shapely.geometry")

from neurips26.methods.srlmpc import geometry as geo  # noqa: E402
from neurips26.methods.srlmpc.config import SRLMPCConfig  # noqa: E402
from neurips26.methods.srlmpc.hocbf_mpc import HOCBFMPC, MPCParameters, Neighbours  # noqa: E402


def _shapely(shape: geo.ConvexShape, position: np.ndarray):
    return shapely_geometry.Polygon(shape.boundary() + position)


def _naive_signed_distance(a: geo.ConvexShape, pa, b: geo.ConvexShape, pb, n_angles: int = 20000) -> float:
    """Oracle: s* = max over a dense angle grid of s(n) = n.(p_b - p_a) - h_a(n) - h_b(-n)."""
    theta = np.linspace(0, 2 * np.pi, n_angles, endpoint=False)
    normals = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    values = normals @ (np.asarray(pb) - np.asarray(pa)) - a.support(normals) - b.support(-normals)
    return float(values.max())


coords = st.floats(-2.0, 2.0)
angles = st.floats(0.0, 2 * np.pi)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), coords, coords, angles, angles)
def test_polygon_signed_distance_equals_shapely_and_is_negative_exactly_on_overlap(
    seed, x, y, ra, rb
) -> None:
    rng = np.random.default_rng(seed)
    a = geo.random_convex_polygon(rng, 0.6, 6).rotated(ra)
    b = geo.random_convex_polygon(rng, 0.5, 5).rotated(rb)
    pos = np.array([[0.0, 0.0], [x, y]])
    s, _ = geo.signed_distance(pos, geo.ShapeBatch.from_shapes([a, b]), np.array([0]), np.array([1]))
    pa, pb = _shapely(a, pos[0]), _shapely(b, pos[1])
    overlap = pa.intersection(pb).area > 1e-12
    assert (s[0] < 0) == overlap
    if not pa.intersects(pb):
        assert s[0] == pytest.approx(pa.distance(pb), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), coords, coords, angles)
@example(766, 0.0, 0.0, 0.0)  # concentric polygon and ellipse: s(n) has several local maxima
@example(3194, 0.0, 0.0, 0.0)  # the maximum is a narrow kink at a polygon edge normal the grid missed
@example(222, 0.0, 0.0, 0.0)  # golden-section approached that kink linearly: 3e-6 short
@example(1605, -1.0140175650910779, -1.466575492710906, 5.803406626988963)  # worst smooth case seen
def test_every_unit_normal_is_a_lower_bound_so_a_frozen_normal_is_conservative(seed, x, y, angle) -> None:
    rng = np.random.default_rng(seed)
    shapes = [geo.random_convex_polygon(rng, 0.5), geo.ellipse(0.4, 0.15).rotated(angle), geo.disc(0.2)]
    batch = geo.ShapeBatch.from_shapes(shapes)
    pos = np.array([[0.0, 0.0], [x, y], [y, -x]])
    i, j = np.array([0, 0, 1]), np.array([1, 2, 2])
    s_star, _ = geo.signed_distance(pos, batch, i, j)
    theta = rng.uniform(0, 2 * np.pi, 64)
    normals = np.broadcast_to(np.stack([np.cos(theta), np.sin(theta)], 1), (3, 64, 2)).copy()
    values = geo.separation_along(pos[j] - pos[i], batch, i, j, normals)
    # s* comes from an angle search: it may fall short of the true maximum by the search's resolution
    # (quadratic at a smooth maximum, scaled by the curvature of s), never by more
    offsets = np.linalg.norm(pos[j] - pos[i], axis=1)
    tolerance = np.array([geo.angle_search_tolerance(offset, shapes) for offset in offsets])
    assert np.all(values <= (s_star + tolerance)[:, None])


def test_the_angle_search_tolerance_is_tight_enough_to_see_a_missed_maximum() -> None:
    """The tolerance is the search's resolution, orders of magnitude below a missed local maximum."""
    shapes = [geo.random_convex_polygon(np.random.default_rng(3194), 0.5), geo.ellipse(0.4, 0.15)]
    assert geo.angle_search_tolerance(0.0, shapes) < 1e-7
    assert geo.angle_search_tolerance(2.0, shapes) > geo.angle_search_tolerance(0.0, shapes)
    with pytest.raises(ValueError, match="offset"):
        geo.angle_search_tolerance(-1.0, shapes)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 1.0), st.floats(0.05, 1.0), coords, coords)
def test_discs_signed_distance_is_centre_distance_minus_radii(r1, r2, x, y) -> None:
    pos = np.array([[0.0, 0.0], [x, y]])
    batch = geo.ShapeBatch.from_shapes([geo.disc(r1), geo.disc(r2)])
    s, n = geo.signed_distance(pos, batch, np.array([0]), np.array([1]))
    assert s[0] == pytest.approx(np.hypot(x, y) - r1 - r2, abs=1e-12)
    if np.hypot(x, y) > 1e-6:
        assert n[0] @ pos[1] == pytest.approx(np.hypot(x, y), rel=1e-9)


def test_vectorised_gsfs_match_the_angle_grid_oracle_for_mixed_shapes() -> None:
    rng = np.random.default_rng(3)
    shapes = [
        geo.random_convex_polygon(rng, 0.5).rotated(0.4),
        geo.rectangle(0.9, 0.3).rotated(1.1),
        geo.ellipse(0.3, 0.12).rotated(0.7),
        geo.disc(0.25),
        geo.ellipse(0.16, 0.28),
    ]
    pos = rng.uniform(-1.2, 1.2, (len(shapes), 2))
    table = geo.pairwise_signed_distance(pos, geo.ShapeBatch.from_shapes(shapes))
    for a in range(len(shapes)):
        for b in range(a + 1, len(shapes)):
            oracle = _naive_signed_distance(shapes[a], pos[a], shapes[b], pos[b])
            assert table[a, b] == pytest.approx(oracle, abs=2e-5)
            assert table[a, b] >= oracle - 1e-9  # the oracle samples normals: a lower bound
    assert np.allclose(table, table.T)


def test_circumscribed_discs_are_conservative_and_lose_the_shape() -> None:
    """Idea-off (shape): a circle approximation under-reports the separation of elongated bodies."""
    shapes = [geo.rectangle(1.0, 0.25), geo.rectangle(1.0, 0.25)]
    pos = np.array([[0.0, 0.0], [0.0, 0.6]])  # side by side: 0.35 m apart
    exact = geo.pairwise_signed_distance(pos, geo.ShapeBatch.from_shapes(shapes))[0, 1]
    circles = geo.pairwise_signed_distance(
        pos, geo.ShapeBatch.from_shapes([geo.circumscribed_disc(s) for s in shapes])
    )
    assert exact == pytest.approx(0.35)
    assert circles[0, 1] < 0  # the circle view sees an overlap that is not there


def test_gsf_closing_speed_and_support_widths() -> None:
    batch = geo.ShapeBatch.from_shapes([geo.rectangle(1.0, 0.4), geo.disc(0.3)])
    pos = np.array([[0.0, 0.0], [2.0, 0.0]])
    vel = np.array([[1.0, 0.0], [-0.5, 0.0]])
    gsf = geo.geometric_separation_features(pos, vel, batch, np.array([0]), np.array([1]))
    assert gsf.s_star[0] == pytest.approx(2.0 - 0.5 - 0.3)
    assert gsf.normal[0] == pytest.approx([1.0, 0.0])
    assert gsf.closing_speed[0] == pytest.approx(1.5)
    assert (gsf.width_i[0], gsf.width_j[0]) == pytest.approx((0.5, 0.3))


@pytest.mark.parametrize(
    ("vertices", "message"),
    [
        (np.array([[0, 0], [2, 0], [1, 0.2], [2, 2], [0, 2]]), "shape 7 is not convex"),
        (np.array([[0, 0], [1, 1], [2, 2]]), "shape 7 is degenerate"),
    ],
)
def test_bad_polygons_name_the_shape_and_suggest_the_hull(vertices, message) -> None:
    with pytest.raises(ValueError, match=message):
        geo.polygon(vertices, index=7)
    if "convex" in message:
        with pytest.raises(ValueError, match="convex_hull"):
            geo.polygon(vertices, index=7)


# ---------------------------------------------------------------- HOCBF-MPC


def _neighbours(rng: np.random.Generator, m: int) -> Neighbours:
    normals = rng.normal(size=(m, 2))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    return Neighbours(
        normals, rng.uniform(0.3, 0.6, m), normals * rng.uniform(1.0, 2.5, (m, 1)), rng.normal(0, 0.3, (m, 2))
    )


def _barrier(plan: np.ndarray, nb: Neighbours, config: SRLMPCConfig) -> np.ndarray:
    steps = np.arange(len(plan)) * config.dt
    future = nb.position[:, None, :] + steps[None, :, None] * nb.velocity[:, None, :]
    return np.einsum("md,mkd->mk", nb.normal, future - plan[None]) - nb.width[:, None] - config.margin


@pytest.fixture(scope="module")
def mpc() -> HOCBFMPC:
    return HOCBFMPC(SRLMPCConfig())


def test_hocbf_inequalities_hold_along_every_feasible_solved_trajectory(mpc) -> None:
    config = mpc.config
    params = MPCParameters.constant(config)
    params.slack_weight = 1e5
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(12):
        nb = _neighbours(rng, 5)
        step = mpc.solve(np.zeros(2), rng.normal(0, 0.4, 2), np.array([4.0, 0.0]), nb, params)
        if not step.feasible:
            continue
        h = _barrier(step.positions, nb, config)
        g1, g2 = params.gamma1[:, None], params.gamma2[:, None]
        psi2 = h[:, 2:] - (2 - g1 - g2) * h[:, 1:-1] + (1 - g1) * (1 - g2) * h[:, :-2]
        assert np.all(psi2[:, 0] >= -1e-6)  # the hard constraint on u_0
        assert np.all(psi2 >= -1e-3)  # the slacked ones, at a prohibitive slack price
        checked += 1
    assert checked >= 8


def test_qpoases_and_osqp_solve_the_same_qp() -> None:
    rng = np.random.default_rng(1)
    a, b = HOCBFMPC(SRLMPCConfig(backend="qpoases")), HOCBFMPC(SRLMPCConfig(backend="osqp"))
    params = MPCParameters.constant(a.config)
    for _ in range(4):
        nb = _neighbours(rng, 3)
        state = (rng.normal(0, 0.2, 2), rng.normal(0, 0.4, 2), np.array([3.0, 1.0]))
        sa, sb = a.solve(*state, nb, params), b.solve(*state, nb, params)
        assert sa.feasible and sb.feasible
        assert sa.acceleration == pytest.approx(sb.acceleration, abs=2e-3)


def test_build_once_equals_rebuild_every_step() -> None:
    rng = np.random.default_rng(2)
    config = SRLMPCConfig()
    once, rebuilt = HOCBFMPC(config), HOCBFMPC(config, rebuild_every_step=True)
    params = MPCParameters.constant(config)
    for _ in range(3):
        nb = _neighbours(rng, 4)
        state = (np.zeros(2), rng.normal(0, 0.4, 2), np.array([3.0, 0.0]))
        assert once.solve(*state, nb, params).acceleration == pytest.approx(
            rebuilt.solve(*state, nb, params).acceleration, abs=1e-9
        )


def test_infeasible_qp_falls_back_to_braking_and_is_counted(mpc) -> None:
    before = mpc.n_infeasible
    nb = Neighbours(np.array([[1.0, 0.0]]), np.array([0.5]), np.array([[0.52, 0.0]]), np.array([[-1.0, 0.0]]))
    step = mpc.solve(
        np.zeros(2), np.array([1.2, 0.0]), np.array([5.0, 0.0]), nb, MPCParameters.constant(mpc.config)
    )
    assert not step.feasible and step.fallback
    assert mpc.n_infeasible == before + 1
    assert step.acceleration[0] < 0  # brakes against the approach


def _drive_at_wall(use_cbf: bool) -> float:
    """Double integrator aimed through a static rectangle; returns the smallest exact signed distance."""
    config = SRLMPCConfig()
    mpc = HOCBFMPC(config)
    params = MPCParameters.constant(config)
    robot, wall = geo.rectangle(0.6, 0.3), geo.rectangle(0.4, 3.0)
    batch = geo.ShapeBatch.from_shapes([robot, wall])
    pos, vel, goal, wall_pos = np.array([-2.0, 0.1]), np.zeros(2), np.array([3.0, 0.1]), np.array([0.0, 0.0])
    smallest = np.inf
    for _ in range(40):
        both = np.array([pos, wall_pos])
        gsf = geo.geometric_separation_features(both, np.zeros((2, 2)), batch, np.array([0]), np.array([1]))
        smallest = min(smallest, gsf.s_star[0])
        nb = Neighbours(gsf.normal, gsf.width_i + gsf.width_j, wall_pos[None], np.zeros((1, 2)))
        step = mpc.solve(pos, vel, goal, nb if use_cbf else Neighbours.empty(), params)
        pos, vel = pos + config.dt * vel, np.clip(vel + config.dt * step.acceleration, -1.2, 1.2)
    return smallest


def test_hocbf_keeps_the_robot_off_a_wall_and_the_nominal_mpc_does_not() -> None:
    """Idea-off (HOCBF): the same MPC without the GSF constraints drives into the wall."""
    assert _drive_at_wall(use_cbf=True) >= 0.0
    assert _drive_at_wall(use_cbf=False) < 0.0


def test_parameters_outside_bounds_are_clipped_and_counted() -> None:
    config = SRLMPCConfig()
    params = MPCParameters.constant(config)
    params.gamma1[0], params.speed_ref = 3.0, 9.0
    clipped, count = params.clipped(config)
    assert count == 2 and clipped.gamma1[0] == config.gamma_max and clipped.speed_ref == config.max_speed


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"horizon": 0}, "horizon"),
        ({"dt": 0.0}, "dt"),
        ({"dt": -0.1}, "dt"),
        ({"backend": "gurobi"}, "backend"),
        ({"gamma_max": 1.5}, "gamma_max"),
    ],
)
def test_bad_mpc_config_names_the_argument(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        SRLMPCConfig(**kwargs)


def test_compiled_kernel_equals_the_vectorised_numpy_path() -> None:
    from neurips26.methods.srlmpc.geometry_kernel import HAVE_NUMBA

    if not HAVE_NUMBA:
        pytest.skip("numba not installed: only the numpy path exists")
    rng = np.random.default_rng(5)
    shapes = [geo.random_convex_polygon(rng, 0.5).rotated(rng.uniform(0, 6)) for _ in range(8)]
    shapes += [geo.disc(0.3), geo.rectangle(1.0, 0.3), geo.ellipse(0.3, 0.1), geo.disc(0.2)]
    batch = geo.ShapeBatch.from_shapes(shapes)
    i, j = np.triu_indices(len(shapes), 1)
    for _ in range(5):
        pos = rng.uniform(-1.5, 1.5, (len(shapes), 2))
        s1, n1 = geo.signed_distance(pos, batch, i, j, compiled=True)
        s2, n2 = geo.signed_distance(pos, batch, i, j, compiled=False)
        np.testing.assert_allclose(s1, s2, atol=1e-12)
        np.testing.assert_allclose(n1, n2, atol=1e-9)
