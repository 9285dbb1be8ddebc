"""The Flower strategy family (flwr >= 1.20 Message API: ``flwr.serverapp.strategy.Strategy``).

What Flower users rely on:

- the strategy subclasses ``Strategy`` and keeps its method signatures (``configure_train``,
  ``aggregate_train``, ``configure_evaluate``, ``aggregate_evaluate``, ``summary``), so ``Strategy.start``
  and the ServerApp can drive it;
- ``strategy.start(grid, initial_arrays, num_rounds)`` runs whole rounds against real ClientApps and
  returns arrays with the initial arrays' names and shapes, finite;
- a failed reply (a Message carrying an ``Error``) is tolerated: aggregation skips it instead of raising,
  and a round whose replies all failed aggregates to nothing instead of raising.

The rounds run in process: a small grid hands each message to the case's ClientApp (no engine, no Ray).
(The legacy ``configure_fit``/``aggregate_fit`` API is deprecated in flwr 1.20+ and not checked.)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

_METHODS = ("configure_train", "aggregate_train", "configure_evaluate", "aggregate_evaluate", "summary")


@dataclass
class FlowerCase:
    """Builders of a fresh strategy and the initial arrays, a ClientApp (``client(message, context)``)
    answering every message type the strategy sends, and the federation size (node ids ``1..n_nodes``,
    node config ``{"partition-id": node_id - 1, "num-partitions": n_nodes}``)."""

    strategy: Callable[[], Any]
    initial_arrays: Callable[[], Any]
    client: Callable[[Any, Any], Any]
    n_nodes: int = 3
    num_rounds: int = 2


class InProcessGrid:
    """The part of ``flwr.serverapp.Grid`` a strategy uses, answering through a ClientApp in process."""

    def __init__(self, case: FlowerCase) -> None:
        from flwr.app import Context, RecordDict

        self.case = case
        self.contexts = {
            node: Context(
                1, node, {"partition-id": node - 1, "num-partitions": case.n_nodes}, RecordDict(), {}
            )
            for node in range(1, case.n_nodes + 1)
        }

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Iterable[Any], timeout: float | None = None) -> list[Any]:
        return [self.case.client(msg, self.contexts[msg.metadata.dst_node_id]) for msg in messages]


@contextlib.contextmanager
def server_identity() -> Iterator[None]:
    """Messages are built outside a running ServerApp here: give them the run id a ServerApp would."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def _check_signatures(strategy: Any) -> None:
    from flwr.serverapp.strategy import Strategy

    assert isinstance(strategy, Strategy), (
        f"{type(strategy).__name__} must subclass flwr.serverapp.strategy.Strategy (Message API)"
    )
    for name in _METHODS:
        expected = list(inspect.signature(getattr(Strategy, name)).parameters)[1:]
        got = list(inspect.signature(getattr(strategy, name)).parameters)
        assert got == expected, f"{type(strategy).__name__}.{name}{tuple(got)} must take {tuple(expected)}"


def _shapes(arrays: Any) -> dict[str, tuple[int, ...]]:
    return {name: tuple(array.numpy().shape) for name, array in arrays.items()}


def _check_arrays(arrays: Any, initial: Any, what: str) -> None:
    assert arrays is not None, f"{what}: the strategy aggregated no arrays"
    assert _shapes(arrays) == _shapes(initial), (
        f"{what}: arrays {_shapes(arrays)} != initial {_shapes(initial)}"
    )
    finite = all(np.isfinite(array.numpy()).all() for array in arrays.values())
    assert finite, f"{what}: the aggregated arrays hold non-finite values"


def _check_rounds(case: FlowerCase) -> None:
    initial = case.initial_arrays()
    result = case.strategy().start(InProcessGrid(case), initial, num_rounds=case.num_rounds)
    _check_arrays(result.arrays, initial, f"start() over {case.num_rounds} rounds")


def _error_reply(message: Any) -> Any:
    from flwr.app import Error, Message

    return Message(Error(code=0, reason="the client failed (conformance test)"), reply_to=message)


def _check_failures(case: FlowerCase) -> None:
    from flwr.app import ConfigRecord

    strategy, grid, initial = case.strategy(), InProcessGrid(case), case.initial_arrays()
    messages = list(strategy.configure_train(1, initial, ConfigRecord(), grid))
    assert messages, "configure_train sent no message to a federation of available nodes"
    replies = grid.send_and_receive(messages)
    replies[-1] = _error_reply(messages[-1])
    try:
        arrays, _ = strategy.aggregate_train(1, replies)
    except Exception as error:  # the contract under test: a failed reply must not stop the round
        raise AssertionError(f"aggregate_train raised on a failed reply: {error!r}") from error
    _check_arrays(arrays, initial, "aggregate_train with one failed reply")
    messages = list(strategy.configure_train(2, initial, ConfigRecord(), grid))
    try:
        strategy.aggregate_train(2, [_error_reply(msg) for msg in messages])
        strategy.aggregate_evaluate(2, [])
    except Exception as error:
        raise AssertionError(f"a round whose replies all failed (or none came) raised: {error!r}") from error


def check_flower_strategy(factory: Callable[[], FlowerCase]) -> None:
    """Run the Flower strategy contract on ``factory()``, a :class:`FlowerCase`."""
    case = factory()
    assert isinstance(case, FlowerCase), f"the factory must return a FlowerCase, got {type(case).__name__}"
    with server_identity():
        _check_signatures(case.strategy())
        _check_rounds(case)
        _check_failures(case)
