"""The conformance matrix: every registered method x every API family it declares, run by its tester.

Each method's package ``__init__.py`` declares ``CONFORMANCE`` (pairs of family and ``"module:factory"``),
a literal read here without importing the method; a method whose public API fits no family declares
``CONFORMANCE = ()`` and a one-sentence ``CONFORMANCE_REASON``. The method list is the registry's, so a new
method joins the matrix by being registered (and fails it until it declares).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest

from neurips26.registry import METHODS, method_readme
from neurips26.testing.conformance import TESTERS


def _package_init(slug: str) -> Path:
    return method_readme(slug).parent / "__init__.py"


def _literal(slug: str, name: str) -> Any:
    """The literal value of ``name`` assigned at the top level of the method's ``__init__.py``, or None."""
    tree = ast.parse(_package_init(slug).read_text(encoding="utf-8"))
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    return None


def _pairs() -> list:
    cases = []
    for spec in METHODS:
        for family, target in _literal(spec.slug, "CONFORMANCE") or ():
            cases.append(
                pytest.param(spec, family, target, id=f"{spec.slug}-{family}-{target.rpartition(':')[2]}")
            )
    return cases


@pytest.mark.parametrize("spec", METHODS, ids=lambda spec: spec.slug)
def test_every_method_declares_its_families_or_why_none_fits(spec) -> None:
    declared = _literal(spec.slug, "CONFORMANCE")
    assert declared is not None, (
        f"{spec.slug}: declare CONFORMANCE = ((family, 'module:factory'), ...) in its package __init__.py"
        f" (families: {sorted(TESTERS)}), or CONFORMANCE = () with CONFORMANCE_REASON"
    )
    if not declared:
        reason = _literal(spec.slug, "CONFORMANCE_REASON")
        assert isinstance(reason, str) and reason.strip(), (
            f"{spec.slug}: CONFORMANCE = () needs a CONFORMANCE_REASON"
        )
    for family, target in declared:
        assert family in TESTERS, (
            f"{spec.slug}: unknown conformance family {family!r}; known: {sorted(TESTERS)}"
        )
        module_name, _, factory = target.partition(":")
        assert module_name.startswith(f"neurips26.methods.{spec.slug}.") and factory.isidentifier(), (
            f"{spec.slug}: {target!r} must be 'neurips26.methods.{spec.slug}.<module>:<factory>'"
        )


@pytest.mark.parametrize(("spec", "family", "target"), _pairs())
def test_method_conforms_to_its_declared_family(spec, family, target) -> None:
    if spec.status != "ready":
        pytest.skip(f"{spec.slug} is {spec.status_text()}")
    module_name, _, factory_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    TESTERS[family](factory)
