"""SpectralKV's evaluation: cached decode = uncached model, full-cache fidelity 0, replay = a real prefill,
kept-set overlap, and the held-out probes with questions after a distractor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("kvpress")

from neurips26.methods.spectralkv.evaluation import decode_continuation, repeated_text_batch
from neurips26.methods.spectralkv.press_eval import cache_bytes, compressed_prefill, text_batch
from neurips26.zoo.builders import tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=2)


def test_token_by_token_continuation_equals_one_full_forward(model):
    ids = torch.randint(0, 256, (2, 80), generator=torch.Generator().manual_seed(0))
    prefill = compressed_prefill(model, ids[:, :60], None)
    nll = decode_continuation(model, prefill, ids[:, 60:]).nll
    with torch.no_grad():
        logits = model(ids).logits[:, 59:79]
    reference = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), ids[:, 60:].reshape(-1)
    )
    assert nll == pytest.approx(float(reference), rel=1e-4)


def test_full_cache_has_zero_fidelity_error_and_a_press_has_some(model):
    from kvpress import AdaKVPress, SnapKVPress

    ids = torch.randint(0, 256, (1, 120), generator=torch.Generator().manual_seed(1))
    full = compressed_prefill(model, ids[:, :100], None, keep_full=True)
    full_bytes = cache_bytes(full.cache)  # decoding below appends to the cache
    assert decode_continuation(model, full, ids[:, 100:], fidelity=True).fidelity_error == pytest.approx(
        0, abs=1e-5
    )
    pressed = compressed_prefill(
        model, ids[:, :100], SnapKVPress(compression_ratio=0.5, window_size=16), keep_full=True
    )
    assert decode_continuation(model, pressed, ids[:, 100:], fidelity=True).fidelity_error > 1e-3
    # kvpress compresses each layer in its own hook: the peak is one full layer plus the compressed ones
    assert pressed.peak_cache_bytes < full.peak_cache_bytes == full_bytes
    # a head-wise press masks instead of dropping: its masks survive later prefills for the decode
    ada = compressed_prefill(
        model, ids[:, :100], AdaKVPress(SnapKVPress(compression_ratio=0.5, window_size=16))
    )
    compressed_prefill(model, ids[:, :100], None)  # clears the modules' masks
    masked_nll = decode_continuation(model, ada, ids[:, 100:]).nll
    assert masked_nll != pytest.approx(
        decode_continuation(model, compressed_prefill(model, ids[:, :100]), ids[:, 100:]).nll
    )
    with pytest.raises(ValueError, match="keep_full"):
        decode_continuation(model, ada, ids[:, 100:], fidelity=True)


def test_text_batches_are_windows_and_repeats():
    stream = np.arange(1000)
    rng = np.random.default_rng(0)
    batch = text_batch(stream, rng, 3, 50)
    assert batch.shape == (3, 50) and bool((batch[:, 1:] - batch[:, :-1] == 1).all())
    rep = repeated_text_batch(stream, rng, 2, 40, 4, 5)
    assert (
        rep.shape == (2, 45)
        and torch.equal(rep[:, :10], rep[:, 30:40])
        and torch.equal(rep[:, 40:], rep[:, :5])
    )
    with pytest.raises(ValueError, match="copies"):
        repeated_text_batch(stream, rng, 2, 40, 3, 5)
    with pytest.raises(ValueError, match="fewer than"):
        text_batch(np.arange(10), rng, 1, 50)


# --- padded, weighted decoding --------------------------------------------------------------------------
def test_weighted_decode_ignores_padding_and_predicts_the_argmax(model):
    ids = torch.randint(0, 256, (2, 70), generator=torch.Generator().manual_seed(3))
    prefill = compressed_prefill(model, ids[:, :60], None)
    out = decode_continuation(model, prefill, ids[:, 60:])
    with torch.no_grad():
        logits = model(ids).logits[:, 59:69]
    assert torch.equal(out.predictions, logits.argmax(-1))
    # row 1 padded after 4 tokens with junk: its weighted NLL is that of its first 4 tokens only
    padded = ids[:, 60:].clone()
    padded[1, 4:] = 7
    weights = torch.ones(2, 10)
    weights[1, 4:] = 0
    weighted = decode_continuation(
        model, compressed_prefill(model, ids[:, :60], None), padded, weights=weights
    )
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 60:], reduction="none")
    assert weighted.row_nll[1] == pytest.approx(float(nll[1, :4].mean()), rel=1e-4)
    assert weighted.row_nll[0] == pytest.approx(float(nll[0].mean()), rel=1e-4)
    with pytest.raises(ValueError, match="weights"):
        decode_continuation(model, prefill, ids[:, 60:], weights=torch.ones(2, 3))


# --- replay: one forward pass, any press ----------------------------------------------------------------
def _presses():
    from kvpress import (
        AdaKVPress,
        ObservedAttentionPress,
        SnapKVPress,
        StreamingLLMPress,
        TOVAPress,
    )

    from neurips26.methods.spectralkv import SpectralKVPress

    return {
        "snapkv": (lambda: SnapKVPress(compression_ratio=0.75, window_size=16), "sdpa"),
        "adakv": (lambda: AdaKVPress(SnapKVPress(compression_ratio=0.75, window_size=16)), "sdpa"),
        "tova": (lambda: TOVAPress(compression_ratio=0.75), "sdpa"),
        "streamingllm": (lambda: StreamingLLMPress(compression_ratio=0.75, n_sink=4), "sdpa"),
        "h2o": (lambda: ObservedAttentionPress(compression_ratio=0.75), "eager"),
        "spectralkv": (lambda: SpectralKVPress(compression_ratio=0.75, window_size=16), "sdpa"),
        "spectralkv-uniform": (
            lambda: SpectralKVPress(compression_ratio=0.75, window_size=16, budget_mode="uniform"),
            "sdpa",
        ),
    }


@pytest.mark.parametrize("name", list(_presses()))
def test_replaying_a_press_on_a_captured_prefill_equals_prefilling_under_it(model, name):
    from neurips26.methods.spectralkv.replay import capture_prefill, replay_press

    factory, attention = _presses()[name]
    ids = torch.randint(0, 256, (2, 160), generator=torch.Generator().manual_seed(4))
    model.set_attn_implementation(attention)
    try:
        direct = compressed_prefill(model, ids, factory(), keep_full=True)
    finally:
        model.set_attn_implementation("sdpa")
    capture = capture_prefill(model, ids)
    replayed = replay_press(model, capture, factory(), attentions=attention == "eager")
    assert replayed.peak_cache_bytes == direct.peak_cache_bytes
    torch.testing.assert_close(replayed.last_logits, direct.last_logits, rtol=1e-4, atol=1e-4)
    for mine, theirs in zip(replayed.cache.layers, direct.cache.layers, strict=True):
        torch.testing.assert_close(mine.keys, theirs.keys, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, rtol=1e-4, atol=1e-4)
    for mine, theirs in zip(replayed.masked, direct.masked, strict=True):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    # the decode from either cache is the same
    follow = ids[:, 150:]
    a = decode_continuation(model, replayed, follow, fidelity=True)
    b = decode_continuation(model, direct, follow, fidelity=True)
    assert a.nll == pytest.approx(b.nll, rel=1e-4) and a.fidelity_error == pytest.approx(
        b.fidelity_error, rel=1e-3
    )


def test_replay_without_the_press_call_is_the_full_cache_not_a_compressed_one(model):
    from kvpress import SnapKVPress

    from neurips26.methods.spectralkv.replay import capture_prefill, replay_press

    ids = torch.randint(0, 256, (1, 120), generator=torch.Generator().manual_seed(5))
    capture = capture_prefill(model, ids)
    full = replay_press(model, capture, None)
    pressed = replay_press(model, capture, SnapKVPress(compression_ratio=0.5, window_size=16))
    assert full.cache.layers[0].keys.shape[2] == 120 and pressed.cache.layers[0].keys.shape[2] == 60


def test_kept_positions_and_jaccard(model):
    from kvpress import SnapKVPress, StreamingLLMPress

    from neurips26.methods.spectralkv.replay import (
        capture_prefill,
        kept_jaccard,
        kept_positions,
        replay_press,
    )

    ids = torch.randint(0, 256, (2, 100), generator=torch.Generator().manual_seed(6))
    capture = capture_prefill(model, ids)
    stream = replay_press(model, capture, StreamingLLMPress(compression_ratio=0.5, n_sink=4))
    kept = kept_positions(capture.keys[0], stream.cache.layers[0].keys)
    expected = torch.zeros(100, dtype=torch.bool)
    expected[:4] = True
    expected[-46:] = True
    assert bool((kept == expected).all())
    snap = replay_press(model, capture, SnapKVPress(compression_ratio=0.5, window_size=16))
    snap_kept = kept_positions(capture.keys[0], snap.cache.layers[0].keys)
    assert kept_jaccard(snap_kept, snap_kept) == 1.0
    assert 0 < kept_jaccard(kept, snap_kept) < 1
    with pytest.raises(ValueError, match="matches no full key"):
        kept_positions(capture.keys[0], capture.keys[0][..., :50, :] + 1.0)


# --- probes with the question after a distractor, on the context-using zoo model ------------------------
@pytest.fixture(scope="module")
def ctx_model():
    from neurips26 import zoo
    from neurips26.zoo.evaluation import heldout_tokens

    model, tokenizer = zoo.load("tiny-llama-ctx")
    model.set_attn_implementation("sdpa")
    return model, tokenizer, heldout_tokens(tokenizer)


def _accuracy(model, batch, press):
    from neurips26.methods.spectralkv.probing import score_answers
    from neurips26.methods.spectralkv.replay import capture_prefill, replay_press

    prefill = replay_press(model, capture_prefill(model, batch.prefix), press)
    decoded = decode_continuation(model, prefill, batch.suffix, weights=batch.real)
    return float(np.mean(score_answers(batch, decoded.predictions)))


def test_probe_batches_put_the_question_after_the_distractor(ctx_model):
    from neurips26.methods.spectralkv.probing import probe_batch
    from neurips26.zoo.ctx import is_heldout

    _, tokenizer, data = ctx_model
    batch = probe_batch(tokenizer, data, "kv", 256, 3, seed=0, distractor=48)
    assert batch.prefix.shape == (3, 256 + 48) and batch.n_answers == 12
    for row in range(3):
        suffix = tokenizer.decode(batch.suffix[row][batch.real[row] > 0])
        assert suffix.startswith("assert") and suffix.count("assert") == 4
        window = tokenizer.decode(batch.prefix[row, -48:])
        questions = [line.split("==")[0].strip() for line in suffix.splitlines() if "==" in line]
        assert len(questions) == 4 and not any(q in window for q in questions)  # the window sees no question
        for start, end in batch.answers[row]:
            value = tokenizer.decode(batch.suffix[row, start:end]).strip()
            assert value.isdigit() and len(value) == 4 and is_heldout(value)
    window = probe_batch(tokenizer, data, "passkey", 256, 3, seed=0, placement="window")
    assert [len(spans) for spans in window.answers] == [1, 1, 1]
    tail = tokenizer.decode(window.prefix[0, -20:])
    assert "pass key is" in tail  # the question ends the prefix: it is inside the window
    with pytest.raises(ValueError, match="placement"):
        probe_batch(tokenizer, data, "kv", 256, 1, seed=0, placement="elsewhere")
    with pytest.raises(ValueError, match="kind"):
        probe_batch(tokenizer, data, "mqar", 256, 1, seed=0)


def test_full_cache_retrieves_after_the_distractor_and_recency_alone_does_not(ctx_model):
    from kvpress import StreamingLLMPress

    from neurips26.methods.spectralkv.probing import probe_batch

    model, tokenizer, data = ctx_model
    batch = probe_batch(tokenizer, data, "passkey", 512, 8, seed=1)
    assert _accuracy(model, batch, None) >= 0.75
    # sinks + the last 25% of the prefix hold the distractor, never the pass key (spliced anywhere before)
    assert _accuracy(model, batch, StreamingLLMPress(compression_ratio=0.875, n_sink=4)) <= 0.25
