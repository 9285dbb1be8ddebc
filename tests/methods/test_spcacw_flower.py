"""SP-CACW's Flower strategy: FedAvg equivalence, dropped replies, bound weights, state round trip.

Skipped where flwr is not installed (it is an optional extra: it pins protobuf<7 and, with [simulation],
ray==2.55.1). Run it in an environment with ``pip install 'flwr==1.42.0'``.
"""

from __future__ import annotations

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

from neurips26.methods.spcacw import SPCACWConfig  # noqa: E402
from neurips26.methods.spcacw.integration import SPCACWStrategy, make_client_app  # noqa: E402


@pytest.fixture(autouse=True)
def _run_identity():
    """Messages are built outside a running ServerApp: give them a run id, as a ServerApp would."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def _arrays(vector: np.ndarray) -> ArrayRecord:
    return ArrayRecord({"w": Array(vector[:6].reshape(2, 3).copy()), "b": Array(vector[6:].copy())})


def _reply(cid: int, vector: np.ndarray, n: int, variance: float) -> Message:
    metrics = MetricRecord({"num-examples": n, "variance": variance, "client-id": cid})
    return Message(
        RecordDict({"arrays": _arrays(vector), "metrics": metrics}), dst_node_id=cid + 1, message_type="train"
    )


class _Grid:
    def __init__(self, n: int) -> None:
        self.n = n

    def get_node_ids(self):
        return list(range(1, self.n + 1))


def _configure(strategy: SPCACWStrategy, x: np.ndarray, server_round: int = 1) -> None:
    strategy.configure_train(server_round, _arrays(x), ConfigRecord({}), _Grid(strategy.n_clients))


def test_sample_count_weights_equal_flower_fedavg():
    rng = np.random.default_rng(0)
    x = rng.normal(size=8)
    replies = [_reply(i, x + rng.normal(size=8), n, 0.1) for i, n in enumerate([5, 40, 17, 3])]
    ours = SPCACWStrategy(0, 4, SPCACWConfig(update="delta", local_steps=2, lr=0.05), rule="samples")
    _configure(ours, x)
    mine, _ = ours.aggregate_train(1, replies)
    theirs, _ = FedAvg().aggregate_train(1, replies)
    for key in ("w", "b"):
        np.testing.assert_allclose(mine[key].numpy(), theirs[key].numpy(), rtol=1e-12, atol=1e-12)


def test_bound_weights_drop_harmful_and_invalid_replies():
    rng = np.random.default_rng(1)
    strategy = SPCACWStrategy(0, 4, SPCACWConfig(update="delta", local_steps=1, lr=0.1, smoothness=10.0))
    x = np.zeros(8)
    for r in range(1, 6):
        _configure(strategy, x, r)
        replies = [
            _reply(0, x - 0.1 * (1 + 0.3 * rng.normal(size=8)), 40, 0.72),
            _reply(1, x - 0.1 * (1 + 0.3 * rng.normal(size=8)), 40, 0.72),  # same task as the target
            _reply(2, x - 0.1 * (50 + 0.3 * rng.normal(size=8)), 40, 0.72),  # a far, harmful peer
            _reply(3, np.full(8, np.nan), 40, 0.72),  # a broken reply
        ]
        x_new, metrics = strategy.aggregate_train(r, replies)
    record = strategy.log[-1]
    assert record.dropped == [3] and record.alpha[3] == 0.0
    assert record.alpha[2] == 0.0 and record.alpha[1] > 0.2
    assert metrics["better-off-alone"] == 0 and np.isfinite(x_new["w"].numpy()).all()
    shapes = [_reply(1, np.zeros(8), 40, 0.1)]
    shapes[0].content["arrays"]["w"] = Array(np.zeros((3, 2)))
    _configure(strategy, x, 6)
    strategy.aggregate_train(6, [_reply(0, x, 40, 0.1), *shapes])
    assert strategy.log[-1].dropped == [1, 2, 3]


def test_strategy_state_round_trips_and_bad_input():
    strategy = SPCACWStrategy(1, 3)
    _configure(strategy, np.zeros(8))
    strategy.aggregate_train(1, [_reply(i, np.full(8, 0.1 * i), 10, 0.5) for i in range(3)])
    again = SPCACWStrategy(1, 3)
    again.load_state_dict(strategy.state_dict())
    np.testing.assert_array_equal(again.estimator.estimate(), strategy.estimator.estimate())
    assert again.log == strategy.log
    with pytest.raises(ValueError, match="target_id"):
        SPCACWStrategy(3, 3)
    with pytest.raises(ValueError, match="n_clients"):
        SPCACWStrategy(0, 1)
    assert make_client_app(lambda arrays, config, context: (arrays, 1, 0.0)) is not None
