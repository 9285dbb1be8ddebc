"""A2GNN, the DACS experiment's asymmetric-propagation baseline: it must work, and propagate as A2GNN does.

Issue 43: the first version re-applied the learned GCN layers three times to the target and scored at
chance (0.30-0.34 on 3 classes). These tests go through the public trainer on the smoke profile's data.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("torch_geometric")

from neurips26.methods.dacs import DACSConfig
from neurips26.methods.dacs.baselines import GDABaselineTrainer, a2gnn_hops, asymmetric_propagate
from neurips26.methods.dacs.graph_shift import make_csbm_pair
from neurips26.methods.dacs.integration import build_network

torch.set_num_threads(1)
CHANCE = 1 / 3  # the CSBM's 3 balanced classes
# declared floor on the mean over seeds 0-4: chance + 1/6. Measured (final epoch, all target nodes): mean
# 0.590 (0.42-0.74) now, DANN-GCN 0.611 on the same pairs; the broken version 0.340 (0.31-0.39)
A2GNN_FLOOR = 0.5
SEEDS = (0, 1, 2, 3, 4)


def _smoke_pair(seed: int):
    """The dacs smoke profile's data (coupled FS + FCSS, 300 nodes) and its method config (20 epochs)."""
    from neurips26.methods.dacs.experiment import EXPERIMENT

    profile = EXPERIMENT.profiles["smoke"]
    config = EXPERIMENT.config_for(profile, {"setting": "coupled"}, {})
    pair = make_csbm_pair(config.shift_spec(), seed=seed)
    target = pair.target.clone()
    for key in ("y", "subcluster", "clean_x"):
        del target[key]
    return pair, target, config.method


def _target_accuracy(trainer: GDABaselineTrainer, pair, target) -> float:
    return float((trainer.predict(target) == pair.target.y).float().mean())


def test_a2gnn_is_clearly_above_chance_on_the_smoke_data():
    accuracies = []
    for seed in SEEDS:  # ~0.3 s each
        pair, target, method = _smoke_pair(seed)
        config = DACSConfig(**{**method.__dict__, "seed": seed})
        trainer = GDABaselineTrainer("a2gnn", config).fit(pair.source, target)
        accuracies.append(_target_accuracy(trainer, pair, target))
    mean = sum(accuracies) / len(accuracies)
    assert mean > A2GNN_FLOOR, f"A2GNN mean target accuracy {mean:.3f} <= floor {A2GNN_FLOOR}: {accuracies}"
    assert min(accuracies) > CHANCE, f"A2GNN at or below chance on a seed: {accuracies}"


def test_asymmetric_propagation_applies_each_learned_layer_once():
    pair, _, _ = _smoke_pair(0)
    x, edge_index = pair.target.x, pair.target.edge_index
    model = build_network(DACSConfig(hidden=16), x.shape[1], 3)
    h0 = model.encode(x)
    # one step per layer is the shared GCN network exactly
    assert torch.equal(asymmetric_propagate(model, h0, edge_index, (1, 1)), model.propagate(h0, edge_index))
    # dense oracle: relu(h W1 + b1), then relu(Â^k (h W2) + b2) with Â = D^-1/2 (A + I) D^-1/2
    n = x.shape[0]
    adjacency = torch.zeros(n, n)
    adjacency[edge_index[1], edge_index[0]] = 1.0
    adjacency += torch.eye(n)
    scale = adjacency.sum(1).rsqrt()
    smoothing = scale[:, None] * adjacency * scale[None, :]
    first, last = model.convs
    with torch.no_grad():
        hidden = torch.relu(first.lin(h0) + first.bias)
        for k in (0, 2, 5):
            expected = torch.relu(torch.linalg.matrix_power(smoothing, k) @ last.lin(hidden) + last.bias)
            got = asymmetric_propagate(model, h0, edge_index, a2gnn_hops(2, k))
            assert torch.allclose(got, expected, atol=1e-5), k


def test_a2gnn_propagates_more_on_the_target_than_on_the_source():
    pair, target, method = _smoke_pair(0)
    trainer = GDABaselineTrainer("a2gnn", method, target_hops=3).fit(pair.source, target)
    model = trainer.model_
    h0 = model.encode(target.x)
    with torch.no_grad():
        on_target = model.classifier(asymmetric_propagate(model, h0, target.edge_index, (0, 3)))
        on_source = model.classifier(asymmetric_propagate(model, h0, target.edge_index, (0, 0)))
    assert torch.equal(trainer.predict_logits(target, "target"), on_target)
    assert torch.equal(trainer.predict_logits(target, "source"), on_source)
    assert not torch.equal(on_target, on_source)


def test_a2gnn_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="target_hops"):
        GDABaselineTrainer("a2gnn", target_hops=0)
    with pytest.raises(ValueError, match="source_hops"):
        GDABaselineTrainer("a2gnn", target_hops=2, source_hops=3)
    model = build_network(DACSConfig(hidden=8), 4, 3)
    with pytest.raises(ValueError, match="hops"):
        asymmetric_propagate(model, torch.zeros(5, 8), torch.zeros(2, 0, dtype=torch.long), (1,))
    pair, target, method = _smoke_pair(0)
    trainer = GDABaselineTrainer("a2gnn", DACSConfig(**{**method.__dict__, "epochs": 1}))
    trainer.fit(pair.source, target)
    with pytest.raises(ValueError, match="domain"):
        trainer.predict(target, domain="both")
