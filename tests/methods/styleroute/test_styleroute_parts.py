"""StyleRoute parts: router ideas, vectorised-vs-naive oracles, attention processor, prior, banks, CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.styleroute import RegionRouter, StyleRouteConfig
from neurips26.methods.styleroute.attention import InjectionController, StyleRouteAttnProcessor
from neurips26.methods.styleroute.guidance import GUIDANCE_BANK_SEED, GuidanceBank, project_conflicts
from neurips26.methods.styleroute.metrics import EVAL_BANK_SEED, EvaluationBank, hypervolume_2d
from neurips26.methods.styleroute.router import region_adjacency, region_means
from tests.methods.styleroute_helpers import (
    half_structure_half_texture,
    images,
    naive_hypervolume,
    naive_projection,
    naive_region_means,
    tiny_pipeline,
    tiny_prior,
)

torch.set_num_threads(1)


def _texture_minus_structure(mode: str) -> float:
    image, right = half_structure_half_texture()
    style = np.clip(np.random.default_rng(1).uniform(0, 1, (48, 48, 3)), 0, 1)
    routing = RegionRouter(StyleRouteConfig(route_mode=mode, n_segments=24)).route(image, style, 0.5)
    return float(routing.map[right].mean() - routing.map[~right].mean())


def test_router_routes_texture_to_injection_and_structure_to_protection() -> None:
    assert _texture_minus_structure("full") > 0.15


def test_idea_off_uniform_routing_fails_the_where_check() -> None:
    with pytest.raises(AssertionError):
        assert _texture_minus_structure("uniform") > 0.15


def test_route_disagreement_changes_the_routing() -> None:
    image, _ = half_structure_half_texture()
    style = images(3, size=48)[0]
    disagreement = np.zeros((48, 48))
    disagreement[:24, :] = 1.0  # the probes disagree on the top half
    full = RegionRouter(StyleRouteConfig(n_segments=24)).route(image, style, 0.5, disagreement=disagreement)
    off = RegionRouter(StyleRouteConfig(n_segments=24, route_mode="no_disagreement")).route(
        image, style, 0.5, disagreement=disagreement
    )
    # high D means "the two routes would differ a lot here": StyleRoute protects it
    assert full.map[:24].mean() < off.map[:24].mean() - 0.02


@settings(max_examples=15, deadline=None)
@given(budget=st.floats(0.02, 0.98), seed=st.integers(0, 50))
def test_router_budget_is_the_mean_of_r(budget: float, seed: int) -> None:
    content, style = images(seed, size=40)[0], images(seed + 1, size=40)[0]
    routing = RegionRouter(StyleRouteConfig(n_segments=16)).route(content, style, budget)
    assert routing.map.min() >= 0 and routing.map.max() <= 1
    assert abs(routing.map.mean() - budget) < 1e-3


def test_region_kernels_match_naive_loops() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 7, (20, 20))
    values = rng.standard_normal((20, 20))
    assert np.allclose(region_means(values, labels, 8), naive_region_means(values, labels, 8))
    adjacency = region_adjacency(labels, 7)
    naive = np.zeros((7, 7))
    for i in range(20):
        for j in range(20):
            for di, dj in ((0, 1), (1, 0)):
                if i + di < 20 and j + dj < 20 and labels[i, j] != labels[i + di, j + dj]:
                    naive[labels[i, j], labels[i + di, j + dj]] = naive[
                        labels[i + di, j + dj], labels[i, j]
                    ] = 1
    assert np.array_equal(adjacency, naive)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_projected_style_gradient_never_opposes_the_content_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    gs, gc = torch.randn(2, 3, 8, 8, generator=g), torch.randn(2, 3, 8, 8, generator=g)
    labels = torch.randint(0, 5, (2, 8, 8), generator=g)
    region_r = torch.rand(2, 5, generator=g)
    projected = project_conflicts(gs, gc, labels, region_r, 0.5)
    assert torch.allclose(projected, naive_projection(gs, gc, labels, region_r, 0.5), atol=1e-5)
    for b in range(2):
        for k in range(5):
            m = labels[b] == k
            if m.any() and region_r[b, k] < 0.5:
                norms = projected[b][:, m].norm() * gc[b][:, m].norm()
                assert (projected[b][:, m] * gc[b][:, m]).sum() >= -1e-5 * max(float(norms), 1.0)


def test_idea_off_no_projection_opposes_the_content_gradient() -> None:
    gc = torch.ones(1, 3, 4, 4)
    gs = -gc.clone()
    labels, low_r = torch.zeros(1, 4, 4, dtype=torch.long), torch.zeros(1, 1)
    assert (project_conflicts(gs, gc, labels, low_r) * gc).sum() >= 0
    assert (project_conflicts(gs, gc, labels, torch.ones(1, 1)) * gc).sum() < 0  # high r: left alone


def test_hypervolume_matches_a_grid_oracle() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        d, s = rng.uniform(0, 1.2, 4), rng.uniform(0, 1, 4)
        assert abs(hypervolume_2d(d, s) - naive_hypervolume(d, s)) < 0.01


def _attention():
    from diffusers.models.attention_processor import Attention, AttnProcessor

    torch.manual_seed(0)
    return Attention(16, heads=2, dim_head=8, bias=True, processor=AttnProcessor())


def test_processor_with_zero_injection_equals_diffusers_attn_processor() -> None:
    from diffusers.models.attention_processor import AttnProcessor

    attn = _attention()
    x = torch.randn(2, 16, 4, 4)
    reference = AttnProcessor()(attn, x)
    processor = StyleRouteAttnProcessor(gamma=0.75, temperature=1.5)
    processor.mode, processor.role = "record", "style"
    processor(attn, torch.randn(2, 16, 4, 4))
    processor.role = "content"
    processor(attn, torch.randn(2, 16, 4, 4))
    processor.mode, processor.weights = "inject", torch.zeros(2, 4, 4)
    assert torch.allclose(processor(attn, x), reference, atol=1e-6)
    processor.weights = torch.ones(2, 4, 4)
    assert not torch.allclose(processor(attn, x), reference, atol=1e-3)


def test_injection_controller_restores_processors_and_styleid_runs() -> None:
    from neurips26.methods.styleroute.baselines import styleid_like

    pipe = tiny_pipeline()
    before = [m.processor for m in InjectionController(pipe.unet).modules]
    out = styleid_like(pipe.denoiser, images(0), images(1)[0], gamma=0.75, t_start=0.45, steps=10)
    assert out.shape == (1, 32, 32, 3) and np.isfinite(out).all()
    assert [m.processor for m in InjectionController(pipe.unet).modules] == before


def test_pipeline_attention_injection_changes_the_output() -> None:
    content, style = images(2), images(3)[0]
    kwargs = {"budget": 1.0, "generator": None}
    plain = tiny_pipeline(use_guidance=False)(
        content, style, **{**kwargs, "generator": torch.Generator().manual_seed(0)}
    )
    injected = tiny_pipeline(use_guidance=False, attention_injection=True)(
        content, style, **{**kwargs, "generator": torch.Generator().manual_seed(0)}
    )
    assert np.abs(plain.images - injected.images).mean() > 1e-4


def test_pipeline_runs_on_a_diffusers_unet2dmodel() -> None:
    from diffusers import UNet2DModel

    from neurips26.methods.styleroute import StyleRoutePipeline, make_scheduler

    torch.manual_seed(0)
    unet = UNet2DModel(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
        attention_head_dim=8,
    ).eval()
    pipe = StyleRoutePipeline(
        unet,
        make_scheduler(),
        StyleRouteConfig(num_inference_steps=5, n_segments=8, attention_injection=True),
    )
    out = pipe(images(4), images(5)[0], budget=0.5, generator=torch.Generator().manual_seed(0))
    assert out.images.shape == (1, 32, 32, 3) and np.isfinite(out.images).all()


def test_prior_save_load_round_trip(tmp_path) -> None:
    from neurips26.methods.styleroute import SingleImagePrior

    model = tiny_prior()
    model.save_pretrained(tmp_path)
    loaded = SingleImagePrior.from_pretrained(tmp_path).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model(x, 500).sample, loaded(x, 500).sample)
    assert loaded.config.channels == 8


def test_evaluation_banks_differ_from_the_guidance_bank() -> None:
    from neurips26.methods.styleroute.baselines import GATYS_BANK_SEED

    guidance, evaluation = GuidanceBank(), EvaluationBank()
    assert len({GUIDANCE_BANK_SEED, EVAL_BANK_SEED, GATYS_BANK_SEED}) == 3
    assert [w.shape for w in guidance.weights] != [w.shape for w in evaluation.weights]
    x = torch.rand(1, 3, 32, 32)
    g_feats, e_feats = guidance.features(x * 2 - 1), evaluation.features(x)
    assert [f.shape[1] for f in g_feats] != [f.shape[1] for f in e_feats]


def test_train_prior_cli_writes_a_loadable_prior_with_a_card(tmp_path) -> None:
    import argparse
    import json

    from neurips26.methods.styleroute import cli, load_prior

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["train-prior", "brick", "--steps", "2", "--out", str(tmp_path)])
    assert cli.main(args) == 0
    card = json.loads((tmp_path / "brick" / "card.json").read_text())
    assert card["steps"] == 2 and set(card["gate"]) == {"passed", "swd"}
    assert load_prior("brick", tmp_path).config.channels == 32


def test_bad_training_and_config_input() -> None:
    from neurips26.methods.styleroute import train_prior

    with pytest.raises(ValueError, match="style must be"):
        train_prior(np.zeros((16, 16, 3)), steps=1)
    with pytest.raises(ValueError, match="route_mode"):
        StyleRouteConfig(route_mode="everywhere")
    with pytest.raises(ValueError, match="t_min"):
        StyleRouteConfig(t_min=0.8, t_max=0.5)


def test_pipeline_save_and_reload_keep_the_route_config_and_refuse_tensor_kwargs(tmp_path) -> None:
    """save_pretrained -> from_pretrained gives the same pipeline, not one with the default config."""
    from neurips26.methods.styleroute import StyleRoutePipeline
    from tests.methods.styleroute_helpers import tiny_pipeline

    pipe = tiny_pipeline(n_segments=7)
    pipe.unet_kwargs = {"class_labels": 1}
    pipe.save_pretrained(tmp_path / "pipe")
    reloaded = StyleRoutePipeline.from_pretrained(tmp_path / "pipe")
    assert reloaded.route_config == pipe.route_config and reloaded.route_config.n_segments == 7
    assert reloaded.unet_kwargs == {"class_labels": 1}
    for name, tensor in pipe.unet.state_dict().items():
        torch.testing.assert_close(reloaded.unet.state_dict()[name], tensor)
    pipe.unet_kwargs = {"encoder_hidden_states": torch.zeros(1, 2, 3)}
    with pytest.raises(ValueError, match="not JSON values and would be lost"):
        pipe.save_pretrained(tmp_path / "with_tensors")
