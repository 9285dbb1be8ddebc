"""Dataclass configs: defaults that cite their source, JSON round trips, stable hashes, CLI overrides.

Every method's config is a plain ``@dataclass`` whose fields are declared with :func:`param`, so each
default carries where it comes from ("paper, Sec. 3" or "ours: why"). This module turns such a config
into a dict, back again with validation, into a stable hash, and applies ``--set key=value`` overrides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

ConfigT = TypeVar("ConfigT")

_SOURCE_KEY = "source"


def param(default: Any, source: str, **field_kwargs: Any) -> Any:
    """Declare a config field whose default cites its origin.

    Parameters
    ----------
    default:
        The default value. Lists and dicts are wrapped in a ``default_factory`` so instances never share them.
    source:
        Where the default comes from, e.g. ``"paper, Sec. 3"`` or ``"ours: keeps the smoke run under 5 s"``.
    """
    if not source:
        raise ValueError("param(source=...) must say where the default comes from")
    metadata = {_SOURCE_KEY: source}
    if isinstance(default, (list, dict, set)):
        frozen = default
        return dataclasses.field(
            default_factory=lambda: type(frozen)(frozen), metadata=metadata, **field_kwargs
        )
    return dataclasses.field(default=default, metadata=metadata, **field_kwargs)


def nested(config_cls: type, source: str, *, default_factory: Callable[[], Any] | None = None) -> Any:
    """Declare a field holding another config (e.g. the method's own config inside an experiment's).

    Its default is ``config_cls()``, or ``default_factory()`` when the experiment runs the method with
    other defaults (say why in ``source``); ``--set field.key=value`` reaches the inner fields.
    """
    _require_dataclass_type(config_cls)
    if not source:
        raise ValueError("nested(source=...) must say where the default comes from")
    factory = config_cls if default_factory is None else _checked_factory(config_cls, default_factory)
    return dataclasses.field(default_factory=factory, metadata={_SOURCE_KEY: source})


def _checked_factory(config_cls: type, factory: Callable[[], Any]) -> Callable[[], Any]:
    """``factory`` if it builds a ``config_cls`` (checked once, now, so a wrong one fails at import)."""
    if not callable(factory):
        raise TypeError(f"default_factory must be callable, got {factory!r}")
    built = factory()
    if type(built) is not config_cls:
        raise TypeError(f"default_factory must return a {config_cls.__name__}, got {type(built).__name__}")
    return factory


def _require_dataclass_type(config_cls: type) -> None:
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise TypeError(f"config class must be a dataclass type, got {config_cls!r}")


def field_sources(config_cls: type) -> dict[str, str]:
    """Map each field name to the source its default cites ("" when undeclared); nested configs appear
    as dotted keys (``method.pool_factor``)."""
    _require_dataclass_type(config_cls)
    hints = _resolved_types(config_cls)
    sources: dict[str, str] = {}
    for f in dataclasses.fields(config_cls):
        inner = hints.get(f.name)
        if _is_config_type(inner):
            sources.update({f"{f.name}.{k}": v for k, v in field_sources(inner).items()})
        else:
            sources[f.name] = f.metadata.get(_SOURCE_KEY, "")
    return sources


def dotted_keys(config_cls: type) -> list[str]:
    """Every key ``--set`` accepts for ``config_cls``, nested ones dotted."""
    return list(field_sources(config_cls))


def flatten_config(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"method": {"a": 1}, "b": 2}`` -> ``{"method.a": 1, "b": 2}`` (for tables)."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping) and value and all(isinstance(k, str) for k in value):
            flat.update(flatten_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _is_config_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def config_to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of the config's fields (tuples become lists)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a dataclass config instance, got {type(config).__name__}")
    return json.loads(json.dumps(dataclasses.asdict(config), default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    raise TypeError(f"config value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def config_hash(config: Any) -> str:
    """A stable 16-hex-digit hash of the config's canonical JSON (same fields, same hash, any process)."""
    canonical = json.dumps(config_to_dict(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _resolved_types(config_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(config_cls)


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Coerce a JSON value to the field's annotated type, or raise a message naming the field."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(name, value, arg)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise TypeError(f"{name}={value!r} matches none of {annotation}")
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{name}={value!r} is not allowed; choose one of {list(args)}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list, got {value!r}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(name, v, args[0]) for v in value)
        if origin is tuple and args:
            if len(args) != len(value):
                raise ValueError(f"{name} must have {len(args)} items, got {len(value)}")
            return tuple(_coerce(name, v, a) for v, a in zip(value, args, strict=True))
        item = args[0] if args else Any
        converted = [_coerce(name, v, item) for v in value]
        return tuple(converted) if origin is tuple else converted
    if _is_config_type(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"{name} must be a mapping of {annotation.__name__} fields, got {value!r}")
        return config_from_dict(annotation, value, prefix=f"{name}.")
    if origin is dict or annotation is dict:
        if not isinstance(value, Mapping):
            raise TypeError(f"{name} must be a mapping, got {value!r}")
        return dict(value)
    if annotation is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise TypeError(f"{name} must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {value!r}")
        return value
    return value


def config_from_dict(config_cls: type[ConfigT], values: Mapping[str, Any], *, prefix: str = "") -> ConfigT:
    """Build ``config_cls`` from a dict, rejecting unknown keys and ill-typed values by name.

    Nested configs are given as nested dicts. ``__post_init__`` of the config then checks ranges, so a
    bad value fails here with a clear message.
    """
    _require_dataclass_type(config_cls)
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        valid = [prefix + key for key in dotted_keys(config_cls)]
        raise ValueError(
            f"unknown config key(s) {[prefix + k for k in unknown]} for {config_cls.__name__}; "
            f"valid keys: {valid}"
        )
    hints = _resolved_types(config_cls)
    coerced = {k: _coerce(prefix + k, v, hints.get(k, Any)) for k, v in values.items()}
    return config_cls(**coerced)


def parse_override(text: str) -> tuple[str, Any]:
    """Parse one ``key=value`` CLI override; the value is read as JSON, else kept as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--set expects key=value, got {text!r}")
    raw = raw.strip()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def apply_overrides(config: ConfigT, overrides: Mapping[str, Any]) -> ConfigT:
    """Return a copy of ``config`` with ``overrides`` applied and re-validated.

    A dotted key (``method.pool_factor``) sets a field of a nested config; an unknown key fails with the
    list of valid dotted keys. The copy is made with ``dataclasses.replace`` on the nested objects, never
    through JSON, so a value JSON cannot hold (a ``filter_fn`` callable, a set) survives untouched, and
    each overridden value is type-checked against its field's annotation once.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a dataclass config instance, got {type(config).__name__}")
    leaves: dict[str, Any] = {}
    children: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        head, dot, rest = key.partition(".")
        if dot:
            children.setdefault(head, {})[rest] = value
        else:
            leaves[head] = value
    return _replaced(config, leaves, children, prefix="", root_cls=type(config))


def _replaced(
    config: Any,
    leaves: Mapping[str, Any],
    children: Mapping[str, dict[str, Any]],
    prefix: str,
    root_cls: type,
) -> Any:
    """``config`` with its own fields in ``leaves`` set and the nested configs in ``children`` rebuilt."""
    hints = _resolved_types(type(config))
    known = {f.name for f in dataclasses.fields(config)}
    for name in [*leaves, *children]:
        if name not in known:
            raise ValueError(f"unknown config key {prefix + name!r}; valid keys: {dotted_keys(root_cls)}")
    changes = {name: _coerce(prefix + name, value, hints.get(name, Any)) for name, value in leaves.items()}
    for name, sub in children.items():
        inner = changes.get(name, getattr(config, name))
        if not (dataclasses.is_dataclass(inner) and not isinstance(inner, type)):
            raise ValueError(
                f"unknown config key {prefix + name + '.' + next(iter(sub))!r}: {prefix + name!r} is not a "
                f"nested config; valid keys: {dotted_keys(root_cls)}"
            )
        inner_leaves = {k: v for k, v in sub.items() if "." not in k}
        inner_children: dict[str, dict[str, Any]] = {}
        for key, value in sub.items():
            head, dot, rest = key.partition(".")
            if dot:
                inner_children.setdefault(head, {})[rest] = value
        changes[name] = _replaced(inner, inner_leaves, inner_children, f"{prefix}{name}.", root_cls)
    return dataclasses.replace(config, **_init_only_values(config), **changes)


def _init_only_values(config: Any) -> dict[str, Any]:
    """The current values of ``config``'s ``InitVar`` fields that it keeps as attributes.

    ``dataclasses.replace`` would otherwise pass their defaults again (ScaleBitsConfig's ``filter_fn``
    came back as the default filter).
    """
    return {
        name: getattr(config, name)
        for name, hint in _resolved_types(type(config)).items()
        if isinstance(hint, dataclasses.InitVar) and hasattr(config, name)
    }
