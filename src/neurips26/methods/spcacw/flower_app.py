"""The packaged Flower App of SP-CACW: one ``ServerApp`` and one ``ClientApp``.

The run-config key ``federation`` chooses the data: ``digits`` (scikit-learn's 8x8 digits, ``n-concepts``
rotation concepts) or ``fmnist`` (Fashion-MNIST from Debian's ``dataset-fashion-mnist``, one concept, as in
the experiment's ``fmnist`` profile); ``dirichlet``, ``n-clients`` and ``data-seed`` shape either, and the
MLP's input size follows the federation's images.

The same two objects run under every Flower engine with no code change:

- Simulation Engine: :func:`simulate` (``flwr.simulation.run_simulation(server_app, client_app,
  num_supernodes=N, backend_config={"init_args": {...}})`` on the apps of :func:`build_apps`);
- Deployment Engine: ``flwr run src/neurips26/methods/spcacw/flwr_app <superlink>`` (the app's
  ``pyproject.toml`` names ``server_app`` and ``client_app`` below); ``benchmarks/spcacw/spcacw_loopback.py``
  starts one ``flower-superlink`` and three ``flower-supernode`` processes on 127.0.0.1.

Every client replays the in-process engine's minibatch stream: it keeps a copy of the engine's random
generator in ``context.state`` (``draws`` counts the minibatches drawn so far) and takes its own row of each
``ClientData.sample_batch`` draw, so a Flower run and :func:`~neurips26.methods.spcacw.engine.run_weighted`
with the same seed train on the same minibatches and give the same weights (up to float32 vs float64
arithmetic). The replay is exact when every client trains every round (``fraction-train = 1``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurips26.core.validation import check_choice
from neurips26.methods.spcacw.config import SPCACWConfig
from neurips26.methods.spcacw.engine import FlatMLP
from neurips26.methods.spcacw.fashion_mnist import PIXELS, fmnist_federation
from neurips26.methods.spcacw.federated import ClientData, digits_federation
from neurips26.methods.spcacw.integration import SPCACWStrategy, make_client_app

try:
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context
    from flwr.serverapp import Grid, ServerApp
except ImportError as exc:  # pragma: no cover - exercised where flwr is missing
    raise ImportError("the SP-CACW Flower App needs Flower: pip install 'neurips26[flower]'") from exc

#: The run config of the packaged App (``flwr_app/pyproject.toml`` repeats it; tests check they agree).
RUN_CONFIG: dict[str, Any] = {
    "num-server-rounds": 5,
    "federation": "digits",
    "n-clients": 3,
    "n-concepts": 1,
    "dirichlet": 0.3,
    "target": 0,
    "hidden": 16,
    "batch": 16,
    "lr": 0.1,
    "smoothness": 100.0,
    "local-steps": 2,
    "seed": 0,
    "data-seed": 0,
    "rule": "bound",
    "log-path": "",
}


#: The input size (pixels of an image) of each federation the App can build; both have 10 classes.
INPUTS = {"digits": 64, "fmnist": PIXELS}


@cache
def federation(name: str, n_clients: int, n_concepts: int, dirichlet: float, data_seed: int) -> ClientData:
    """The federation of a run (built once per process): ``digits`` or ``fmnist`` (one concept)."""
    check_choice("federation", name, INPUTS)
    if name == "digits":
        return digits_federation(n_clients, n_concepts, dirichlet=dirichlet, seed=data_seed)
    if n_concepts != 1:
        raise ValueError(f"n-concepts={n_concepts}: the fmnist federation has one concept (label skew only)")
    return fmnist_federation(n_clients, dirichlet, seed=data_seed)


def run_federation(run: dict[str, Any]) -> ClientData:
    """The federation a run config names."""
    keys = ("n-clients", "n-concepts", "dirichlet", "data-seed")
    n_clients, n_concepts, dirichlet, data_seed = (run[key] for key in keys)
    return federation(
        str(run["federation"]), int(n_clients), int(n_concepts), float(dirichlet), int(data_seed)
    )


def run_model(run: dict[str, Any]) -> FlatMLP:
    """The run's MLP: the federation's input size, ``hidden`` tanh units, 10 classes."""
    check_choice("federation", run["federation"], INPUTS)
    return FlatMLP((INPUTS[str(run["federation"])], int(run["hidden"]), 10))


def initial_parameters(run: dict[str, Any]) -> torch.Tensor:
    """The target's initial flat parameters (P,), the same the engine gets as ``theta0``."""
    return run_model(run).init(1, torch.Generator().manual_seed(int(run["seed"])))[0]


def spcacw_config(run_config: dict[str, Any]) -> SPCACWConfig:
    """The strategy's and the engine's :class:`SPCACWConfig` from a run config."""
    return SPCACWConfig(
        update="delta", lr=float(run_config["lr"]), smoothness=float(run_config["smoothness"]),
        local_steps=int(run_config["local-steps"]), variance_every=1,  # Flower clients report s_i every round
    )  # fmt: skip


def client_train(
    arrays: dict[str, np.ndarray],
    config: dict[str, Any],
    context: Context,
    defaults: dict[str, Any] | None = None,
) -> tuple[dict[str, np.ndarray], int, float]:
    """One client's round: ``local-steps`` SGD steps on its replayed minibatches, and its variance.

    The generator state and the number of minibatches drawn so far live in ``context.state`` (a Flower
    ``ConfigRecord``), so the client resumes the engine's stream across rounds and processes.
    """
    run = {**(defaults or RUN_CONFIG), **dict(context.run_config)}
    cid = int(context.node_config["partition-id"])
    data = run_federation(run)
    model = run_model(run)
    steps, lr, groups = int(config["local-steps"]), float(config["lr"]), int(config["variance-groups"])
    record = context.state.config_records.get("spcacw-rng")
    generator = torch.Generator()
    if record is None:
        generator.manual_seed(int(run["seed"]))
        draws = 0
    else:
        generator.set_state(torch.frombuffer(bytearray(record["state"]), dtype=torch.uint8))
        draws = int(record["draws"])
    wanted = (int(config["server-round"]) - 1) * steps  # draws of the rounds before this one
    while draws < wanted:  # a round this client was not sampled in: skip its draws
        data.sample_batch(int(run["batch"]), generator)
        draws += 1
    phi = torch.from_numpy(np.asarray(arrays["theta"], dtype=np.float32)).reshape(1, -1).clone()
    variance = 0.0
    for _ in range(steps):
        x, y = data.sample_batch(int(run["batch"]), generator)
        draws += 1
        g, s = model.gradient_and_variance(phi, x[cid : cid + 1], y[cid : cid + 1], groups)
        phi = phi - lr * g
        variance += float(s[0])
    context.state.config_records["spcacw-rng"] = ConfigRecord(
        {"state": generator.get_state().numpy().tobytes(), "draws": draws}
    )
    return {"theta": phi[0].numpy()}, int(data.count[cid]), variance / steps**2


def build_apps(overrides: dict[str, Any] | None = None) -> tuple[ServerApp, Any, dict[str, Any]]:
    """A ``(server_app, client_app, outcome)`` triple whose run config is ``RUN_CONFIG``, then ``overrides``,
    then the run's own ``context.run_config`` (what ``flwr run --run-config`` sets).

    ``outcome`` receives the ServerApp's ``strategy`` and final ``theta`` when the ServerApp runs in this
    process (the Simulation Engine runs it in a thread of the caller).
    """
    base = {**RUN_CONFIG, **(overrides or {})}
    outcome: dict[str, Any] = {}

    def train(arrays: dict[str, np.ndarray], config: dict[str, Any], context: Context) -> Any:
        return client_train(arrays, config, context, base)

    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        run = {**base, **dict(context.run_config)}
        n = int(run["n-clients"])
        strategy = SPCACWStrategy(
            int(run["target"]), n, spcacw_config(run), rule=str(run["rule"]),
            fraction_train=1.0, min_train_nodes=n, min_available_nodes=n, fraction_evaluate=0.0,
        )  # fmt: skip
        theta0 = initial_parameters(run).numpy()
        result = strategy.start(
            grid=grid, initial_arrays=ArrayRecord({"theta": Array(theta0)}),
            num_rounds=int(run["num-server-rounds"]),
        )  # fmt: skip
        theta = result.arrays["theta"].numpy()
        outcome.update(strategy=strategy, theta=theta)
        if run["log-path"]:
            write_log(Path(str(run["log-path"])), strategy, theta)

    return server, make_client_app(train), outcome


_PACKAGED = build_apps()  # the packaged App (flwr_app/pyproject.toml); plain names for Flower's static check
server_app = _PACKAGED[0]
client_app = _PACKAGED[1]


def round_log(records: Sequence[Any], theta: np.ndarray) -> dict[str, Any]:
    """The per-round weights and certificates of ``records`` (``RoundRecord``s) and the final model."""
    return {
        "alpha": [list(map(float, r.alpha)) for r in records],
        "better_off_alone": [bool(r.better_off_alone) for r in records],
        "theta": np.asarray(theta, dtype=np.float64).tolist(),
    }


def write_log(path: Path, strategy: SPCACWStrategy, theta: np.ndarray) -> None:
    """:func:`round_log` as JSON (what the loopback check compares)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(round_log(strategy.log, theta)))


def simulate(overrides: dict[str, Any] | None = None, num_cpus: int = 2) -> dict[str, Any]:
    """Run the App on Flower's Simulation Engine (Ray, ``num_cpus`` cores, one per ClientApp) in this
    process; returns the ServerApp's :func:`round_log`."""
    from flwr.simulation import run_simulation

    server, client, outcome = build_apps(overrides)
    n_clients = int({**RUN_CONFIG, **(overrides or {})}["n-clients"])
    run_simulation(
        server, client, num_supernodes=n_clients,
        backend_config={"client_resources": {"num_cpus": 1},
                        "init_args": {"num_cpus": num_cpus, "include_dashboard": False}},
    )  # fmt: skip
    return round_log(outcome["strategy"].log, outcome["theta"])


def engine_reference(run_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The same run on the in-process engine: per-round weights and the final target model."""
    from neurips26.methods.spcacw.engine import run_weighted

    run = {**RUN_CONFIG, **(run_config or {})}
    result = run_weighted(
        run_federation(run), run_model(run), spcacw_config(run), rule=str(run["rule"]),
        rounds=int(run["num-server-rounds"]), batch=int(run["batch"]), seed=int(run["seed"]),
        targets=[int(run["target"])], theta0=initial_parameters(run),
    )  # fmt: skip
    return round_log(result.logs[int(run["target"])], result.theta[0].numpy())
