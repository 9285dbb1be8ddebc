"""SOLAR on the real LMs (issue #45 item 5): the bound of Gemma 3 270M and Qwen2.5-Coder-0.5B comes from
their configs alone, on meta, with no weights and no cache; their MACs equal the architectures' closed forms.
The written-out shapes are checked against the converted models' ``config.json`` where the cache has them.
"""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from neurips26.methods.solar import analyze  # noqa: E402
from neurips26.methods.solar.config import SOLARConfig  # noqa: E402
from neurips26.methods.solar.experiment import _programs  # noqa: E402
from neurips26.methods.solar.real_lm import (  # noqa: E402
    REAL_LM_SHAPES,
    cached_config_matches,
    decoder_macs,
    meta_ids,
    meta_model,
)

TOKENS = 16


@pytest.mark.parametrize("name", sorted(REAL_LM_SHAPES))
def test_the_bound_comes_from_the_config_alone(name, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))  # an empty cache: nothing may be read from it
    model = meta_model(name)
    assert all(p.is_meta for p in model.parameters())
    report = analyze(model, [meta_ids(TOKENS)], hw="cpu-local")
    assert report.complete, report.unknown_ops
    assert report.macs == {"float32": decoder_macs(name, TOKENS)}
    assert report.bounds.cache_aware > 0
    assert not list(tmp_path.iterdir())


def test_the_closed_form_refuses_lengths_past_gemmas_window():
    with pytest.raises(ValueError, match="sliding window"):
        decoder_macs("gemma3-270m", 513)
    assert decoder_macs("qwen2.5-coder-0.5b", 513) > 0


def test_the_real_suite_names_each_model_and_length_and_builds_meta_without_weights():
    config = SOLARConfig(suite="real_lm", real_models=("qwen2.5-coder-0.5b",), real_tokens=(8, 32))
    programs = _programs(config)
    assert [p.name for p in programs] == ["qwen2.5-coder-0.5b@8", "qwen2.5-coder-0.5b@32"]
    _, inputs = programs[1].build_meta()
    assert inputs[0].shape == (1, 32) and inputs[0].is_meta
    assert programs[1].hand_macs == decoder_macs("qwen2.5-coder-0.5b", 32)
    with pytest.raises(ValueError, match="real_models"):
        SOLARConfig(suite="real_lm", real_models=("llama-7b",))
    with pytest.raises(ValueError, match="real_tokens"):
        SOLARConfig(suite="real_lm", real_tokens=(0,))


@pytest.mark.parametrize("name", sorted(REAL_LM_SHAPES))
def test_the_written_shapes_are_the_converted_models(name):
    from neurips26.zoo.real_lm import fetch_command, real_model_dir

    folder = real_model_dir(name)
    if not (folder / "config.json").is_file():
        pytest.skip(f"{name} is not converted in {folder}: {fetch_command(name)}")
    assert cached_config_matches(name, folder) == []
