"""System records: what makes each system of an experiment this system, read the same way for every method."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from neurips26.bench.system_record import (
    CLASS_KEY,
    differing_fields,
    format_fields,
    system_record,
    undescribed_fields,
)
from neurips26.testing import toy_experiment
from neurips26.testing.contract import check_system_records


@dataclasses.dataclass(frozen=True)
class Inner:
    rate: float = 0.1
    hidden: bool = False


@dataclasses.dataclass(frozen=True)
class Recipe:
    name: str
    kind: str
    inner: Inner = dataclasses.field(default_factory=Inner, repr=False)


def _builder(width: int, inner: Inner):
    def build():
        return width, inner

    return build


def test_a_dataclass_reads_as_its_fields_including_those_hidden_from_repr() -> None:
    record = system_record(Recipe("a", "ours", Inner(rate=0.5, hidden=True)))
    assert record == {
        CLASS_KEY: "Recipe",
        "name": "a",
        "kind": "ours",
        f"inner.{CLASS_KEY}": "Inner",
        "inner.rate": 0.5,
        "inner.hidden": True,
    }


def test_a_builder_reads_as_what_it_closed_over() -> None:
    first = system_record(_builder(4, Inner()))
    second = system_record(_builder(8, Inner(rate=0.3)))
    assert first["width"] == 4 and second["width"] == 8 and second["inner.rate"] == 0.3
    assert first[CLASS_KEY].endswith("_builder.<locals>.build")
    assert not undescribed_fields(first)


def test_lambdas_of_one_factory_read_apart_by_where_they_are_written() -> None:
    table = {
        "a": lambda: 1,
        "b": lambda: 2,
    }
    assert system_record(table["a"]) != system_record(table["b"])


def test_a_partial_reads_as_function_arguments_and_keywords() -> None:
    record = system_record(functools.partial(_builder, 3, inner=Inner()))
    assert record["args"] == (3,) and record["keywords.inner.rate"] == 0.1


def test_an_object_known_only_by_its_address_is_named() -> None:
    class Opaque:
        __slots__ = ()

    record = system_record({"thing": Opaque()})
    assert undescribed_fields(record) == ["thing"]


def test_differing_fields_show_what_sets_systems_apart_and_nothing_shared() -> None:
    records = {
        "ours": system_record(Recipe("ours", "ours", Inner(rate=0.5))),
        "off": system_record(Recipe("off", "ours", Inner(rate=0.0))),
        "none": system_record(None),
    }
    shown = differing_fields(records)
    assert shown["ours"] == {CLASS_KEY: "Recipe", "name": "ours", "inner.rate": 0.5}
    assert shown["off"]["inner.rate"] == 0.0 and "kind" not in shown["off"]
    assert shown["none"] == {"value": None}  # nothing differs: shown whole
    assert format_fields(shown["ours"]) == "Recipe; inner.rate=0.5, name='ours'"


def test_the_contract_refuses_two_systems_with_one_record() -> None:
    experiment = toy_experiment.TOY_EXPERIMENT
    ours = experiment.systems[experiment.ours]
    twin = dataclasses.replace(
        experiment, systems={**experiment.systems, "twin": lambda config: ours(config)}
    )
    check_system_records(experiment)  # the toy's own systems read apart
    with pytest.raises(AssertionError, match="one system under two names"):
        check_system_records(twin)
