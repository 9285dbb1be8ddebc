"""SpectralKV's evaluation: the cached decode equals the uncached model, fidelity of the full cache is 0."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("kvpress")

from neurips26.methods.spectralkv.evaluation import decode_continuation, repeated_text_batch
from neurips26.zoo.builders import tiny_llama
from neurips26.zoo.press_eval import cache_bytes, compressed_prefill, text_batch


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
