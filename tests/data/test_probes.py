from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.data.probes import Haystack, key_pool, make_probe, power_law_gaps
from neurips26.data.text import stdlib_root
from neurips26.zoo.tokenizer import load_tokenizer
from neurips26.zoo.training import newline_mask


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


@pytest.fixture(scope="module")
def hay(tok):
    text = (stdlib_root() / "json" / "decoder.py").read_text() + (stdlib_root() / "textwrap.py").read_text()
    mask = newline_mask(tok)
    return Haystack(np.asarray(tok.encode(text), dtype=np.int64), mask), mask


@pytest.mark.parametrize("kind", ["kv", "passkey", "mqar"])
@pytest.mark.parametrize("length", [256, 700])
def test_probe_has_exact_length_and_digit_answers(tok, hay, kind, length):
    haystack, mask = hay
    rng = np.random.default_rng(0)
    for _ in range(5):
        sample = make_probe(kind, tok, haystack, mask, rng, length)
        assert len(sample) == length and sample.kind == kind
        assert sample.spans
        for start, end in sample.spans:
            assert 0 < start < end <= length
            assert tok.decode(sample.ids[start:end]).isdigit()


def test_kv_answers_are_the_bound_values(tok, hay):
    haystack, mask = hay
    sample = make_probe("kv", tok, haystack, mask, np.random.default_rng(3), 600, n_bindings=5)
    text = tok.decode(sample.ids)
    bound = dict(re.findall(r"^    (\w+) = (\d{4})$", text, flags=re.M))
    assert len(bound) == 5
    answers = [tok.decode(sample.ids[s:e]) for s, e in sample.spans]
    queried = re.findall(r"^assert (\w+) == (\d+)$", text, flags=re.M)
    assert [v for _, v in queried] == answers
    assert all(bound[k] == v for k, v in queried)


def test_passkey_needle_precedes_the_question(tok, hay):
    haystack, mask = hay
    sample = make_probe("passkey", tok, haystack, mask, np.random.default_rng(1), 400)
    ((start, end),) = sample.spans
    key = tok.decode(sample.ids[start:end])
    assert len(key) == 5
    assert f"The pass key is {key}. Remember it." in tok.decode(sample.ids[:start])


def test_key_pool_has_single_token_free_identifiers(tok):
    keys = key_pool(tok)
    assert len(keys) >= 100
    assert "self" not in keys and "return" not in keys and "len" not in keys
    assert all(len(tok.encode(" " + k)) == 1 for k in keys[:50])


@settings(max_examples=30, deadline=None)
@given(low=st.integers(1, 20), span=st.integers(0, 200), alpha=st.floats(0.5, 2.0), seed=st.integers(0, 99))
def test_power_law_gaps_stay_in_range(low, span, alpha, seed):
    gaps = power_law_gaps(np.random.default_rng(seed), 64, low, low + span, alpha)
    assert gaps.min() >= low and gaps.max() <= low + span


def test_power_law_gaps_favour_short_gaps():
    gaps = power_law_gaps(np.random.default_rng(0), 20_000, 1, 100, 1.0)
    counts = np.bincount(gaps, minlength=101)[1:]
    assert counts[0] > counts[9] > counts[99]


def test_bad_inputs_name_the_argument(tok, hay):
    haystack, mask = hay
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="probe kind must be one of"):
        make_probe("needle", tok, haystack, mask, rng, 256)
    with pytest.raises(ValueError, match="length=20 is too short"):
        make_probe("kv", tok, haystack, mask, rng, 20)
    with pytest.raises(ValueError, match="low <= high"):
        power_law_gaps(rng, 3, 5, 2)
