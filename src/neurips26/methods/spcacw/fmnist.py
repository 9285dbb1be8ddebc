"""The ``fmnist`` task of the SP-CACW experiment: a Fashion-MNIST federation and its MLP.

The experiment's existing fields drive it (no new config field, so the default config's hash is
unchanged): ``n_clients``, ``dirichlet``, ``target_samples``, ``hidden`` and ``n_targets``. The idx files
are read from :data:`neurips26.methods.spcacw.fashion_mnist.DEBIAN_ROOT`; a missing install raises an
error naming
``apt-get install dataset-fashion-mnist``.
"""

from __future__ import annotations

from typing import Any

from neurips26.methods.spcacw.engine import FlatMLP
from neurips26.methods.spcacw.fashion_mnist import N_CLASSES, PIXELS, ByteClientData, fmnist_federation


def fmnist_data(config: Any, seed: int) -> ByteClientData:
    """The seed's Fashion-MNIST federation (~2 s to build): the experiment builds it once per (grid point,
    seed) in its ``fmnist_federation`` setup stage, so every system trains on the same partition."""
    return fmnist_federation(config.n_clients, config.dirichlet, config.target_samples, seed=seed)


def fmnist_task(config: Any, data: ByteClientData) -> tuple[ByteClientData, FlatMLP, list[int]]:
    """``(data, model, targets)`` for an experiment config with ``task="fmnist"``."""
    return data, FlatMLP((PIXELS, config.hidden, N_CLASSES)), list(range(config.n_targets))
