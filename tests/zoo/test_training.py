from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.zoo.specs import Phase, TrainConfig
from neurips26.zoo.training import _random_repeat_sample, build_batch, randrep_alphabet_ids


@settings(max_examples=12, deadline=None)
@given(seq_len=st.integers(8, 512), seed=st.integers(0, 2**16))
def test_random_repeat_is_periodic_and_scores_only_copyable_tokens(small_corpus, seq_len, seed):
    sample = _random_repeat_sample(small_corpus, np.random.default_rng(seed), seq_len, 2048)
    ids = np.asarray(sample.ids)
    assert len(ids) == seq_len and ids.min() >= 1 and ids.max() < 2048  # never the EOS id 0
    ((start, end),) = sample.spans
    period = start - 1
    assert 2 <= period <= max(3, seq_len // 2) and end == seq_len
    # every scored token equals the token one period earlier, and so does the one before it (the cue)
    np.testing.assert_array_equal(ids[period:], ids[:-period])


def test_a_phase_mixture_overrides_the_recipe_mixture(tokenizer, small_corpus):
    cfg = TrainConfig(mixture={"text": 1.0})
    rng = np.random.default_rng(0)
    _, weights, kinds = build_batch(tokenizer, small_corpus, rng, cfg, 64, 6, {"randrep": 1.0})
    assert kinds == ["randrep"] * 6
    assert (weights[:, 0] == 1).all() and (weights[:, -1] == cfg.answer_weight).all()
    _, _, kinds = build_batch(tokenizer, small_corpus, rng, cfg, 64, 6)
    assert kinds == ["text"] * 6


def test_bad_phase_mixture_names_the_field():
    with pytest.raises(ValueError, match=r"Phase\.mixture"):
        Phase(64, 2, 3, mixture={"prose": 1.0})
    with pytest.raises(ValueError, match=r"Phase\.mixture"):
        TrainConfig(phases=[{"seq_len": 64, "batch": 2, "steps": 3, "mixture": {"text": 0.0}}])


@settings(max_examples=12, deadline=None)
@given(seq_len=st.integers(8, 256), seed=st.integers(0, 2**16), alphabet=st.integers(2, 64))
def test_small_alphabet_randrep_stays_in_its_alphabet_and_period_cap(small_corpus, seq_len, seed, alphabet):
    cap = min(16, max(3, seq_len // 2))
    rng = np.random.default_rng(seed)
    sample = _random_repeat_sample(small_corpus, rng, seq_len, 2048, alphabet=alphabet, max_period=cap)
    ids = np.asarray(sample.ids)
    ((start, end),) = sample.spans
    period = start - 1
    assert len(ids) == seq_len and end == seq_len and 2 <= period <= cap
    assert set(ids.tolist()) <= set(randrep_alphabet_ids(alphabet, 2048).tolist())
    np.testing.assert_array_equal(ids[period:], ids[:-period])
    if period <= alphabet:  # no token repeats inside a period, so the copy target is unambiguous
        assert len(set(ids[:period].tolist())) == period


def test_randrep_alphabet_is_fixed_and_excludes_eos():
    a = randrep_alphabet_ids(32, 2048)
    np.testing.assert_array_equal(a, randrep_alphabet_ids(32, 2048))
    assert len(np.unique(a)) == 32 and a.min() >= 1 and a.max() < 2048
    with pytest.raises(ValueError, match="randrep_alphabet"):
        randrep_alphabet_ids(1, 2048)


def test_phase_randrep_options_reach_the_batch_and_are_validated(tokenizer, small_corpus):
    cfg = TrainConfig(mixture={"randrep": 1.0})
    ids, _, _ = build_batch(
        tokenizer,
        small_corpus,
        np.random.default_rng(1),
        cfg,
        64,
        8,
        randrep_alphabet=8,
        randrep_max_period=4,
    )
    assert set(ids.ravel().tolist()) <= set(randrep_alphabet_ids(8, len(tokenizer)).tolist())
    with pytest.raises(ValueError, match=r"Phase\.randrep_max_period"):
        Phase(64, 2, 3, randrep_max_period=40)
    with pytest.raises(ValueError, match=r"Phase\.randrep_alphabet"):
        Phase(64, 2, 3, randrep_alphabet=1)
    # the defaults draw exactly what the committed recipes drew (their logged losses stay reproducible)
    default = _random_repeat_sample(small_corpus, np.random.default_rng(5), 64, 2048)
    explicit = _random_repeat_sample(small_corpus, np.random.default_rng(5), 64, 2048, max_period=32)
    assert default.ids == explicit.ids


@pytest.mark.parametrize("seq_len", [8, 32, 65])
def test_random_mqar_answers_are_the_values_bound_to_the_queried_keys(seq_len):
    from neurips26.zoo.training import random_mqar_sample

    sample = random_mqar_sample(np.random.default_rng(seq_len), seq_len, 2048)
    ids = sample.ids
    pairs = seq_len // 4
    assert len(ids) == 4 * pairs and len(sample.spans) == pairs
    bound = dict(zip(ids[0 : 2 * pairs : 2], ids[1 : 2 * pairs : 2], strict=True))
    assert len(bound) == pairs  # distinct keys
    for start, end in sample.spans:
        assert end == start + 1 and ids[start] == bound[ids[start - 1]]
    assert 0 not in ids


def test_random_mqar_in_a_batch_weights_only_the_answers(small_corpus, tokenizer):
    cfg = TrainConfig(answer_weight=5.0)
    _, weights, kinds = build_batch(
        tokenizer, small_corpus, np.random.default_rng(0), cfg, 32, 3, {"randmqar": 1.0}
    )
    assert kinds == ["randmqar"] * 3
    assert ((weights == 5.0).sum(axis=1) == 8).all()
