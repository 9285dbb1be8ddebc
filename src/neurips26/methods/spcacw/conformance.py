"""Tiny instances for the conformance matrix (``neurips26.testing.conformance``)."""

from __future__ import annotations

from typing import Any

from neurips26.testing.conformance.flower_strategy import FlowerCase


def tiny_strategy() -> FlowerCase:
    """``SPCACWStrategy`` (target 0) with the packaged App's digits ClientApp, 3 nodes, in process."""
    from flwr.app import Array, ArrayRecord

    from neurips26.methods.spcacw import flower_app
    from neurips26.methods.spcacw.integration import SPCACWStrategy

    run = flower_app.RUN_CONFIG
    n_clients = int(run["n-clients"])

    def strategy() -> Any:
        config = flower_app.spcacw_config(run)
        return SPCACWStrategy(int(run["target"]), n_clients, config, fraction_evaluate=0.0)

    def initial_arrays() -> Any:
        theta = flower_app.initial_parameters(run)
        return ArrayRecord({"theta": Array(theta.numpy())})

    return FlowerCase(strategy, initial_arrays, flower_app.build_apps()[1], n_nodes=n_clients)
