"""SAD's DeepCoder DSL: hand-checked semantics, parser errors, sampler properties, batched executor."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.sad import dsl
from neurips26.methods.sad.executor import CANDIDATES, execute, make_states, redundant
from neurips26.methods.sad.sampler import (
    check_exedec_records,
    make_split,
    sample_task,
    sample_tasks,
    step_records,
    task_from_exedec,
)

# the first 20 records of each of ExeDec's six DeepCoder test files, shipped with the tests (CC-BY 4.0)
EXEDEC_SAMPLE = Path(__file__).parent / "data" / "exedec_deepcoder"
EXEDEC_SPLITS = (
    "NONE",
    "LENGTH_GENERALIZATION",
    "COMPOSE_DIFFERENT_CONCEPTS",
    "SWITCH_CONCEPT_ORDER",
    "COMPOSE_NEW_OP",
    "ADD_OP_FUNCTIONALITY",
)


def run1(rhs: str, *values):
    """Run ``x<k> = rhs`` on one example whose variables are ``values``."""
    names = [f"x{i}" for i in range(len(values))]
    statement = dsl.parse_statement(f"x{len(values)} = {rhs}", names)
    return dsl.run_statement(statement, dict(zip(names, values, strict=True)))


HAND_CASES = [
    ("Map (/2) x0", [(-3, 3, -1, 0)], (-2, 1, -1, 0)),  # floor division of negatives
    ("Map (/3) x0", [(-1, -4, 5)], (-1, -2, 1)),
    ("Map (/4) x0", [(-50,)], (-13,)),
    ("Map (*(-1)) x0", [(0, -50)], (0, 50)),
    ("Map (**2) x0", [(7, -7)], (49, 49)),
    ("Map (**2) x0", [(8,)], None),  # 64 leaves [-50, 50]: no value
    ("Map (*4) x0", [(13,)], None),
    ("Map (+1) x0", [()], ()),
    ("Filter (%2==1) x0", [(-3, -2, 5)], (-3, 5)),  # python modulo: -3 is odd
    ("Filter (%2==0) x0", [(-3, -2, 0)], (-2, 0)),
    ("Filter (>0) x0", [()], ()),
    ("Count (<0) x0", [(-1, 0, -5)], 2),
    ("Count (<0) x0", [()], 0),
    ("Head x0", [()], None),
    ("Last x0", [()], None),
    ("Minimum x0", [()], None),
    ("Maximum x0", [(3, -4, 9)], 9),
    ("Sum x0", [()], 0),
    ("Sum x0", [(30, 30)], None),
    ("Take x0 x1", [-1, (1, 2, 3)], (1, 2)),  # python slice with a negative count
    ("Take x0 x1", [-5, (1, 2, 3)], ()),
    ("Take x0 x1", [9, (1, 2)], (1, 2)),
    ("Drop x0 x1", [-1, (1, 2, 3)], (3,)),
    ("Drop x0 x1", [7, (1, 2, 3)], ()),
    ("Access x0 x1", [2, (4, 5, 6)], 6),
    ("Access x0 x1", [3, (4, 5, 6)], None),
    ("Access x0 x1", [-1, (4, 5, 6)], None),
    ("Reverse x0", [()], ()),
    ("Sort x0", [(3, -1, 3, 0)], (-1, 0, 3, 3)),
    ("ZipWith (+) x0 x1", [(1, 2, 3), (10,)], (11,)),
    ("ZipWith (-) x0 x1", [(), (1,)], ()),
    ("ZipWith (min) x0 x0", [(4, -2)], (4, -2)),
    ("ZipWith (*) x0 x1", [(10,), (6,)], None),
    ("Scanl1 (-) x0", [(1, 2, 3)], (1, -1, -4)),
    ("Scanl1 (max) x0", [(1, 5, 3)], (1, 5, 5)),
    ("Scanl1 (*) x0", [(5, 5, 5)], None),  # 125 leaves the range
    ("Scanl1 (+) x0", [()], ()),
]


@pytest.mark.parametrize(("rhs", "values", "expected"), HAND_CASES)
def test_interpreter_hand_checked(rhs, values, expected):
    assert run1(rhs, *values) == expected


@pytest.mark.parametrize(("rhs", "values", "expected"), HAND_CASES)
def test_batched_executor_matches_hand_checked(rhs, values, expected):
    names = [f"x{i}" for i in range(len(values))]
    statement = dsl.parse_statement(f"x{len(values)} = {rhs}", names)
    states = make_states([[list(values)]])
    res = execute(states, np.array([0]), np.array([CANDIDATES.index_of(statement)]))
    if expected is None:
        assert not res.ok[0, 0]
    else:
        assert res.ok[0, 0]
        got = states_value(res, 0, 0)
        assert got == expected


def states_value(res, n, e):
    if res.kind[n] == 1:
        return int(res.values[n, e, 0])
    return tuple(int(v) for v in res.values[n, e, : res.lengths[n, e]])


OWN_CASES = [  # a handful we wrote and checked by hand, always run
    (
        "x0 = INPUT | x1 = Map (/3) x0 | x2 = ZipWith (-) x0 x1 | x3 = Reverse x1 | x4 = ZipWith (-) x2 x3",
        [((3, 7, 1, 4),)],
        [(1, 5, -1, 2)],
    ),
    ("x0 = INPUT | x1 = INPUT | x2 = Drop x0 x1 | x3 = Scanl1 (min) x2", [(1, (0, 2, -4, 3))], [(2, -4, -4)]),
    ("x0 = INPUT | x1 = Filter (<0) x0 | x2 = Head x1", [((1, 2),)], [None]),
    ("x0 = INPUT | x1 = Count (%2==1) x0 | x2 = Take x1 x0", [((-1, -3, 2, 8),)], [(-1, -3)]),
]


@pytest.mark.parametrize(("text", "inputs", "outputs"), OWN_CASES)
def test_programs_we_checked_by_hand(text, inputs, outputs):
    program = dsl.parse_program(text)
    assert [dsl.program_output(program, list(i)) for i in inputs] == outputs


@pytest.mark.parametrize("split", EXEDEC_SPLITS)
def test_exedec_programs_reexecute(split):
    records = [json.loads(line) for line in (EXEDEC_SAMPLE / f"{split}.jsonl").read_text().splitlines()]
    assert check_exedec_records(records) == len(records) == 20


def test_a_record_that_does_not_reexecute_is_named():
    record = json.loads((EXEDEC_SAMPLE / "NONE.jsonl").read_text().splitlines()[3])
    wrong_output = {**record, "outputs": ["[ 49 ]", *record["outputs"][1:]]}
    with pytest.raises(ValueError, match=r"record 1 \(index 3\): inputs .* the record says"):
        check_exedec_records([record, wrong_output])
    reprinted = {**record, "program": record["program"].replace(" | ", " |  ", 1)}
    with pytest.raises(ValueError, match="prints back as"):
        check_exedec_records([reprinted])


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("x0 = INPUT | x1 = Mapp (+1) x0", 18, "unknown operation 'Mapp'"),
        ("x0 = INPUT | x1 = Map (+7) x0", 22, "unknown lambda '(+7)'"),
        ("x0 = INPUT | x1 = Map (>0) x0", 22, "cannot take lambda (>0)"),
        ("x0 = INPUT | x1 = Head x3", 23, "used before it is assigned"),
        ("x0 = INPUT | x1 = Head x0 x0", 26, "takes 1 variable argument(s), got 2"),
        ("x0 = INPUT | | x1 = Head x0", 13, "empty statement"),
        ("x0 = INPUT | x1 = Head x0 | x2 = INPUT", 33, "INPUT after a statement"),
        ("x0 = INPUT | x0 = Head x0", 13, "assigned twice"),
        ("x0 = INPUT | x12 = Head x0", 13, "out of range"),
        ("x0 = INPUT | x1 - Head x0", 16, "expected '='"),
        ("", 0, "empty program"),
    ],
)
def test_parse_errors_carry_positions(text, position, message):
    with pytest.raises(dsl.DSLParseError, match=re.escape(message)) as info:
        dsl.parse_program(text)
    assert info.value.position == position


def test_bad_values_and_tasks():
    with pytest.raises(dsl.DSLParseError, match="outside"):
        dsl.parse_value("[ 1 51 ]")
    with pytest.raises(dsl.DSLParseError, match="longer than 5"):
        dsl.parse_value("[ 1 2 3 4 5 6 ]")
    with pytest.raises(dsl.DSLParseError, match="not closed"):
        dsl.parse_state("x0 = [ 1 2")
    with pytest.raises(ValueError, match="unequal example counts"):
        task_from_exedec(
            {"inputs": ["x0 = [ 1 ]"], "outputs": ["1", "2"], "program": "x0 = INPUT | x1 = Head x0"}
        )
    with pytest.raises(dsl.DSLTypeError, match="Head argument 0 must be list"):
        dsl.run_statement(dsl.parse_statement("x1 = Head x0", ["x0"]), {"x0": 3})
    with pytest.raises(ValueError, match="takes 1 input"):
        dsl.run_program(dsl.parse_program("x0 = INPUT | x1 = Sum x0"), [(1,), (2,)])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.integers(1, 5))
def test_sampled_programs_round_trip_and_have_no_dead_code(seed, length):
    task = sample_task(np.random.default_rng(seed), length)
    text = dsl.format_program(task.program)
    assert dsl.parse_program(text) == task.program
    assert len(task.program) == length
    assert not dsl.has_dead_code(task.program)
    outputs = [dsl.program_output(task.program, list(i)) for i in task.inputs]
    assert outputs == list(task.outputs)
    assert len({dsl.format_value(o) for o in outputs}) == len(outputs)  # no duplicate/constant outputs
    for record in step_records([task]):  # each GT step is a candidate realising its subgoal
        states = make_states([record.state])
        res = execute(states, np.array([0]), np.array([record.statement]))
        assert res.ok.all()
        assert tuple(states_value(res, 0, e) for e in range(len(record.subgoal))) == record.subgoal
        assert not redundant(states, np.array([0]), res)[0]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_batched_execution_equals_interpreter(seed):
    task = sample_task(np.random.default_rng(seed), 3)
    trace = task.trace()
    states = make_states([trace])
    res = execute(states, np.zeros(len(CANDIDATES), dtype=np.int64), np.arange(len(CANDIDATES)))
    names = [f"x{i}" for i in range(len(trace[0]))]
    for c in range(len(CANDIDATES)):
        statement = CANDIDATES.statement(c, "x9")
        for e, row in enumerate(trace):
            try:
                expected = dsl.run_statement(statement, dict(zip(names, row, strict=True)))
            except (ValueError, dsl.DSLTypeError):
                expected = None
            got = states_value(res, c, e) if res.ok[c, e] else None
            assert got == expected, (str(statement), row)


def test_candidate_space_round_trip():
    assert len(CANDIDATES) == 1070
    for c in range(len(CANDIDATES)):
        assert CANDIDATES.index_of(CANDIDATES.statement(c, "x9")) == c


def test_splits_are_disjoint():
    for split, (train_lengths, test_lengths) in {
        "in_distribution": ((1, 2, 3, 4, 5), (1, 2, 3, 4, 5)),
        "length_generalization": ((1, 2, 3, 4), (5,)),
    }.items():
        data = make_split(split, 40, 20, seed=3)
        train_sigs = {t.signature() for t in data.train}
        test_sigs = {t.signature() for t in data.test}
        assert not train_sigs & test_sigs
        assert len(train_sigs) == 40 and len(test_sigs) == 20
        assert {len(t.program) for t in data.train} <= set(train_lengths)
        assert {len(t.program) for t in data.test} <= set(test_lengths)
    with pytest.raises(ValueError, match="split must be one of"):
        make_split("COMPOSE", 1, 1, 0)


def test_sample_tasks_excludes_signatures():
    rng = np.random.default_rng(0)
    first = sample_tasks(rng, 10, (1,))
    again = sample_tasks(np.random.default_rng(0), 10, (1,), exclude={t.signature() for t in first})
    assert not {t.signature() for t in first} & {t.signature() for t in again}
