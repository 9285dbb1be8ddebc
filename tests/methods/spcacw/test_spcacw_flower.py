"""SP-CACW's Flower strategy and App: FedAvg equivalence, dropped replies, bound weights, state round trip,
and the same weights as the in-process engine through the ClientApp, the Simulation Engine (Ray) and a
loopback Deployment Engine (one SuperLink, three SuperNodes), on the digits and the Fashion-MNIST
federations.

flwr is in the ``flower`` extra (part of ``all``); without it these tests skip. The Fashion-MNIST tests
skip without Debian's ``dataset-fashion-mnist``.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

from neurips26.methods.spcacw import SPCACWConfig, flower_app  # noqa: E402
from neurips26.methods.spcacw.fashion_mnist import PIXELS  # noqa: E402
from neurips26.methods.spcacw.integration import SPCACWStrategy, make_client_app  # noqa: E402
from tests.methods.spcacw.test_spcacw_fmnist import needs_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
# a small Fashion-MNIST federation with strong label skew: the target takes some peers and refuses others
FMNIST = {"federation": "fmnist", "n-clients": 5, "dirichlet": 0.1, "num-server-rounds": 3}


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


def test_packaged_app_config_and_components_match_the_module():
    project = tomllib.loads((ROOT / "src/neurips26/methods/spcacw/flwr_app/pyproject.toml").read_text())
    app = project["tool"]["flwr"]["app"]
    assert app["config"] == flower_app.RUN_CONFIG
    for key, name in (("serverapp", "server_app"), ("clientapp", "client_app")):
        assert app["components"][key] == f"neurips26.methods.spcacw.flower_app:{name}"
    assert flower_app.server_app is not None and flower_app.client_app is not None


def _in_process_flower_run(overrides: dict) -> tuple[SPCACWStrategy, np.ndarray]:
    """The strategy and the real ClientApp exchanging real Messages, with no engine in between."""
    run = {**flower_app.RUN_CONFIG, **overrides}
    n = run["n-clients"]
    _, client, _ = flower_app.build_apps(overrides)
    strategy = SPCACWStrategy(run["target"], n, flower_app.spcacw_config(run), rule=run["rule"])
    contexts = [Context(1, i + 1, {"partition-id": i}, RecordDict(), {}) for i in range(n)]
    arrays = ArrayRecord({"theta": Array(flower_app.initial_parameters(run).numpy())})
    for server_round in range(1, run["num-server-rounds"] + 1):
        messages = list(strategy.configure_train(server_round, arrays, ConfigRecord({}), _Grid(n)))
        replies = [client(msg, contexts[msg.metadata.dst_node_id - 1]) for msg in messages]
        arrays, _ = strategy.aggregate_train(server_round, replies)
    return strategy, arrays["theta"].numpy()


def _assert_same_as_engine(alphas: np.ndarray, theta: np.ndarray, overrides: dict) -> None:
    reference = flower_app.engine_reference(overrides)
    np.testing.assert_allclose(alphas, np.asarray(reference["alpha"]), atol=1e-6)
    np.testing.assert_allclose(theta, np.asarray(reference["theta"]), atol=1e-5)
    assert (alphas[1:, 1:] > 0.05).any()  # peers really get weight: the comparison is not Local vs Local


def test_client_app_replays_the_engine_and_the_strategy_reproduces_its_weights():
    overrides = {"num-server-rounds": 4}
    strategy, theta = _in_process_flower_run(overrides)
    _assert_same_as_engine(np.array([r.alpha for r in strategy.log]), theta, overrides)
    # the client's generator lives in context.state: a wrong seed there changes the minibatches and the model
    _, theta_wrong = _in_process_flower_run({**overrides, "seed": 1})
    assert np.abs(theta_wrong - theta).max() > 1e-3


@needs_data
def test_fmnist_client_app_replays_the_engine():
    strategy, theta = _in_process_flower_run(FMNIST)
    alphas = np.array([r.alpha for r in strategy.log])
    _assert_same_as_engine(alphas, theta, FMNIST)
    hidden = flower_app.RUN_CONFIG["hidden"]
    assert (
        theta.size == (PIXELS + 1) * hidden + (hidden + 1) * 10
    )  # a 784-input MLP: the input follows the data
    assert (alphas[1:, 1:] == 0.0).any()  # some peers get exactly zero (their bias): not a plain average


def test_federation_key_is_checked():
    with pytest.raises(ValueError, match="federation"):
        flower_app.initial_parameters({**flower_app.RUN_CONFIG, "federation": "mnist"})
    with pytest.raises(ValueError, match="n-concepts"):
        flower_app.run_federation({**flower_app.RUN_CONFIG, **FMNIST, "n-concepts": 2})


def test_run_simulation_gives_the_engine_weights():  # ~35 s (Ray start-up): kept in the default run
    overrides = {"num-server-rounds": 3}
    log = flower_app.simulate(overrides)
    _assert_same_as_engine(np.asarray(log["alpha"]), np.asarray(log["theta"]), overrides)


@needs_data
@pytest.mark.slow
def test_run_simulation_gives_the_engine_weights_on_fmnist():  # ~25-60 s: Ray; each worker loads the data
    overrides = {**FMNIST, "n-clients": 10}
    log = flower_app.simulate(overrides)
    _assert_same_as_engine(np.asarray(log["alpha"]), np.asarray(log["theta"]), overrides)


@pytest.mark.slow
def test_loopback_deployment_gives_the_engine_weights(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "spcacw_loopback", ROOT / "benchmarks/spcacw/spcacw_loopback.py"
    )
    loopback = importlib.util.module_from_spec(spec)
    sys.modules["spcacw_loopback"] = loopback
    spec.loader.exec_module(loopback)
    log = loopback.run_loopback(2, tmp_path)
    _assert_same_as_engine(np.asarray(log["alpha"]), np.asarray(log["theta"]), {"num-server-rounds": 2})
