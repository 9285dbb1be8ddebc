from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurips26.core.config import (
    apply_overrides,
    config_from_dict,
    config_hash,
    config_to_dict,
    field_sources,
    param,
    parse_override,
)


@dataclass
class Example:
    size: int = param(3, "paper, Sec. 2")
    rate: float = param(0.5, "ours: why")
    name: str = param("a", "ours")
    flags: tuple[int, ...] = param((1, 2), "ours")
    items: list[str] = param(["x"], "ours")
    maybe: float | None = param(None, "ours")

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")


def test_param_requires_a_source() -> None:
    with pytest.raises(ValueError, match="source"):
        param(1, "")


def test_sources_are_recorded() -> None:
    assert field_sources(Example)["size"] == "paper, Sec. 2"


def test_list_defaults_are_not_shared() -> None:
    a, b = Example(), Example()
    a.items.append("y")
    assert b.items == ["x"]


def test_round_trip_keeps_equality_and_hash() -> None:
    config = Example(size=5, flags=(3,), maybe=1.5)
    again = config_from_dict(Example, config_to_dict(config))
    assert again == config
    assert config_hash(again) == config_hash(config)


def test_hash_changes_with_values() -> None:
    assert config_hash(Example()) != config_hash(Example(size=4))


def test_unknown_key_lists_valid_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown config key\(s\) \['bad'\].*valid keys"):
        config_from_dict(Example, {"bad": 1})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("size", "three", "size must be an integer"),
        ("rate", True, "rate must be a number"),
        ("size", 0, "size must be >= 1"),
        ("flags", 3, "flags must be a list"),
    ],
)
def test_bad_values_name_the_field(key: str, value: object, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        apply_overrides(Example(), {key: value})


def test_parse_override_reads_json_then_strings() -> None:
    assert parse_override("size=4") == ("size", 4)
    assert parse_override("name=abc") == ("name", "abc")
    assert parse_override("flags=[1,2]") == ("flags", [1, 2])
    with pytest.raises(ValueError, match="key=value"):
        parse_override("novalue")


def test_non_dataclass_is_rejected() -> None:
    with pytest.raises(TypeError):
        config_to_dict(object())


@given(
    size=st.integers(1, 10**6),
    rate=st.floats(allow_nan=False, allow_infinity=False),
    name=st.text(max_size=20),
    flags=st.lists(st.integers(-5, 5), max_size=4),
)
def test_round_trip_property(size: int, rate: float, name: str, flags: list[int]) -> None:
    config = Example(size=size, rate=rate, name=name, flags=tuple(flags))
    again = config_from_dict(Example, config_to_dict(config))
    assert again == config and config_hash(again) == config_hash(config)


@dataclass
class WithFactory:
    values: dict = field(default_factory=dict)


def test_plain_dataclass_fields_without_source_are_allowed() -> None:
    assert field_sources(WithFactory) == {"values": ""}


def test_nested_configs_take_dotted_overrides_and_list_valid_keys() -> None:
    from dataclasses import dataclass

    from neurips26.core.config import apply_overrides, config_hash, dotted_keys, field_sources, nested, param

    @dataclass
    class Inner:
        rank: int = param(4, "paper")

    @dataclass
    class Outer:
        method: Inner = nested(Inner, "the method's defaults")
        steps: int = param(10, "ours")

    outer = apply_overrides(Outer(), {"method.rank": 8, "steps": 3})
    assert outer == Outer(Inner(8), 3) and isinstance(outer.method, Inner)
    assert dotted_keys(Outer) == ["method.rank", "steps"]
    assert field_sources(Outer)["method.rank"] == "paper"
    assert config_hash(outer) != config_hash(Outer())
    with pytest.raises(ValueError, match=r"valid keys: \['method\.rank', 'steps'\]"):
        apply_overrides(Outer(), {"method.nope": 1})
    with pytest.raises(ValueError, match="not a nested config"):
        apply_overrides(Outer(), {"steps.x": 1})
    with pytest.raises(TypeError, match=r"method\.rank must be an integer"):
        apply_overrides(Outer(), {"method.rank": "big"})


def test_nested_default_factory_sets_other_method_defaults_and_is_checked() -> None:
    from dataclasses import dataclass

    from neurips26.core.config import apply_overrides, nested, param

    @dataclass
    class Inner:
        rank: int = param(4, "paper")

    @dataclass
    class Outer:
        method: Inner = nested(Inner, "ours: rank 2 fits the toy data", default_factory=lambda: Inner(2))

    assert Outer().method == Inner(2) and Outer().method is not Outer().method  # a fresh one each time
    assert apply_overrides(Outer(), {"method.rank": 5}).method == Inner(5)
    with pytest.raises(TypeError, match="must return a Inner, got int"):
        nested(Inner, "x", default_factory=lambda: 3)
    with pytest.raises(TypeError, match="must be callable"):
        nested(Inner, "x", default_factory=Inner(2))


def test_overrides_keep_values_json_cannot_hold_and_init_only_fields() -> None:
    """No JSON round trip: a callable or a set survives, and an InitVar keeps its current value."""
    import dataclasses

    def keep_attention(module: object, name: str) -> bool:
        return "attn" in name

    @dataclasses.dataclass
    class Inner:
        scale: float = 1.0
        tags: frozenset = frozenset({"a"})

    @dataclasses.dataclass
    class Outer:
        inner: Inner = dataclasses.field(default_factory=Inner)
        hook: object = None
        chooser: dataclasses.InitVar[object] = None

        def __post_init__(self, chooser: object) -> None:
            self.chooser = chooser if chooser is not None else "default"

    config = Outer(hook=keep_attention, chooser=keep_attention)
    changed = apply_overrides(config, {"inner.scale": 2})
    assert changed.hook is keep_attention and changed.chooser is keep_attention
    assert changed.inner.scale == 2.0 and isinstance(changed.inner.scale, float)
    assert changed.inner.tags == frozenset({"a"}) and config.inner.scale == 1.0  # the original is untouched
    with pytest.raises(ValueError, match=r"unknown config key 'inner.nope'; valid keys: \['inner.scale'"):
        apply_overrides(config, {"inner.nope": 1})
    with pytest.raises(ValueError, match="'hook' is not a nested config"):
        apply_overrides(config, {"hook.x": 1})
    with pytest.raises(TypeError, match=r"inner\.scale must be a number"):
        apply_overrides(config, {"inner.scale": "big"})
