"""POES gain-vs-headroom analysis on synthetic published results (no optimizer runs)."""

from __future__ import annotations

import numpy as np
import pytest

from neurips26.methods.poes.headroom import (
    best_baselines,
    headroom_analysis,
    headroom_table,
    plot_headroom,
)

SYSTEMS = ("poes", "full_evaluation", "base_a", "base_b", "base_c")


def synthetic_result(values: dict[str, np.ndarray], ks=(10, 20), tiers=(1,)) -> dict:
    """A published-result dict: values[system] has shape (tiers, ks, seeds, tasks)."""
    cells = []
    n_seeds = next(iter(values.values())).shape[2]
    for ti, tier in enumerate(tiers):
        for ki, k in enumerate(ks):
            for seed in range(n_seeds):
                for system, v in values.items():
                    tasks = v[ti, ki, seed]
                    cells.append(
                        {
                            "system": system,
                            "point": {"tier": tier, "k": k},
                            "seed": seed,
                            "status": "ok",
                            "metrics": {"final_accuracy": float(tasks.mean())},
                            "details": {"task_final_accuracy": tasks.tolist()},
                        }
                    )
    checks = [{"point": {"tier": t, "k": k}, "best_baseline": "base_a"} for t in tiers for k in ks]
    claim = {
        "metric": "final_accuracy",
        "kind": "better",
        "ours": "poes",
        "versus": ["base_a", "base_b", "base_c"],
        "checks": checks,
    }
    return {"cells": cells, "claims": [claim]}


def draws(rng: np.random.Generator, shape=(1, 2, 10, 20)) -> dict[str, np.ndarray]:
    """Per task a difficulty shared by every system, plus independent noise per system."""
    task = rng.normal(0.7, 0.05, size=shape)
    return {s: task + rng.normal(0, 0.03, size=shape) for s in SYSTEMS}


def test_shared_baseline_artefact_is_not_called_a_finding() -> None:
    """POES and the best baseline exchangeable (no concentration): gain and "that baseline's headroom"
    still correlate through the baseline's own noise. The shuffle null is fooled; the label swap is not."""
    values = draws(np.random.default_rng(0))
    stats = headroom_analysis(synthetic_result(values), headroom="same", level="task")[1]
    assert stats.corr > 0.3  # the artefact
    assert stats.p_shuffle < 0.01  # a shuffle null calls it significant
    assert stats.p > 0.05  # the label-swap null does not


def test_real_concentration_is_found_with_independent_headroom() -> None:
    rng = np.random.default_rng(1)
    values = draws(rng)
    room = values["full_evaluation"] - (values["base_b"] + values["base_c"]) / 2  # what "others" measures
    values["poes"] = values["base_a"] + 0.8 * room + rng.normal(0, 0.01, size=room.shape)
    stats = headroom_analysis(synthetic_result(values), headroom="others", level="task")[1]
    assert stats.corr > 0.5
    assert stats.p < 0.01
    assert stats.terciles()[2] > stats.terciles()[0]
    # and with no concentration the same analysis stays quiet
    quiet = headroom_analysis(synthetic_result(draws(rng)), headroom="others", level="task")[1]
    assert quiet.p > 0.05


def test_seed_level_points_and_best_baseline_come_from_the_claim() -> None:
    values = draws(np.random.default_rng(2), shape=(2, 2, 6, 3))
    result = synthetic_result(values, tiers=(1, 2))
    assert best_baselines(result)[(2, 20)] == ("base_a", ["base_a", "base_b", "base_c"])
    stats = headroom_analysis(result, level="seed")
    assert set(stats) == {1, 2}
    assert stats[1].n == 2 * 6  # k x seeds
    expected = values["poes"][0, 0, 0].mean() - values["base_a"][0, 0, 0].mean()
    assert stats[1].gain[0] == pytest.approx(expected)
    assert stats[1].best_baseline == {10: "base_a", 20: "base_a"}
    assert "base_a" in headroom_table(stats)


def test_named_systems_for_gain_and_headroom() -> None:
    """versus / headroom by name: POES minus base_b against full minus base_c (nothing shared)."""
    values = draws(np.random.default_rng(5), shape=(1, 2, 4, 5))
    stats = headroom_analysis(synthetic_result(values), versus="base_b", headroom="base_c", level="task")[1]
    assert not stats.shared and stats.p == stats.p_shuffle
    assert stats.best_baseline == {10: "base_b", 20: "base_b"}
    np.testing.assert_allclose(stats.gain[:5], values["poes"][0, 0, 0] - values["base_b"][0, 0, 0])
    room = values["full_evaluation"][0, 0, 0] - values["base_c"][0, 0, 0]
    np.testing.assert_allclose(stats.headroom[:5], room)
    same = headroom_analysis(synthetic_result(values), versus="base_b", headroom="base_b")[1]
    assert same.shared and same.p == same.p_swap


def test_plot_writes_a_png(tmp_path) -> None:
    result = synthetic_result(draws(np.random.default_rng(3)))
    rows = [headroom_analysis(result, headroom=h) for h in ("same", "others")]
    path = plot_headroom(rows, tmp_path / "fig" / "h.png", title="synthetic")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_names_the_argument() -> None:
    result = synthetic_result(draws(np.random.default_rng(4)))
    with pytest.raises(ValueError, match="level"):
        headroom_analysis(result, level="cell")
    with pytest.raises(ValueError, match="headroom"):
        headroom_analysis(result, headroom="")
    with pytest.raises(ValueError, match="permutations"):
        headroom_analysis(result, permutations=0)
    with pytest.raises(ValueError, match="result"):
        headroom_analysis({"claims": []})
    with pytest.raises(ValueError, match="claim"):
        headroom_analysis({"cells": [], "claims": []})
    with pytest.raises(ValueError, match="rows"):
        plot_headroom([], "unused.png")


def test_readme_headroom_snippet_runs_on_the_published_result(tmp_path) -> None:
    """The README's headroom snippet, from the repository root's view: the published seeds10 result."""
    from pathlib import Path

    from neurips26.testing.snippets import readme_snippets, run_snippet

    published = Path(__file__).resolve().parents[3] / "results" / "poes" / "seeds10.json"
    [snippet] = [s for s in readme_snippets("poes") if "headroom_analysis" in s.code]
    namespace = run_snippet(
        snippet,
        {
            '"results/poes/seeds10.json"': repr(str(published)),
            '"headroom.png"': repr(str(tmp_path / "h.png")),
        },
    )
    assert (tmp_path / "h.png").stat().st_size > 0
    assert set(namespace["same"]) and set(namespace["others"])
