"""StyleRoute: degenerate equivalences, invariants (hypothesis), idea-off checks and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.styleroute import pipeline as pipeline_module
from neurips26.methods.styleroute.guidance import GuidanceBank, style_loss
from neurips26.methods.styleroute.pipeline import to_images, to_tensor
from neurips26.methods.styleroute.sampler import sdedit
from tests.methods.styleroute_helpers import images, tiny_pipeline

torch.set_num_threads(1)
OFF = {"use_guidance": False, "use_ilvr": False, "use_adain": False}


def test_r1_with_guidance_ilvr_adain_off_equals_global_sdedit_exactly() -> None:
    pipe = tiny_pipeline(t_max=0.45, **OFF)
    content, style = images(0, batch=2), images(1)[0]
    ours = pipe(content, style, budget=1.0, generator=torch.Generator().manual_seed(3)).images
    noise = torch.randn((2, 3, 32, 32), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        reference = to_images(sdedit(pipe.denoiser, to_tensor(content), 0.45, 10, noise))
    assert np.array_equal(ours, reference)


def test_r0_with_t_min_0_returns_the_content() -> None:
    pipe = tiny_pipeline(t_min=0.0)
    content, style = images(2, batch=2), images(3)[0]
    out = pipe(content, style, budget=0.0, generator=torch.Generator().manual_seed(0))
    assert np.allclose(out.images, to_images(to_tensor(content)), atol=1e-6)
    assert (out.routing_map == 0).all()


def _check_start_time_masking(pipe) -> None:
    """A user mask r = 0 (left) / 1 (right) with t_min = 0: left stays the content, right is diffused."""
    content, style = images(4), images(5)[0]
    mask = np.zeros((32, 32))
    mask[:, 16:] = 1.0
    out = pipe(content, style, budget=0.5, mask=mask, generator=torch.Generator().manual_seed(0)).images[0]
    reference = to_images(to_tensor(content))[0]
    assert np.abs(out[:, :14] - reference[:, :14]).max() < 1e-6
    assert np.abs(out[:, 18:] - reference[:, 18:]).mean() > 0.01


def test_idea_region_wise_start_time_protects_r0_regions() -> None:
    _check_start_time_masking(tiny_pipeline(t_min=0.0, feather_sigma=0.0))


def test_idea_off_uniform_start_time_fails_the_protection_check(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = tiny_pipeline(t_min=0.0, feather_sigma=0.0)
    real = pipe._sample

    def uniform_start(c, s, route, *args):  # every pixel starts at t_max: the single-mechanism baseline
        return real(c, s, torch.ones_like(route), *args)

    monkeypatch.setattr(pipe, "_sample", uniform_start)
    with pytest.raises(AssertionError):
        _check_start_time_masking(pipe)


@settings(max_examples=6, deadline=None)
@given(budget=st.floats(0.05, 0.95), seed=st.integers(0, 1000), masked=st.booleans())
def test_routing_in_unit_interval_and_start_time_masking_at_every_step(
    budget: float, seed: int, masked: bool
) -> None:
    pipe = tiny_pipeline(probe_steps=1)
    cfg = pipe.route_config
    content, style = images(seed), images(seed + 1)[0]
    mask = None
    if masked:
        mask = np.full((32, 32), np.nan)
        mask[:8, :8] = np.random.default_rng(seed).uniform(0, 1)
    seen: list[int] = []
    captured: dict[str, torch.Tensor] = {}

    def callback(t: int, x: torch.Tensor, pending: torch.Tensor, forward: torch.Tensor) -> None:
        seen.append(t)
        assert torch.equal(x[pending.expand_as(x)], forward[pending.expand_as(x)])
        captured.setdefault("pending_first", pending)

    out = pipe(
        content,
        style,
        budget=budget,
        mask=mask,
        generator=torch.Generator().manual_seed(seed),
        callback=callback,
    )
    r = out.routing_map[0]
    assert r.min() >= 0.0 and r.max() <= 1.0
    if mask is not None:
        assert np.allclose(r[:8, :8], mask[:8, :8])
    t0 = (cfg.t_min + r * (cfg.t_max - cfg.t_min)) * 1000
    expected = (seen[0] > t0) | (t0 <= 0)
    assert np.array_equal(captured["pending_first"][0, 0].numpy(), expected)
    assert seen == sorted(seen, reverse=True) and len(seen) >= 1


def _ilvr_error(pipe) -> float:
    content, style = images(6), images(7)[0]
    out = pipe(content, style, budget=0.0, generator=torch.Generator().manual_seed(0)).images
    lp = lambda x: pipeline_module.low_pass(to_tensor(x), 16)  # noqa: E731
    return float((lp(out) - lp(content)).abs().mean())


def test_idea_ilvr_anchors_the_low_pass_layout_where_r_is_low() -> None:
    # uniform start time (t_min = t_max) isolates ILVR's effect from the start-time routing
    common = {"t_min": 0.45, "t_max": 0.45, "ilvr_factor": 16, "ilvr_until": 0.0, "use_guidance": False}
    assert _ilvr_error(tiny_pipeline(**common)) < 0.5 * _ilvr_error(tiny_pipeline(use_ilvr=False, **common))


def test_idea_off_ilvr_without_low_pass_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    common = {"t_min": 0.45, "t_max": 0.45, "ilvr_factor": 16, "ilvr_until": 0.0, "use_guidance": False}
    monkeypatch.setattr(pipeline_module, "low_pass", lambda x, factor: torch.zeros_like(x))
    with pytest.raises(AssertionError):
        assert _ilvr_error(tiny_pipeline(**common)) < 0.5 * _ilvr_error(
            tiny_pipeline(use_ilvr=False, **common)
        )


def _style_loss_of(pipe) -> float:
    content, style = images(8), images(9)[0]
    out = pipe(content, style, budget=1.0, generator=torch.Generator().manual_seed(0)).images
    with torch.no_grad():
        return float(
            style_loss(GuidanceBank(), to_tensor(out), to_tensor(style[None]), torch.ones(1, 1, 32, 32))
        )


def test_idea_style_guidance_lowers_the_guidance_style_loss() -> None:
    base = {"use_ilvr": False, "use_adain": False}
    assert _style_loss_of(tiny_pipeline(guidance_scale=1.0, **base)) < _style_loss_of(
        tiny_pipeline(use_guidance=False, **base)
    )


def test_idea_off_zero_guidance_fails() -> None:
    base = {"use_ilvr": False, "use_adain": False}
    with pytest.raises(AssertionError):
        assert _style_loss_of(tiny_pipeline(guidance_scale=0.0, **base)) < _style_loss_of(
            tiny_pipeline(use_guidance=False, **base)
        )


def test_output_fields_and_determinism_under_a_seed() -> None:
    pipe = tiny_pipeline()
    content, style = images(10, batch=2), images(11)[0]
    a = pipe(content, style, budget=0.4, generator=torch.Generator().manual_seed(1))
    b = pipe(content, style, budget=0.4, generator=torch.Generator().manual_seed(1))
    assert a.images.shape == (2, 32, 32, 3) and a.routing_map.shape == (2, 32, 32)
    assert np.array_equal(a.images, b.images)
    assert {"S", "T", "D", "r", "start_time"} <= set(a.regions[0][0])
    assert abs(a.routing_map.mean() - 0.4) < 0.02


def test_save_routing_writes_png_and_json(tmp_path) -> None:
    import json

    from neurips26.methods.styleroute import save_routing

    content = images(12)
    out = tiny_pipeline()(content, images(13)[0], budget=0.5, generator=torch.Generator().manual_seed(0))
    png, js = save_routing(out, content, tmp_path)
    assert png.stat().st_size > 0
    rows = json.loads(js.read_text())["regions"]
    assert len(rows) == len(out.regions[0]) and all(0 <= row["r"] <= 1 for row in rows)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"content": (images(0) * 255).astype(np.uint8)}, TypeError, "content"),
        ({"content": images(0, size=16)}, ValueError, "32 px"),
        ({"content": np.full((1, 32, 32, 3), np.nan)}, ValueError, "non-finite"),
        ({"content": images(0) * 3}, ValueError, "[0, 1]"),
        ({"budget": 1.5}, ValueError, "budget"),
        ({"mask": np.zeros((8, 8))}, ValueError, "mask"),
        ({"style": images(0, size=16)[0]}, ValueError, "style"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, words) -> None:
    call = {"content": images(0), "style": images(1)[0], "budget": 0.5, **kwargs}
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        tiny_pipeline()(**call)


def test_style_without_prior_names_the_training_command(tmp_path) -> None:
    from neurips26.methods.styleroute import load_prior

    with pytest.raises(FileNotFoundError, match="neurips26 styleroute train-prior gravel"):
        load_prior("gravel", tmp_path)
