"""StyleRoute's experiment wiring, committed priors and the README's usage block."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from neurips26.bench.experiment import SilentProgress
from neurips26.methods.styleroute import experiment as E
from neurips26.methods.styleroute.training import PRIORS_DIR, load_prior

torch.set_num_threads(1)
README = Path(E.__file__).with_name("README.md")


def test_readme_usage_block_runs(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = re.search(r"## Usage\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README-usage", "exec"), namespace)
    out, protected = namespace["out"], namespace["protected"]
    assert abs(out.routing_map[0].mean() - 0.5) < 0.02
    assert (protected.routing_map[0][40:] == 0).all()
    assert (tmp_path / "routing" / "routing_0.json").is_file()


@pytest.mark.parametrize("style", E.PRIOR_STYLES)
def test_committed_priors_load_and_passed_their_gate(style: str) -> None:
    card = json.loads((PRIORS_DIR / style / "card.json").read_text())
    assert card["gate"]["passed"] and card["style"] == style
    assert card["command"].startswith(f"neurips26 styleroute train-prior {style}")
    assert sum(p.numel() for p in load_prior(style).parameters()) == card["parameters"]


def test_systems_are_built_from_the_config() -> None:
    config = E.StyleRouteExperimentConfig()
    config = replace(config, method=replace(config.method, guidance_scale=0.7), sdedit_strengths=[0.2])
    assert E.EXPERIMENT.build_system("styleroute", config).method.guidance_scale == 0.7
    assert E.EXPERIMENT.build_system("no_ilvr", config).method.use_ilvr is False
    assert E.EXPERIMENT.build_system("random_r", config).method.route_mode == "random"
    assert E.EXPERIMENT.build_system("sdedit", config).sweep == (0.2,)


@pytest.mark.parametrize("profile", sorted(E.EXPERIMENT.profiles))
def test_every_system_sweeps_the_same_number_of_points(profile: str) -> None:
    # issue #43 rule 3: a hypervolume only grows with points; 4 StyleRoute points against 2 StyleID and
    # 1 region AdaIN made the published lead
    chosen = E.EXPERIMENT.profile(profile)
    config = E.EXPERIMENT.config_for(chosen, {}, {})
    counts = {n: len(E.EXPERIMENT.build_system(n, config).sweep) for n in E.EXPERIMENT.system_names(chosen)}
    assert len(set(counts.values())) == 1, counts
    assert E.EXPERIMENT.metric("hv").points_metric == "sweep_points"


def test_adain_alpha_trades_style_for_content() -> None:
    content = E.load_content("coffee", 32)
    style = E.load_style("grass")[:32, :32]
    full = E.baselines.global_adain_lab(content, style)
    assert np.array_equal(E.baselines.global_adain_lab(content, style, alpha=1.0), full)
    assert np.allclose(E.baselines.global_adain_lab(content, style, alpha=0.0), content, atol=1e-3)
    half = E.baselines.region_adain_lab(content, style, 16, alpha=0.5)
    assert (
        0
        < np.abs(half - content).mean()
        < np.abs(E.baselines.region_adain_lab(content, style, 16) - content).mean()
    )
    with pytest.raises(ValueError, match="alpha"):
        E.baselines.global_adain_lab(content, style, alpha=1.5)


def test_seed_pairs_are_deterministic_and_cycle_the_styles() -> None:
    assert E.pair_for_seed(3, 2) == E.pair_for_seed(3, 2)
    assert [E.pair_for_seed(s, 2)[0] for s in range(5)] == list(E.PRIOR_STYLES)


def test_a_prior_failing_the_gate_makes_the_quality_metrics_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    config = E.StyleRouteExperimentConfig(contents_per_seed=1)
    monkeypatch.setattr(E, "_gate", lambda style: False)
    system = E.EXPERIMENT.build_system("global_adain", config)
    metrics = E.EXPERIMENT.run_cell(system, config, E.EXPERIMENT.profile("smoke"), 0, SilentProgress())
    assert math.isnan(metrics["hv"]) and metrics["prior_gate"] == 0.0
    assert metrics["sweep_points"] == len(config.adain_alphas)  # the count survives the gate
    assert np.isfinite(metrics["seconds_per_image"])


def test_content_copy_has_zero_hypervolume_and_full_structure() -> None:
    config = E.StyleRouteExperimentConfig()
    content = E.load_content("coffee", config.size)
    reference = E.StyleReference(E.load_style("grass"))
    scores = E.score(content, content, reference, E.object_mask("coffee", config.size))
    assert scores["structure"] == pytest.approx(1.0)
    assert E.hypervolume_2d(np.array([1.0]), np.array([scores["structure"]])) == 0.0


def test_bad_experiment_config() -> None:
    with pytest.raises(ValueError, match="contents_per_seed"):
        E.StyleRouteExperimentConfig(contents_per_seed=0)
    with pytest.raises(ValueError, match="budgets"):
        E.StyleRouteExperimentConfig(budgets=[1.5])
