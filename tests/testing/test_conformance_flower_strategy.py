"""The Flower strategy tester passes flwr's own FedAvg and fails each deliberately broken strategy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import FedAvg

from neurips26.testing.conformance import TESTERS
from neurips26.testing.conformance.flower_strategy import FlowerCase

check_flower_strategy = TESTERS["flower_strategy"]


def _initial() -> ArrayRecord:
    return ArrayRecord({"w": Array(np.zeros((2, 3))), "b": Array(np.zeros(3))})


def _client(message, context):
    """Every client moves the model by its partition id and reports its sample count."""
    step = 1.0 + context.node_config["partition-id"]
    arrays = ArrayRecord({k: Array(v.numpy() + step) for k, v in message.content["arrays"].items()})
    metrics = MetricRecord({"num-examples": 10})
    return Message(RecordDict({"arrays": arrays, "metrics": metrics}), reply_to=message)


class _CrashesOnFailures(FedAvg):
    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        for msg in replies:
            _ = msg.content  # raises on an error reply
        return super().aggregate_train(server_round, replies)


class _WrongSignature(FedAvg):
    def aggregate_train(self, replies):  # type: ignore[override]
        return super().aggregate_train(1, replies)


class _NaNAggregate(FedAvg):
    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        if arrays is not None:
            arrays = ArrayRecord({k: Array(np.full_like(v.numpy(), np.nan)) for k, v in arrays.items()})
        return arrays, metrics


def _case(strategy) -> FlowerCase:
    return FlowerCase(strategy, _initial, _client)


def test_flwr_fedavg_conforms():
    check_flower_strategy(lambda: _case(lambda: FedAvg(fraction_evaluate=0.0)))


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_CrashesOnFailures, "raised on a failed reply"),
        (_WrongSignature, r"aggregate_train\('replies',\) must take"),
        (_NaNAggregate, "non-finite"),
        (object, "must subclass"),
    ],
)
def test_broken_strategies_fail(broken, message):
    build = (lambda: broken(fraction_evaluate=0.0)) if broken is not object else object
    with pytest.raises(AssertionError, match=message):
        check_flower_strategy(lambda: _case(build))
