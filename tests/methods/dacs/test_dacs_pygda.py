"""DACS: the PyGDA-format loader (on tiny fixtures written here), the sampled training path, the profiles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from neurips26.bench.experiment import NotApplicable, SilentProgress
from neurips26.methods.dacs import DACSConfig, DACSTrainer
from neurips26.methods.dacs.experiment import EXPERIMENT, K_SWEEP
from neurips26.methods.dacs.graph_shift import make_csbm_pair
from neurips26.methods.dacs.pygda_format import (
    TWITCH_DIM,
    PyGDAFilesMissing,
    degree_features,
    load_pygda_graph,
    load_pygda_pair,
)

# ---------------------------------------------------------------------------------------------------------
# fixtures in PyGDA's raw layout, written by us


def write_citation(root: Path, name: str, n: int = 60, d: int = 5, seed: int = 0, family: str = "citation"):
    rng = np.random.default_rng(seed)
    raw = root / family / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, d)) + y[:, None]
    np.savetxt(raw / f"{name}_docs.txt", x, delimiter=",", fmt="%.5f")
    src = rng.integers(0, n, 4 * n)
    dst = np.where(rng.random(4 * n) < 0.7, src, rng.integers(0, n, 4 * n))  # some self-loops
    dst = np.where(dst == src, (src + 1) % n, dst)
    edges = np.stack([src, dst], 1)
    edges = np.concatenate([edges, edges[:3], [[0, 0]]])  # duplicates and one self-loop
    np.savetxt(raw / f"{name}_edgelist.txt", edges, delimiter=",", fmt="%d")
    (raw / f"{name}_labels.txt").write_text("\n".join(map(str, y)) + "\n")
    return x, edges, y


def write_twitch(root: Path, name: str):
    raw = root / "twitch" / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    # id, days, mature, views, partner, new_id; out of order and one id twice (PyGDA keeps the first)
    rows = [
        ("11", "5", "True", "1", "False", "2"),
        ("12", "5", "False", "1", "False", "0"),
        ("13", "5", "True", "1", "False", "1"),
        ("14", "5", "False", "1", "False", "3"),
        ("15", "5", "False", "1", "False", "2"),
    ]
    text = "id,days,mature,views,partner,new_id\n" + "\n".join(",".join(r) for r in rows) + "\n"
    (raw / f"musae_{name}_target.csv").write_text(text)
    (raw / f"musae_{name}_edges.csv").write_text("from,to\n0,1\n1,2\n2,3\n")
    (raw / f"musae_{name}_features.json").write_text(json.dumps({"0": [1, 7], "2": [3169], "3": []}))


def write_airport(root: Path, name: str):
    raw = root / "airport" / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / f"{name}_edgelist.txt").write_text("0,1\n0,2\n0,3\n1,2\n")
    (raw / f"{name}_labels.txt").write_text("0\n1\n2\n3\n4\n")


def _edge_set(edge_index: torch.Tensor) -> set[tuple[int, int]]:
    return set(map(tuple, edge_index.t().tolist()))


def test_citation_files_load_as_undirected_graphs_without_self_loops(tmp_path):
    x, edges, y = write_citation(tmp_path, "ACMv9")
    data = load_pygda_graph(tmp_path, "citation", "ACMv9")
    assert torch.allclose(data.x, torch.as_tensor(x, dtype=torch.float32), atol=1e-5)
    assert torch.equal(data.y, torch.as_tensor(y))
    expected = {(int(a), int(b)) for a, b in edges if a != b}
    expected |= {(b, a) for a, b in expected}
    assert _edge_set(data.edge_index) == expected  # undirected, deduplicated, no self-loop
    assert data.edge_index.shape[1] == len(expected)


def test_twitch_labels_follow_new_id_and_features_are_multi_hot(tmp_path):
    write_twitch(tmp_path, "DE")
    data = load_pygda_graph(tmp_path, "twitch", "DE")
    assert data.y.tolist() == [0, 1, 1, 0]  # new_id 0..3; the second row of id 2 is ignored
    assert data.x.shape == (4, TWITCH_DIM)
    assert data.x[0].nonzero().view(-1).tolist() == [1, 7]
    assert data.x[2].nonzero().view(-1).tolist() == [3169]
    assert data.x[1].sum() == 0 and data.x[3].sum() == 0
    assert _edge_set(data.edge_index) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}


def test_airport_nodes_get_log_degree_one_hot_features(tmp_path):
    write_airport(tmp_path, "USA")
    data = load_pygda_graph(tmp_path, "airport", "USA")
    assert data.num_nodes == 5 and data.x.shape == (5, 16)
    # degrees 3, 2, 2, 1, 0 -> buckets floor(log2(1 + d)) = 2, 1, 1, 1, 0
    assert data.x.argmax(1).tolist() == [2, 1, 1, 1, 0]
    assert torch.equal(data.x.sum(1), torch.ones(5))
    assert degree_features(data.edge_index, 5, buckets=2).argmax(1).tolist() == [1, 1, 1, 1, 0]


def test_pair_loader_and_case_insensitive_family_folder(tmp_path):
    write_citation(tmp_path, "ACMv9", seed=0, family="Citation")
    write_citation(tmp_path, "DBLPv7", n=40, seed=1, family="Citation")
    pair = load_pygda_pair(tmp_path, "citation", "ACMv9", "DBLPv7")
    assert pair.source.num_nodes == 60 and pair.target.num_nodes == 40
    assert pair.names == ("ACMv9", "DBLPv7")


def test_missing_and_malformed_files_raise_clear_errors(tmp_path):
    with pytest.raises(PyGDAFilesMissing, match=r"ACMv9_docs\.txt"):
        load_pygda_graph(tmp_path, "citation", "ACMv9")
    with pytest.raises(ValueError, match="family"):
        load_pygda_graph(tmp_path, "cora", "ACMv9")
    with pytest.raises(ValueError, match="name"):
        load_pygda_graph(tmp_path, "citation", "Cora")
    write_citation(tmp_path, "ACMv9", n=10)
    with pytest.raises(ValueError, match="different domains"):
        load_pygda_pair(tmp_path, "citation", "ACMv9", "ACMv9")
    raw = tmp_path / "citation" / "ACMv9" / "raw"
    (raw / "ACMv9_edgelist.txt").write_text("0,1\n3,10\n")
    with pytest.raises(ValueError, match=r"ACMv9_edgelist.txt.*\[0, 10\)"):
        load_pygda_graph(tmp_path, "citation", "ACMv9")
    (raw / "ACMv9_edgelist.txt").write_text("0,1\n")
    (raw / "ACMv9_labels.txt").write_text("0\n1\n")
    with pytest.raises(ValueError, match="2 labels but"):
        load_pygda_graph(tmp_path, "citation", "ACMv9")


# ---------------------------------------------------------------------------------------------------------
# the experiment's pygda setting


def _pygda_config(root: Path, **extra):
    overrides = {
        "setting": "pygda",
        "pygda_root": str(root),
        "method.epochs": 4,
        "method.warmup_epochs": 1,
        "method.reestimate_every": 2,
        "method.n_prototypes": 3,
        **extra,
    }
    return EXPERIMENT.config_for(EXPERIMENT.profile("settings"), overrides, {})


def test_pygda_setting_is_not_applicable_without_files_and_says_so(tmp_path):
    config = _pygda_config(tmp_path)
    with pytest.raises(NotApplicable, match=r"PyGDA files absent.*pygda_root"):
        system = EXPERIMENT.build_system("dacs", config)
        EXPERIMENT.run(system, config, EXPERIMENT.profile("settings"), 0, SilentProgress())


def test_pygda_setting_runs_on_the_fixture(tmp_path):
    write_citation(tmp_path, "ACMv9", seed=0)
    write_citation(tmp_path, "DBLPv7", seed=1)
    config = _pygda_config(tmp_path)
    profile = EXPERIMENT.profile("settings")
    for name in ("dacs", "source_only"):
        metrics = EXPERIMENT.run(EXPERIMENT.build_system(name, config), config, profile, 0, SilentProgress())
        assert 0.0 <= metrics["target_accuracy"] <= 1.0
        assert "diagnosis_agreement" not in metrics  # real data: no ground truth for the diagnoser
    with pytest.raises(NotApplicable, match="strength"):
        strong = _pygda_config(tmp_path, strength=1.5)
        EXPERIMENT.run(EXPERIMENT.build_system("dacs", strong), strong, profile, 0, SilentProgress())


def test_profiles_report_label_shift_the_k_sweep_and_the_semi_real_pair():
    ksweep = EXPERIMENT.profile("ksweep")
    ks = [point["method.n_prototypes"] for point in ksweep.points()]
    assert min(ks) < 6 < max(ks) and 6 in ks and 8 in ks and ks == K_SWEEP * 2  # below, at, above 3 x 2
    settings = {point["setting"] for point in EXPERIMENT.profile("settings").points()}
    assert {"coupled_ls", "digits", "pygda"} <= settings
    headline = EXPERIMENT.claims[0]
    assert headline.covers({"setting": "coupled_ls"}) and headline.covers({"setting": "digits"})
    assert not headline.covers({"setting": "pygda"})  # unknown shift: no claim is made on real files
    seeds = EXPERIMENT.profile("seeds")
    assert seeds.seeds > EXPERIMENT.profile("default").seeds
    assert {p["setting"] for p in seeds.points()} == {"coupled", "coupled_score"}


# ---------------------------------------------------------------------------------------------------------
# the sampled (mini-batch) training path


def _pair(n_nodes: int = 160):
    pair = make_csbm_pair(seed=3, n_nodes=n_nodes, feature_shift=1.0, structure_shift=0.9)
    target = pair.target.clone()
    for key in ("y", "subcluster", "clean_x"):
        del target[key]
    source = pair.source.clone()
    for key in ("subcluster", "clean_x"):
        del source[key]
    return source, target


def _whole_graph_batch(data, edge_order: torch.Tensor | None = None):
    """The whole graph as one 'sampled' batch (every node a seed), edges in ``edge_order``."""
    batch = data.clone()
    order = torch.arange(data.edge_index.shape[1]) if edge_order is None else edge_order
    batch.edge_index = data.edge_index[:, order]
    batch.e_id = order
    batch.n_id = torch.arange(data.num_nodes)
    batch.batch_size = data.num_nodes
    return batch


CONFIG = DACSConfig(epochs=6, warmup_epochs=2, reestimate_every=2, n_prototypes=4, hidden=16)


def test_sampled_path_with_the_whole_graph_as_one_batch_equals_full_batch_training():
    source, target = _pair()
    full = DACSTrainer(CONFIG).fit(source, target)
    # edges shuffled inside the batch: the stage-2 weights must follow them by e_id
    perm = torch.randperm(source.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    batches = ([_whole_graph_batch(source, perm)], [_whole_graph_batch(target)])
    sampled = DACSTrainer(CONFIG).fit_sampled(source, target, loaders=batches)
    assert any(not torch.all(w == 1) for w in sampled.edge_weights_)  # stage 2 was active
    logits, expected = sampled.predict_logits(target), full.predict_logits(target)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)


def test_sampled_path_gathers_stage_two_weights_by_edge_id(monkeypatch):
    """Idea-off for the gathering: ignoring e_id (weights in the full graph's order) changes the result."""
    source, target = _pair()
    perm = torch.randperm(source.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    batches = ([_whole_graph_batch(source, perm)], [_whole_graph_batch(target)])
    right = DACSTrainer(CONFIG).fit_sampled(source, target, loaders=batches)
    wrong_batch = _whole_graph_batch(source, perm)
    wrong_batch.e_id = torch.arange(source.edge_index.shape[1])  # pretends the edges were not shuffled
    wrong = DACSTrainer(CONFIG).fit_sampled(source, target, loaders=([wrong_batch], batches[1]))
    assert not torch.allclose(right.predict_logits(target), wrong.predict_logits(target), atol=1e-4)


def test_sampled_path_bad_input():
    source, target = _pair(80)
    trainer = DACSTrainer(CONFIG)
    with pytest.raises(ValueError, match="batch_size"):
        trainer.fit_sampled(source, target, batch_size=0, loaders=([], []))
    with pytest.raises((ValueError, ImportError), match=r"num_neighbors|pyg-lib"):
        trainer.fit_sampled(source, target, num_neighbors=[5])


def test_neighbor_loader_path_needs_pyg_lib_or_says_so():
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE:
        pytest.skip("a neighbour sampler is installed: the sampled path itself is tested below")
    source, target = _pair(80)
    with pytest.raises(ImportError, match="pyg-lib or torch-sparse"):
        DACSTrainer(CONFIG).fit_sampled(source, target, batch_size=32)


def test_neighbor_loader_path_trains_where_pyg_lib_imports():
    pytest.importorskip("pyg_lib", reason="pyg-lib has no wheel for this torch: NeighborLoader cannot sample")
    source, target = _pair(400)
    config = DACSConfig(epochs=30, warmup_epochs=10, reestimate_every=10, hidden=32)
    trainer = DACSTrainer(config).fit_sampled(source, target, num_neighbors=[10, 10], batch_size=64)
    assert len(trainer.history_) > config.epochs  # several batches per epoch
    truth = make_csbm_pair(seed=3, n_nodes=400, feature_shift=1.0, structure_shift=0.9).target.y
    accuracy = float((trainer.predict(target) == truth).float().mean())
    assert accuracy > 0.5  # three classes: chance is 1/3
    assert all(w.shape == (source.edge_index.shape[1],) for w in trainer.edge_weights_)
