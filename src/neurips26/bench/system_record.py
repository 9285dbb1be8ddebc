"""A system's record: the flat fields that make it this system, comparable across the experiment's systems.

Every experiment names its systems (``Experiment.systems``: name -> factory ``(config) -> system``), and each
method builds its own kind of object: a dataclass of switches and a nested method config, a press recipe
holding a builder function, a plain class. The record reads any of them the same way, so ``neurips26 info``
can print what makes each system differ from the others, in full, and the contract can check that no two
systems are one system under two names:

- a dataclass: its class and every field, ``repr=False`` ones included (a field hidden from ``repr`` still
  changes what the system computes), nested dataclasses as dotted keys (``method.avg_bits``);
- a mapping: one key per entry; a tuple or list of plain values: one value, otherwise one key per item;
- a function: its qualified name and the values it closed over (a recipe's ``build`` made by a factory is
  the factory's arguments), a ``functools.partial``: its function, arguments and keywords;
- another object of this package: its class and its public attributes; a third-party one: its repr.

What cannot be compared (an object whose only description is a memory address) is recorded as such, and
``undescribed_fields`` names it, so a check can refuse it rather than print ``<function ... at 0x7f...>``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
from collections.abc import Mapping
from typing import Any

CLASS_KEY = "__class__"
_MAX_DEPTH = 8  # closures can reach module globals; a record deeper than this describes nothing useful
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PLAIN = (str, int, float, bool, complex, bytes, type(None))


def system_record(system: Any) -> dict[str, Any]:
    """``system`` as flat ``{dotted key: plain value}`` fields (see the module docstring)."""
    record: dict[str, Any] = {}
    _collect(system, "", record, depth=0, seen=set())
    return record


def differing_fields(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each system's fields that are not the same in every record holding them, and its class where the
    systems are of several classes.

    A field only some records hold (a setting of one class of system) is shown where it varies among
    them, so a baseline of another class reads as its class and the few fields that set it apart. A
    system with no differing field (a plain value such as ``None`` for "no quantisation") is shown whole.
    """
    keys = sorted({key for record in records.values() for key in record}, key=_class_first)
    classes_differ = len({record.get(CLASS_KEY) for record in records.values()}) > 1
    varying = [key for key in keys if _varies(key, records) or (key == CLASS_KEY and classes_differ)]
    return {
        name: {key: record[key] for key in varying if key in record} or dict(record)
        for name, record in records.items()
    }


def _varies(key: str, records: Mapping[str, Mapping[str, Any]]) -> bool:
    return len({repr(record[key]) for record in records.values() if key in record}) > 1


def _is_class_key(key: str) -> bool:
    return key == CLASS_KEY or key.endswith("." + CLASS_KEY)


def undescribed_fields(record: Mapping[str, Any]) -> list[str]:
    """The keys whose value reads only as a memory address (two such values can never be compared)."""
    return [key for key, value in record.items() if isinstance(value, str) and _ADDRESS.search(value)]


def format_fields(fields: Mapping[str, Any]) -> str:
    """``Class; key=value, ...`` in full (never shortened: two systems differing past a cut-off would read
    the same); a nested object's class reads ``key=Class``."""
    head = fields.get(CLASS_KEY)
    rest = [
        f"{key.removesuffix('.' + CLASS_KEY)}={value}" if _is_class_key(key) else f"{key}={value!r}"
        for key, value in fields.items()
        if key != CLASS_KEY
    ]
    if head is None:
        return ", ".join(rest)
    return f"{head}" + (f"; {', '.join(rest)}" if rest else "")


def _class_first(key: str) -> tuple[int, str]:
    return (0 if key == CLASS_KEY else 1, key)


def _collect(value: Any, prefix: str, record: dict[str, Any], depth: int, seen: set[int]) -> None:
    if isinstance(value, _PLAIN) or depth > _MAX_DEPTH:
        record[_leaf_key(prefix)] = value if isinstance(value, _PLAIN) else repr(value)
        return
    if id(value) in seen:  # a cycle (a closure that reaches itself): the first visit described it
        return
    seen = seen | {id(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        record[prefix + CLASS_KEY] = type(value).__qualname__
        for field in dataclasses.fields(value):
            _collect(getattr(value, field.name), f"{prefix}{field.name}.", record, depth + 1, seen)
    elif isinstance(value, Mapping):
        if not value:
            record[_leaf_key(prefix)] = {}
        for key, item in value.items():
            _collect(item, f"{prefix}{key}.", record, depth + 1, seen)
    elif isinstance(value, tuple | list):
        if all(isinstance(item, _PLAIN) for item in value):
            record[_leaf_key(prefix)] = tuple(value)
        else:
            for index, item in enumerate(value):
                _collect(item, f"{prefix}{index}.", record, depth + 1, seen)
    elif isinstance(value, functools.partial):
        _collect(value.func, f"{prefix}func.", record, depth + 1, seen)
        _collect(value.args, f"{prefix}args.", record, depth + 1, seen)
        _collect(value.keywords, f"{prefix}keywords.", record, depth + 1, seen)
    elif isinstance(value, types.FunctionType):
        _collect_function(value, prefix, record, depth, seen)
    elif isinstance(value, type | types.BuiltinFunctionType | types.ModuleType):
        record[_leaf_key(prefix)] = f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    elif hasattr(value, "__dict__") and _is_ours(type(value)):
        record[prefix + CLASS_KEY] = type(value).__qualname__
        for name, item in vars(value).items():
            if not name.startswith("_"):
                _collect(item, f"{prefix}{name}.", record, depth + 1, seen)
    else:  # a third-party value (an enum, a dtype, a tensor): its repr is its description
        record[_leaf_key(prefix)] = repr(value)


def _leaf_key(prefix: str) -> str:
    """The key of a plain value at ``prefix`` (``"value"`` for a system that is itself a plain value)."""
    return prefix.rstrip(".") or "value"


def _is_ours(cls: type) -> bool:
    """A class of this package: read by its attributes (a third-party object's attributes are its own
    business; its repr is what it chose to show)."""
    return cls.__module__.split(".")[0] == __name__.split(".")[0]


def _collect_function(
    function: types.FunctionType, prefix: str, record: dict[str, Any], depth: int, seen: set[int]
) -> None:
    """A function is its qualified name plus what it closed over: two builders made by one factory with
    different arguments are two systems, and read as such."""
    name = f"{function.__module__}.{function.__qualname__}"
    if "<lambda>" in name:  # lambdas of one factory share a name: where each is written tells them apart
        name += f":{function.__code__.co_firstlineno}"
    record[prefix + CLASS_KEY] = name
    for variable, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            captured = cell.cell_contents
        except ValueError:  # an empty cell (a name bound after the closure was made)
            continue
        if isinstance(captured, types.ModuleType):
            continue
        _collect(captured, f"{prefix}{variable}.", record, depth + 1, seen)
