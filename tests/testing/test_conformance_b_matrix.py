"""Temporary: every (family, factory) pair declared for conform-b's families passes its tester.

The lead folds this into tests/test_conformance.py (the matrix over ``neurips26.registry.METHODS``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from neurips26.registry import METHODS
from neurips26.testing.conformance import TESTERS

METHODS_DIR = Path(__file__).resolve().parents[2] / "src" / "neurips26" / "methods"
FAMILY_PACKAGES = {
    "press": "kvpress",
    "quantizer": "torchao",
    "flower_strategy": "flwr",
    "pipeline": "diffusers",
}


def _declared(slug: str) -> tuple[tuple[str, str], ...]:
    """The method's ``CONFORMANCE`` literal, read without importing the package."""
    tree = ast.parse((METHODS_DIR / slug / "__init__.py").read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or (getattr(node, "targets", [None])[0])
        if getattr(target, "id", None) == "CONFORMANCE":
            return ast.literal_eval(node.value)
    return ()


PAIRS = [
    pytest.param(family, path, id=f"{slug}-{family}-{path.rpartition(':')[2]}")
    for slug in (spec.slug for spec in METHODS)
    for family, path in _declared(slug)
    if family in FAMILY_PACKAGES
]


def _factory(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("family", "path"), PAIRS)
def test_declared_pair_passes_its_tester(family, path):
    if importlib.util.find_spec(FAMILY_PACKAGES[family]) is None:
        pytest.skip(f"needs {FAMILY_PACKAGES[family]}")
    TESTERS[family](_factory(path))
