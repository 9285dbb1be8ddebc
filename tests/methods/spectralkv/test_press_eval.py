"""Generic press evaluation helpers: peak cache bytes under a press, head-wise masks, random windows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("kvpress")

from neurips26.methods.spectralkv.press_eval import cache_bytes, compressed_prefill, kept_mask, text_batch
from neurips26.zoo.builders import tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=2)


def test_peak_cache_bytes_and_head_wise_masks(model):
    from kvpress import AdaKVPress, SnapKVPress

    ids = torch.randint(0, 256, (1, 100), generator=torch.Generator().manual_seed(1))
    full = compressed_prefill(model, ids, None, keep_full=True)
    assert full.peak_cache_bytes == cache_bytes(full.cache)
    assert [k.shape[2] for k, _ in full.full] == [100, 100]
    pressed = compressed_prefill(model, ids, SnapKVPress(compression_ratio=0.5, window_size=16))
    # kvpress compresses each layer in its own hook: the peak is one full layer plus the compressed ones
    assert cache_bytes(pressed.cache) < pressed.peak_cache_bytes < full.peak_cache_bytes
    assert pressed.peak_cache_bytes == cache_bytes(pressed.cache) + full.peak_cache_bytes // 4
    ada = compressed_prefill(model, ids, AdaKVPress(SnapKVPress(compression_ratio=0.5, window_size=16)))
    assert all(m is not None for m in ada.masked)
    compressed_prefill(model, ids, None)  # clears the modules' masks ...
    assert model.model.layers[0].self_attn.masked_key_indices is None
    ada.restore_masks(model)  # ... and the prefill puts them back for its decode
    assert model.model.layers[0].self_attn.masked_key_indices is ada.masked[0]


def test_kept_mask_reads_head_wise_masks():
    keys = torch.zeros(1, 2, 5, 4)
    masked = (torch.tensor([0]), torch.tensor([1]), torch.tensor([3]))
    mask = kept_mask(masked, keys)
    assert mask.sum() == 9 and not mask[0, 1, 3]
    assert kept_mask(None, keys).all()


def test_text_batches_are_windows():
    stream = np.arange(1000)
    batch = text_batch(stream, np.random.default_rng(0), 3, 50)
    assert batch.shape == (3, 50) and bool((batch[:, 1:] - batch[:, :-1] == 1).all())
    with pytest.raises(ValueError, match="fewer than"):
        text_batch(np.arange(10), np.random.default_rng(0), 1, 50)
