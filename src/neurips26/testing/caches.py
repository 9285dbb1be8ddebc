"""Find module-level caches in a Python source file (shared work an experiment must declare as setup).

A module-level cache makes a cell's cost and memory depend on which cells ran before it in the same
process; the setup stage (:mod:`neurips26.bench.setup`) is the place for that work. This scanner reads the
source (no import) and reports

- functions decorated with ``functools.cache`` / ``functools.lru_cache`` (called or not), and
- module-level names bound to a dict, list or set (literal, comprehension or constructor call) that the
  module mutates (item assignment or deletion, ``|=``/``+=``, or a mutating method such as ``setdefault``)
  or hands to an object inside a function (``self._cache = _CACHE``).

A module-level constant that is never mutated (a table of ablations) is not a cache.
"""

from __future__ import annotations

import ast
from pathlib import Path

_CACHE_DECORATORS = {"cache", "lru_cache"}
_CONTAINER_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict"}
_MUTATORS = {
    "append",
    "extend",
    "insert",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "remove",
    "discard",
    "__setitem__",
}


def _decorator_name(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    return isinstance(value, ast.Call) and _decorator_name(value) in _CONTAINER_CALLS


def _module_containers(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound to a mutable container, with the line of the binding."""
    found: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and _is_container(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.lineno
    return found


def _aliased_names(tree: ast.Module) -> set[str]:
    """Names a function or class binds to something else (``self._cache = _CACHE``): they escape the
    module, so whether they are mutated cannot be seen here; they count as caches."""
    aliased: set[str] = set()
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Name):
                aliased.add(node.value.id)
    return aliased


def _mutated_names(tree: ast.Module) -> set[str]:
    """Names the module mutates in place anywhere (inside functions included)."""
    mutated: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                mutated.add(target.value.id)
            if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
                mutated.add(target.id)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and isinstance(node.func.value, ast.Name)
        ):
            mutated.add(node.func.value.id)
    return mutated


def module_caches(path: str | Path) -> list[str]:
    """Every module-level cache in the source file ``path``, as ``file:line: what`` (empty when none)."""
    source = Path(path)
    tree = ast.parse(source.read_text(), filename=str(source))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                name = _decorator_name(decorator)
                if name in _CACHE_DECORATORS:
                    found.append((node.lineno, f"@{name} on {node.name}()"))
    mutated, aliased = _mutated_names(tree), _aliased_names(tree)
    for name, line in _module_containers(tree).items():
        if name in mutated:
            found.append((line, f"module-level {name} is mutated (a cache)"))
        elif name in aliased:
            found.append((line, f"module-level {name} is aliased in a function (a cache)"))
    return [f"{source.name}:{line}: {what}" for line, what in sorted(found)]


__all__ = ["module_caches"]
