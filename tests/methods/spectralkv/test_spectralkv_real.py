"""The ``real`` profile: its task builders (no weights), its one-pass suffix scoring (= token-by-token
decoding, on a tiny model built in code), its task gate, and a smoke of the profile's machinery on the
real model (skipped unless it is converted in the user cache)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from neurips26.methods.spectralkv.real_tasks import (
    FULL_CACHE_BAR,
    build_context,
    code_lines,
    prose_lines,
    task_gate_lines,
)


class CharTokenizer:
    """One token per character: the builders' bookkeeping is checked without any model's vocabulary."""

    pad_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


FILLER = tuple(f"line {i:03d} of the filler text\n" for i in range(400))


@pytest.mark.parametrize("task", ["needle_prose", "kv_code"])
def test_a_context_plants_every_key_and_asks_for_it(task):
    tok = CharTokenizer()
    context = build_context(
        tok,
        task,
        np.random.default_rng(3),
        context_tokens=900,
        needles=4,
        continuation_tokens=40,
        lines=FILLER,
    )
    text = tok.decode(context.prefix)
    assert len(context.prefix) <= 900 and len(context.continuation) == 40
    assert len(context.questions) == 4
    for question, answer in context.questions:
        value = tok.decode(answer).strip()
        assert len(value) == 6 and value.isdigit() and text.count(value) == 1
        key = tok.decode(question).split()[-2]
        planted = next(line for line in text.splitlines() if value in line)
        assert key in planted  # the question names the key planted with this value
    # the continuation is the filler that followed the window, never a planted line
    tail = tok.decode(context.continuation)
    last = text.splitlines()[-1]
    assert tail.startswith(FILLER[(FILLER.index(last + "\n") + 1) % len(FILLER)][:40])


def test_contexts_are_reproducible_and_differ_between_seeds():
    tok = CharTokenizer()

    def make(seed: int) -> list[int]:
        rng = np.random.default_rng(seed)
        return build_context(
            tok, "needle_prose", rng, context_tokens=600, needles=3, continuation_tokens=8, lines=FILLER
        ).prefix

    assert make(1) == make(1) and make(1) != make(2)


def test_builders_reject_bad_arguments():
    tok = CharTokenizer()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="task must be one of"):
        build_context(tok, "summary", rng, context_tokens=600, needles=2, continuation_tokens=8, lines=FILLER)
    with pytest.raises(ValueError, match="needles must be at most"):
        build_context(
            tok, "kv_code", rng, context_tokens=600, needles=99, continuation_tokens=8, lines=FILLER
        )
    with pytest.raises(ValueError, match="too few filler lines"):
        build_context(tok, "kv_code", rng, context_tokens=100, needles=3, continuation_tokens=8, lines=FILLER)


def test_the_fillers_are_real_text_shipped_with_python():
    prose, code = prose_lines(), code_lines()
    assert len(prose) > 5000 and any("statement" in line for line in prose)
    assert len(code) > 20000 and any(line.startswith("def ") for line in code)


def test_the_task_gate_keeps_a_task_only_above_the_bar():
    def cell(system: str, value: float) -> dict:
        return {"system": system, "metrics": {"needle_acc": value, "kv_code_acc": 0.5}}

    lines = task_gate_lines(
        {"cells": [cell("full-cache", 1.0), cell("full-cache", 0.9), cell("random", 0.0)]}
    )
    assert len(lines) == 2
    assert "full cache 0.95" in lines[0] and lines[0].endswith("kept")
    assert f"bar {FULL_CACHE_BAR}" in lines[1] and "DROPPED" in lines[1]
    assert task_gate_lines({"cells": []}) == []


# --- one-pass suffix scoring = token-by-token decoding ------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("kvpress")
    from neurips26.zoo.builders import tiny_llama

    return tiny_llama(num_layers=3)


@pytest.mark.parametrize("name", ["full-cache", "pyramidkv", "adakv", "spectralkv"])
def test_one_pass_suffix_scoring_equals_token_by_token_decoding(model, name):
    """AdaKV masks head-wise, SpectralKV leaves layers of different lengths (PyramidKV would on a deeper
    model; on 3 layers it keeps equal ones)."""
    from neurips26.methods.spectralkv.baselines import make_baseline
    from neurips26.methods.spectralkv.evaluation import decode_continuation
    from neurips26.methods.spectralkv.integration import SpectralKVPress
    from neurips26.methods.spectralkv.real_eval import _logits, suffix_hidden
    from neurips26.methods.spectralkv.replay import capture_prefill, replay_press

    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 256, (2, 120), generator=gen)
    follow = torch.randint(0, 256, (2, 9), generator=gen)
    factory = (
        functools.partial(SpectralKVPress, compression_ratio=0.6)
        if name == "spectralkv"
        else functools.partial(make_baseline(name).press, 0.6)
    )
    capture = capture_prefill(model, ids)
    lengths = {layer.keys.shape[2] for layer in replay_press(model, capture, factory()).cache.layers}
    if name == "spectralkv":
        assert len(lengths) > 1  # entropy budgets: layers of different lengths, the padding path
    stepwise = decode_continuation(model, replay_press(model, capture, factory()), follow)
    prefill = replay_press(model, capture, factory())
    logits = torch.cat(
        [prefill.last_logits[:, None], _logits(model, suffix_hidden(model, prefill, follow[:, :-1]))], 1
    )
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), follow, reduction="none").double()
    assert torch.equal(logits.argmax(-1), stepwise.predictions)
    np.testing.assert_allclose(nll.mean(1).numpy(), stepwise.row_nll, rtol=1e-4, atol=1e-5)
    # rows may share one cache row (the questions of a context)
    own = suffix_hidden(model, prefill, follow[:, :-1])
    shared = suffix_hidden(model, prefill, follow[1:, :-1].repeat(2, 1), torch.tensor([1, 1]))
    torch.testing.assert_close(shared[0], own[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared[1], own[1], rtol=1e-5, atol=1e-5)
    assert all(layer.self_attn.masked_key_indices is None for layer in model.model.layers)


# --- the profile's machinery on the real model (skipped without its converted weights) ----------------------


def test_real_profile_machinery_on_the_real_model():
    pytest.importorskip("kvpress")
    from neurips26.zoo import real_lm

    name = "qwen2.5-coder-0.5b"
    if not (real_lm.real_model_dir(name) / real_lm.MANIFEST).is_file():
        pytest.skip(f"needs the converted {name}: {real_lm.INSTALL_COMMAND} && {real_lm.fetch_command(name)}")
    from neurips26.core.config import apply_overrides
    from neurips26.methods.spectralkv.config import SpectralKVConfig
    from neurips26.methods.spectralkv.experiment import PROFILES, SYSTEMS
    from neurips26.methods.spectralkv.real_eval import evaluate_real_seed

    profile = PROFILES["real"]
    config = apply_overrides(
        SpectralKVConfig(),
        {
            **profile.overrides,
            "real.context_tokens": 256,
            "real.needles": 2,
            "real.continuation_tokens": 4,
            "real.tasks": ["needle_prose"],
        },
    )
    model, tokenizer = real_lm.load_real(name, verify=False)
    presses = {
        (system, 0.5): (functools.partial(SYSTEMS[system](config).press, 0.5, 0, None), False)
        for system in ("full-cache", "random")
    }
    results = evaluate_real_seed(model, tokenizer, config, presses, seed=0)
    full, random = results[("full-cache", 0.5)], results[("random", 0.5)]
    assert full["needle_acc"] == 1.0 and full["greedy_agreement"] == 1.0  # the model reads its full cache
    assert full["kept_fraction"] == 1.0 and random["kept_fraction"] == pytest.approx(0.5, abs=0.01)
    # 4 held-out tokens are a noisy perplexity (129 measured); uniform guessing would give the vocabulary size
    assert 1 < full["heldout_ppl"] < len(tokenizer) / 50
