"""Ecosystem conformance: one tester per API family, run over every registered method.

A tester receives a zero-argument factory that builds a tiny instance (CPU, well under a second) and
raises ``AssertionError`` naming the broken expectation when the object does not behave as its ecosystem
(torch, gymnasium, scikit-learn/pyod, kvpress, torchao, Flower, diffusers) expects. Methods declare which
families they belong to in their package ``__init__.py``::

    CONFORMANCE = (("module", "neurips26.methods.<slug>.conformance:tiny_block"),)

and ``tests/test_conformance.py`` runs every declared pair. A method whose public API fits no family
declares ``CONFORMANCE = ()`` and a one-sentence ``CONFORMANCE_REASON``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neurips26.testing.conformance.estimator import EstimatorExample, check_estimator_family
from neurips26.testing.conformance.flower_strategy import check_flower_strategy
from neurips26.testing.conformance.gym_env import check_gym_env
from neurips26.testing.conformance.module import ModuleExample, check_module
from neurips26.testing.conformance.optimizer import check_optimizer
from neurips26.testing.conformance.pipeline import check_pipeline
from neurips26.testing.conformance.press import check_press
from neurips26.testing.conformance.quantizer import check_quantizer

Tester = Callable[[Callable[[], Any]], None]

TESTERS: dict[str, Tester] = {
    "module": check_module,
    "optimizer": check_optimizer,
    "gym_env": check_gym_env,
    "estimator": check_estimator_family,
    "press": check_press,
    "quantizer": check_quantizer,
    "flower_strategy": check_flower_strategy,
    "pipeline": check_pipeline,
}

__all__ = [
    "TESTERS",
    "EstimatorExample",
    "ModuleExample",
    "Tester",
    "check_estimator_family",
    "check_flower_strategy",
    "check_gym_env",
    "check_module",
    "check_optimizer",
    "check_pipeline",
    "check_press",
    "check_quantizer",
]
