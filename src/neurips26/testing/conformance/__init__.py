"""Ecosystem conformance testers, one module per API family (issue 42 item 5).

``TESTERS[family](factory)`` builds a tiny instance with the zero-argument ``factory`` and raises
``AssertionError`` with a clear message when the object does not behave as its ecosystem expects. Methods
declare ``CONFORMANCE = ((family, "module.path:factory"), ...)`` in their package ``__init__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neurips26.testing.conformance.flower_strategy import check_flower_strategy
from neurips26.testing.conformance.pipeline import check_pipeline
from neurips26.testing.conformance.press import check_press
from neurips26.testing.conformance.quantizer import check_quantizer

Tester = Callable[[Callable[[], Any]], None]

TESTERS: dict[str, Tester] = {
    "press": check_press,
    "quantizer": check_quantizer,
    "flower_strategy": check_flower_strategy,
    "pipeline": check_pipeline,
}

__all__ = ["TESTERS", "Tester"]
