"""The CSBM shift generator: two independent knobs, label-level matrix fixed, exact edge sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from scipy import stats

from neurips26.methods.dacs.graph_shift import (
    CSBMShift,
    label_block_matrix,
    make_csbm_pair,
    sample_block_edges,
)

torch.set_num_threads(1)


def _same_class_fraction(data) -> float:
    ei = data.edge_index
    return float((data.y[ei[0]] == data.y[ei[1]]).float().mean())


def _same_subcluster_fraction(data) -> float:
    ei = data.edge_index
    same_class = data.y[ei[0]] == data.y[ei[1]]
    return float((data.subcluster[ei[0]] == data.subcluster[ei[1]])[same_class].float().mean())


def test_feature_shift_leaves_the_edge_distribution_unchanged():
    # the same seed with and without FS: identical edges and labels, only features move
    plain = make_csbm_pair(seed=3, n_nodes=600, feature_shift=0.0)
    shifted = make_csbm_pair(seed=3, n_nodes=600, feature_shift=1.5)
    assert torch.equal(plain.target.edge_index, shifted.target.edge_index)
    assert torch.equal(plain.target.y, shifted.target.y)
    assert torch.equal(plain.target.clean_x, shifted.target.clean_x)
    # across seeds: the degree law of a FS-only target matches the source's (two-sample KS test)
    pair = make_csbm_pair(seed=4, n_nodes=2000, feature_shift=1.5)
    deg_s = torch.bincount(pair.source.edge_index[1], minlength=2000).numpy()
    deg_t = torch.bincount(pair.target.edge_index[1], minlength=2000).numpy()
    assert stats.ks_2samp(deg_s, deg_t).pvalue > 0.01
    # and the features really moved: the mean difference is the shift vector
    moved = (pair.target.x - pair.target.clean_x).mean(0)
    expected = 1.5 * pair.spec.class_separation * pair.shift_direction
    assert torch.allclose(moved, expected, atol=1e-5)


@pytest.mark.parametrize("mode", ["subcluster", "score"])
def test_structure_shift_leaves_features_and_label_level_edges_unchanged(mode):
    pair = make_csbm_pair(seed=5, n_nodes=3000, structure_shift=0.9, structure_mode=mode)
    source, target = pair.source, pair.target
    # feature marginal: per-coordinate two-sample KS tests (Bonferroni over coordinates)
    pvalues = [stats.ks_2samp(source.x[:, d].numpy(), target.x[:, d].numpy()).pvalue for d in range(16)]
    assert min(pvalues) > 0.01 / 16
    # label-level edge matrix: same homophily and mean degree (within sampling error)
    assert abs(_same_class_fraction(source) - _same_class_fraction(target)) < 0.03
    ratio = target.edge_index.shape[1] / source.edge_index.shape[1]
    assert 0.93 < ratio < 1.07
    # ... while the feature-conditional structure did change
    assert _same_subcluster_fraction(target) > _same_subcluster_fraction(source) + 0.1


def test_structure_shift_zero_means_no_fcss():
    pair = make_csbm_pair(seed=6, n_nodes=2000)
    assert abs(_same_subcluster_fraction(pair.target) - 0.5) < 0.05
    assert torch.allclose(pair.true_edge_ratio(), torch.ones(pair.source.edge_index.shape[1]))


def test_label_shift_and_degree_controls():
    pair = make_csbm_pair(seed=7, n_nodes=3000, label_shift=1.0)
    counts = torch.bincount(pair.target.y, minlength=3).float() / 3000
    expected = torch.as_tensor(pair.class_probs["target"], dtype=torch.float32)
    assert torch.allclose(counts, expected, atol=0.03)
    assert counts[2] > counts[0] + 0.2
    # B[y, y'] stays fixed under label shift (the label-level edge matrix is not the knob)
    assert torch.equal(torch.as_tensor(pair.block_matrix), torch.as_tensor(label_block_matrix(pair.spec)))
    pair = make_csbm_pair(seed=7, n_nodes=3000, degree_ratio=1.5)
    ratio = pair.target.edge_index.shape[1] / pair.source.edge_index.shape[1]
    assert 1.3 < ratio < 1.7


def test_true_edge_ratio_matches_the_empirical_conditional_ratio():
    # oracle: with prototypes = (class, sub-cluster), empirical P_T(b|a)/P_S(b|a) ~ the generator's ratio
    pair = make_csbm_pair(seed=8, n_nodes=6000, structure_shift=0.8, label_shift=0.7)
    k = 6

    def conditional(data):
        block = (data.y * 2 + data.subcluster).numpy()
        ei = data.edge_index.numpy()
        counts = np.bincount(block[ei[1]] * k + block[ei[0]], minlength=k * k).reshape(k, k).astype(float)
        return counts / counts.sum(1, keepdims=True), block

    p_s, block_s = conditional(pair.source)
    p_t, _ = conditional(pair.target)
    ei = pair.source.edge_index.numpy()
    empirical = (p_t / p_s)[block_s[ei[1]], block_s[ei[0]]]
    truth = pair.true_edge_ratio().numpy()
    assert np.corrcoef(empirical, truth)[0, 1] > 0.95
    assert np.abs(empirical - truth).mean() < 0.12


def test_block_sampler_agrees_with_pyg_stochastic_blockmodel_graph():
    from torch_geometric.utils import stochastic_blockmodel_graph

    sizes = np.array([120, 80, 100])
    probs = np.array([[0.10, 0.02, 0.01], [0.02, 0.15, 0.03], [0.01, 0.03, 0.08]])
    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    block_of = np.repeat(np.arange(3), sizes)

    def block_counts(edges):
        a, b = block_of[edges[0]], block_of[edges[1]]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        return np.bincount(lo * 3 + hi, minlength=9)

    ours = np.mean([block_counts(sample_block_edges(sizes, probs, rng)) for _ in range(30)], axis=0)
    torch.manual_seed(0)
    theirs = []
    for _ in range(30):
        ei = stochastic_blockmodel_graph(sizes.tolist(), torch.as_tensor(probs, dtype=torch.float)).numpy()
        ei = ei[:, ei[0] < ei[1]]
        theirs.append(block_counts(ei))
    theirs = np.mean(theirs, axis=0)
    assert offsets[-1] == 300
    np.testing.assert_allclose(ours, theirs, rtol=0.08, atol=3)
    # exactly distinct, ordered pairs
    edges = sample_block_edges(sizes, probs, rng)
    assert (edges[0] < edges[1]).all() or (edges[0] != edges[1]).all()
    assert len({(int(a), int(b)) for a, b in edges.T}) == edges.shape[1]


def test_label_block_matrix_gives_the_requested_degree_and_homophily():
    spec = CSBMShift(n_nodes=3000, avg_degree=10.0, homophily=0.7)
    block = label_block_matrix(spec)
    per_class = 1000
    assert block[0, 0] * per_class == pytest.approx(7.0)
    assert block[0, 1] * 2 * per_class == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_nodes": 2}, "n_nodes"),
        ({"structure_shift": 1.5}, "structure_shift"),
        ({"structure_mode": "random"}, "structure_mode"),
        ({"homophily": -0.1}, "homophily"),
        ({"feature_shift": -1.0}, "feature_shift"),
        ({"avg_degree": 2000.0, "n_nodes": 300}, "avg_degree"),
        ({"n_subclusters": 1, "structure_shift": 0.5}, "structure_shift"),
    ],
)
def test_bad_generator_input_names_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        make_csbm_pair(**kwargs)


def test_digits_pair_knobs_are_separate():
    from neurips26.methods.dacs.graph_shift import make_digits_pair

    plain = make_digits_pair(seed=0, feature_shift=0.0, structure_shift=0.0)
    fs_only = make_digits_pair(seed=0, feature_shift=0.5, structure_shift=0.0)
    fcss_only = make_digits_pair(seed=0, feature_shift=0.0, structure_shift=1.0)
    assert torch.equal(plain.target.edge_index, fs_only.target.edge_index)  # FS: edges untouched
    assert not torch.equal(plain.target.x, fs_only.target.x)
    assert torch.equal(plain.target.x, fcss_only.target.x)  # FCSS: features untouched
    assert not torch.equal(plain.target.edge_index, fcss_only.target.edge_index)
    assert plain.source.x.shape == (898, 64) and int(plain.source.y.max()) == 9
    with pytest.raises(ValueError, match="structure_shift"):
        make_digits_pair(structure_shift=2.0)
