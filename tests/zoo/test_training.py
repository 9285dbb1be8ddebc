from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.zoo.specs import Phase, TrainConfig
from neurips26.zoo.training import _random_repeat_sample, build_batch


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
