"""SP-CACW as a Flower strategy (Message API) with a matching ClientApp factory.

``SPCACWStrategy`` extends Flower's ``FedAvg`` (same node sampling and messages) and replaces its
aggregation: the "global" model is the TARGET's model; every sampled client trains ``local_steps`` from
it and replies with its model, its sample count and its minibatch-gradient variance. The strategy turns
replies into pseudo-gradients ``g_i = (x - phi_i) / (K eta)``, updates the debiased bias estimates, solves
for the weights with :func:`~neurips26.methods.spcacw.core.choose_weights` (the same function the
in-process engine calls) and returns ``x - K eta sum_i alpha_i g_i = sum_i alpha_i phi_i``. With
``rule="samples"`` the weights are the sample counts and the aggregate is FedAvg's.

One target per strategy; "every client its own target" runs one strategy (one ServerApp) per target:
O(N^2) messages a round. flwr comes with the ``flower`` extra (in ``all``); without it this module still
imports and the strategy raises an ImportError that says what to install.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict
from logging import INFO, WARNING
from typing import Any

import numpy as np

from neurips26.methods.spcacw.config import SPCACWConfig
from neurips26.methods.spcacw.core import BiasEstimator, RoundRecord, choose_weights

try:  # flwr is an optional extra
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.common.logger import log
    from flwr.serverapp.strategy import FedAvg

    FLWR_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised where flwr is missing
    FLWR_AVAILABLE = False
    FedAvg = object  # type: ignore[assignment,misc]

CLIENT_ID_KEY = "client-id"
VARIANCE_KEY = "variance"
SAMPLES_KEY = "num-examples"


def _require_flwr() -> None:
    if not FLWR_AVAILABLE:
        raise ImportError(
            "SPCACWStrategy needs Flower: pip install 'neurips26[flower]' (flwr[simulation]==1.42.0, which "
            "pins protobuf<7 and ray==2.55.1)"
        )


def _flatten(arrays: Any) -> tuple[np.ndarray, list[tuple[str, tuple[int, ...]]]]:
    items = [(k, v.numpy()) for k, v in arrays.items()]
    spec = [(k, a.shape) for k, a in items]
    return np.concatenate([a.ravel().astype(np.float64) for _, a in items]), spec


class SPCACWStrategy(FedAvg):  # type: ignore[misc,valid-type]
    """Selfish-personalisation strategy: the aggregate is the target's next model.

    Parameters
    ----------
    target_id : the ``client-id`` (reported by each ClientApp) of the target.
    n_clients : number of clients that can reply (ids ``0..n_clients-1``).
    config : :class:`SPCACWConfig` (``lr`` and ``local_steps`` must match what the clients run).
    rule : ``"bound"`` (SP-CACW) or ``"samples"`` (FedAvg's weights, for the equivalence check).
    **fedavg_kwargs : passed to ``flwr.serverapp.strategy.FedAvg`` (fractions, minimum nodes, keys).
    """

    def __init__(
        self,
        target_id: int,
        n_clients: int,
        config: SPCACWConfig | None = None,
        rule: str = "bound",
        **fedavg_kwargs: Any,
    ) -> None:
        _require_flwr()
        super().__init__(**fedavg_kwargs)
        if isinstance(n_clients, bool) or not isinstance(n_clients, int) or n_clients < 2:
            raise ValueError(f"n_clients must be an integer >= 2 (the target and a peer), got {n_clients!r}")
        if not isinstance(target_id, int) or not 0 <= target_id < n_clients:
            raise ValueError(f"target_id={target_id!r} is not among the clients 0..{n_clients - 1}")
        if rule not in ("bound", "samples"):
            raise ValueError(f"rule={rule!r} is not allowed; choose 'bound' or 'samples'")
        self.target_id = target_id
        self.n_clients = n_clients
        self.config = config or SPCACWConfig(update="delta", local_steps=1)
        self.rule = rule
        self.estimator = BiasEstimator(n_clients, target_id, self.config.bias_decay)
        self.log: list[RoundRecord] = []
        self._sent: Any = None

    def summary(self) -> None:
        """Log the strategy's settings (Flower calls this at start)."""
        log(INFO, "\t├──> SP-CACW settings: target %s of %s clients, rule %s", self.target_id, self.n_clients,
            self.rule)  # fmt: skip
        log(INFO, "\t└──> %s", asdict(self.config))

    def configure_train(self, server_round: int, arrays: Any, config: Any, grid: Any) -> Iterable[Any]:
        """As FedAvg: send the target's model to the sampled nodes (remembered to form pseudo-gradients)."""
        self._sent = arrays
        config["local-steps"] = self.config.local_steps
        config["lr"] = self.config.lr
        config["variance-groups"] = self.config.variance_groups
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies: Iterable[Any]) -> tuple[Any, Any]:
        """Weights from the target's bound; returns ``sum_i alpha_i phi_i`` and the round's bound terms."""
        valid, _ = self._check_and_log_replies(list(replies), is_train=True, validate=False)
        if self._sent is None:
            raise RuntimeError("aggregate_train called before configure_train: no target model was sent")
        x, spec = _flatten(self._sent)
        models = np.zeros((self.n_clients, x.size))
        variance = np.full(self.n_clients, np.nan)
        samples = np.zeros(self.n_clients)
        observed = np.zeros(self.n_clients, bool)
        for msg in valid:
            metrics = next(iter(msg.content.metric_records.values()))
            cid = int(metrics[CLIENT_ID_KEY])
            if not 0 <= cid < self.n_clients:
                log(WARNING, "SP-CACW: dropped a reply from unknown client-id %s", cid)
                continue
            phi, reply_spec = _flatten(next(iter(msg.content.array_records.values())))
            s = float(metrics.get(VARIANCE_KEY, np.nan))
            if reply_spec != spec or not np.isfinite(phi).all() or not np.isfinite(s) or s < 0:
                log(WARNING, "SP-CACW: dropped client %s this round (shape mismatch or NaN)", cid)
                continue
            models[cid], variance[cid], samples[cid], observed[cid] = (
                phi,
                s,
                float(metrics[SAMPLES_KEY]),
                True,
            )
        if not observed[self.target_id]:
            log(WARNING, "SP-CACW: no valid reply from the target %s; its model is kept", self.target_id)
            return self._sent, MetricRecord({"better-off-alone": 1})
        k_eta = self.config.local_steps * self.config.lr
        grads = (x - models) / k_eta
        if self.rule == "samples":
            alpha = np.where(observed, samples, 0.0)
            alpha = alpha / alpha.sum()
            metrics = MetricRecord({"peer-weight": float(1 - alpha[self.target_id])})
        else:
            bias_sq = self.estimator.estimate()
            bias_sq[~observed] = np.inf
            if server_round <= self.config.warmup_rounds:
                bias_sq = np.where(np.arange(self.n_clients) == self.target_id, 0.0, np.inf)
            solution = choose_weights(
                self.estimator.variance(), bias_sq, scale=self.config.variance_scale,
                bias_form=self.config.bias_form, solver=self.config.solver, target=self.target_id,
            )  # fmt: skip
            alpha = solution.alpha
            dropped = [int(i) for i in np.flatnonzero(~observed)]
            self.log.append(
                RoundRecord.from_solution(server_round, solution, bias_sq, self.estimator.variance(), dropped)
            )
            distance = ((grads - grads[self.target_id]) ** 2).sum(1)
            self.estimator.update(np.where(observed, distance, np.nan), np.where(observed, variance, np.nan),
                                  observed)  # fmt: skip
            metrics = MetricRecord({
                "peer-weight": float(1 - alpha[self.target_id]), "bound": solution.bound,
                "local-bound": solution.local_bound, "better-off-alone": int(solution.better_off_alone),
            })  # fmt: skip
        new = x - k_eta * (alpha @ np.where(observed[:, None], grads, 0.0))
        out, offset = {}, 0
        for key, shape in spec:
            size = int(np.prod(shape))
            out[key] = new[offset : offset + size].reshape(shape)
            offset += size
        dtypes = {k: v.numpy().dtype for k, v in self._sent.items()}
        return ArrayRecord({k: _array(v.astype(dtypes[k])) for k, v in out.items()}), metrics

    def state_dict(self) -> dict[str, Any]:
        """The per-target state (estimator and log) as plain data; a ``ConfigRecord`` can carry it."""
        return {
            "target_id": self.target_id,
            "estimator": self.estimator.state_dict(),
            "log": [asdict(r) for r in self.log],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (e.g. a restarted ServerApp resuming a target)."""
        if int(state["target_id"]) != self.target_id:
            raise ValueError(
                f"state is for target {state['target_id']}, this strategy serves {self.target_id}"
            )
        self.estimator = BiasEstimator.from_state_dict(state["estimator"])
        self.log = [RoundRecord(**r) for r in state["log"]]


def _array(value: np.ndarray) -> Any:
    from flwr.app import Array

    return Array(np.ascontiguousarray(value))


TrainFn = Callable[[dict[str, np.ndarray], dict[str, Any], Any], tuple[dict[str, np.ndarray], int, float]]


def make_client_app(train_fn: TrainFn) -> Any:
    """A Flower ``ClientApp`` whose train handler runs ``train_fn(arrays, config, context)``.

    ``train_fn`` trains ``config["local-steps"]`` steps at rate ``config["lr"]`` from the received arrays and
    returns ``(new_arrays, num_examples, variance)``, ``variance`` being its estimate of its minibatch
    gradient's variance (e.g. :func:`~neurips26.methods.spcacw.core.within_client_variance` over
    ``config["variance-groups"]`` micro-batches). The client's id comes from ``context.node_config
    ["partition-id"]``; anything it must keep between rounds goes in ``context.state``.
    """
    _require_flwr()
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        arrays = {k: v.numpy() for k, v in msg.content["arrays"].items()}
        config = dict(msg.content["config"])
        rounds_seen = context.state.config_records.get("spcacw", ConfigRecord({"rounds": 0}))
        rounds_seen["rounds"] = int(rounds_seen["rounds"]) + 1
        context.state.config_records["spcacw"] = rounds_seen
        new, n, variance = train_fn(arrays, config, context)
        metrics = MetricRecord({
            SAMPLES_KEY: int(n), VARIANCE_KEY: float(variance),
            CLIENT_ID_KEY: int(context.node_config["partition-id"]),
        })  # fmt: skip
        content = RecordDict(
            {"arrays": ArrayRecord({k: _array(v) for k, v in new.items()}), "metrics": metrics}
        )
        return Message(content=content, reply_to=msg)

    return app
