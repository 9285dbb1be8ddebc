"""Random DeepCoder tasks, compositional splits and single-step decomposition records.

The sampler follows ExeDec's published recipe (re-implemented): 3 examples, 1-2 inputs of which at least
one is a list; a list input draws its length range from {(1,3), (0,5)} and its int range from
{(0,4), (0,9), (-10,10), (-50,50)}, shared by all examples; an int input lies in [0, 5] (ints only feed
``Take``/``Drop``/``Access``). A program grows one statement at a time: every type-correct candidate is
executed in one batch (:mod:`.executor`), those that fail on some example or repeat an existing variable
are dropped, and one is drawn by operation, then lambda, then arguments. Dead code is ruled out by
construction (with two unused results the next statement must read one; the last must read all), and
programs with equal outputs on two examples or a constant output are rejected.

Splits: ``in_distribution`` draws train and test lengths from 1-5 (ExeDec's ``NONE``);
``length_generalization`` trains on lengths 1-4 and tests on 5. Test tasks whose I/O signature appears
in the training tasks are removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurips26.methods.sad import dsl
from neurips26.methods.sad.executor import (
    CANDIDATES,
    KIND_LIST,
    Results,
    append_results,
    execute,
    make_states,
    redundant,
)

LIST_LENGTH_RANGES = ((1, 3), (0, 5))
LIST_INT_RANGES = ((0, 4), (0, 9), (-10, 10), (-50, 50))
SPLITS = {
    "in_distribution": ((1, 2, 3, 4, 5), (1, 2, 3, 4, 5)),
    "length_generalization": ((1, 2, 3, 4), (5,)),
}


@dataclass(frozen=True)
class Task:
    """A PBE task: ``inputs[e]`` the input values of example ``e``, ``outputs[e]`` its output, and the
    ground-truth program (``values[e]`` every variable of the GT program on example ``e``)."""

    program: dsl.Program
    inputs: tuple[tuple[dsl.Value, ...], ...]
    outputs: tuple[dsl.Value, ...]

    def signature(self) -> str:
        """The I/O signature used for deduplication (inputs and outputs of every example)."""
        return " || ".join(
            " | ".join(dsl.format_value(v) for v in ins) + " -> " + dsl.format_value(out)
            for ins, out in zip(self.inputs, self.outputs, strict=True)
        )

    def trace(self) -> list[list[dsl.Value]]:
        """``trace[e]``: all variables of the GT program on example ``e``."""
        traces = [dsl.run_program(self.program, list(ins)) for ins in self.inputs]
        if any(t is None for t in traces):
            raise ValueError(f"program {self.program} fails on its own inputs")
        return traces  # type: ignore[return-value]


def task_from_exedec(record: dict) -> Task:
    """A :class:`Task` from one ExeDec JSONL record (``inputs``, ``outputs``, ``program``)."""
    for key in ("inputs", "outputs", "program"):
        if key not in record:
            raise ValueError(f"ExeDec record lacks {key!r}; it has {sorted(record)}")
    if len(record["inputs"]) != len(record["outputs"]):
        raise ValueError(
            f"unequal example counts: {len(record['inputs'])} inputs, {len(record['outputs'])} outputs"
        )
    program = dsl.parse_program(record["program"])
    inputs = []
    for text in record["inputs"]:
        state = dsl.parse_state(text)
        if sorted(state) != sorted(program.inputs):
            raise ValueError(f"inputs {sorted(state)} do not match the program's {program.inputs}")
        inputs.append(tuple(state[v] for v in program.inputs))
    outputs = tuple(dsl.parse_value(o) for o in record["outputs"])
    return Task(program, tuple(inputs), outputs)


def check_exedec_records(records: Sequence[dict]) -> int:
    """Check ExeDec records against our DSL: each program prints back to its own text and re-executes to
    the stored outputs. Returns how many were checked; raises ``ValueError`` naming the first record (by
    position and ``index``) that does not."""
    for position, record in enumerate(records):
        task = task_from_exedec(record)
        where = f"record {position} (index {record.get('index')!r})"
        if dsl.format_program(task.program) != record["program"]:
            raise ValueError(f"{where}: prints back as {dsl.format_program(task.program)!r}")
        for inputs, output in zip(task.inputs, task.outputs, strict=True):
            got = dsl.program_output(task.program, list(inputs))
            if got != output:
                raise ValueError(f"{where}: inputs {inputs} give {got}, the record says {output}")
    return len(records)


def sample_inputs(rng: np.random.Generator, num_examples: int = 3) -> tuple[list[str], list[list[dsl.Value]]]:
    """Input kinds and values for one task (ExeDec's input distribution, see the module doc)."""
    num_inputs = int(rng.integers(1, 3))
    kinds = [dsl.LIST] + [dsl.INT if rng.random() < 0.5 else dsl.LIST for _ in range(num_inputs - 1)]
    rng.shuffle(kinds)
    length_ranges = [LIST_LENGTH_RANGES[rng.integers(len(LIST_LENGTH_RANGES))] for _ in kinds]
    int_ranges = [LIST_INT_RANGES[rng.integers(len(LIST_INT_RANGES))] for _ in kinds]
    examples: list[list[dsl.Value]] = []
    while len(examples) < num_examples:
        row: list[dsl.Value] = []
        for kind, (lo_len, hi_len), (lo, hi) in zip(kinds, length_ranges, int_ranges, strict=True):
            if kind == dsl.INT:
                row.append(int(rng.integers(0, dsl.MAX_LIST_LENGTH + 1)))
            else:
                row.append(
                    tuple(
                        int(v) for v in rng.integers(lo, hi + 1, size=int(rng.integers(lo_len, hi_len + 1)))
                    )
                )
        if row not in examples:
            examples.append(row)
    return kinds, examples


def _draw_hierarchical(rng: np.random.Generator, eligible: np.ndarray) -> int:
    """Draw a candidate: operation uniformly, then lambda, then arguments (among eligible ones)."""
    ops = np.unique(CANDIDATES.op[eligible])
    op = ops[rng.integers(len(ops))]
    in_op = eligible[CANDIDATES.op[eligible] == op]
    lams = np.unique(CANDIDATES.lam[in_op])
    lam = lams[rng.integers(len(lams))]
    pool = in_op[CANDIDATES.lam[in_op] == lam]
    return int(pool[rng.integers(len(pool))])


def sample_task(rng: np.random.Generator, length: int, num_examples: int = 3, max_tries: int = 200) -> Task:
    """One random task whose GT program has ``length`` statements (see the module doc for the rules)."""
    if not 1 <= length <= dsl.MAX_VARIABLES - 2:
        raise ValueError(f"length must be in [1, {dsl.MAX_VARIABLES - 2}], got {length}")
    for _ in range(max_tries):
        kinds, examples = sample_inputs(rng, num_examples)
        num_inputs = len(kinds)
        states = make_states([examples])
        statements: list[dsl.Statement] = []
        unused: list[int] = []
        for step in range(length):
            slot = num_inputs + step
            typed = np.nonzero(CANDIDATES.type_mask(states.kinds)[0])[0]
            res = execute(states, np.zeros(len(typed), dtype=np.int64), typed)
            keep = res.ok.all(-1) & ~redundant(states, np.zeros(len(typed), dtype=np.int64), res)
            reads = [(CANDIDATES.arg0[typed] == v) | (CANDIDATES.arg1[typed] == v) for v in unused]
            if step == length - 1:
                for r in reads:
                    keep &= r
            elif len(unused) >= 2:
                keep &= np.logical_or.reduce(reads)
            eligible = typed[keep]
            if len(eligible) == 0:
                break
            choice = _draw_hierarchical(rng, eligible)
            row = int(np.nonzero(typed == choice)[0][0])
            picked = Results(
                res.values[row : row + 1],
                res.lengths[row : row + 1],
                res.kind[row : row + 1],
                res.ok[row : row + 1],
            )
            states = append_results(states, np.zeros(1, dtype=np.int64), picked)
            statements.append(CANDIDATES.statement(choice, f"x{slot}"))
            args = {int(CANDIDATES.arg0[choice]), int(CANDIDATES.arg1[choice])}
            unused = [v for v in unused if v not in args] + [slot]
        if len(statements) != length:
            continue
        program = dsl.Program(tuple(f"x{i}" for i in range(num_inputs)), tuple(statements))
        outputs = [states.value(0, e, num_inputs + length - 1) for e in range(num_examples)]
        if len({dsl.format_value(o) for o in outputs}) < num_examples:
            continue  # duplicate (hence also constant) output
        if dsl.has_dead_code(program):  # pragma: no cover - ruled out by construction
            continue
        return Task(program, tuple(tuple(row) for row in examples), tuple(outputs))
    raise RuntimeError(f"no valid length-{length} program after {max_tries} tries")


def sample_tasks(
    rng: np.random.Generator,
    count: int,
    lengths: tuple[int, ...],
    exclude: set[str] | None = None,
    num_examples: int = 3,
) -> list[Task]:
    """``count`` tasks with lengths drawn uniformly from ``lengths``, unique by I/O signature and not in
    ``exclude``."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not lengths:
        raise ValueError("lengths must name at least one program length")
    seen = set(exclude or ())
    tasks: list[Task] = []
    while len(tasks) < count:
        task = sample_task(rng, int(lengths[rng.integers(len(lengths))]), num_examples)
        sig = task.signature()
        if sig in seen:
            continue
        seen.add(sig)
        tasks.append(task)
    return tasks


@dataclass(frozen=True)
class SplitData:
    """Train and test tasks of one compositional split (test deduplicated against train)."""

    split: str
    train: list[Task]
    test: list[Task]


def make_split(split: str, num_train: int, num_test: int, seed: int) -> SplitData:
    """Sample a split (``in_distribution`` or ``length_generalization``) with disjoint I/O signatures."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    train_lengths, test_lengths = SPLITS[split]
    rng = np.random.default_rng(seed)
    train = sample_tasks(rng, num_train, train_lengths)
    test = sample_tasks(rng, num_test, test_lengths, exclude={t.signature() for t in train})
    return SplitData(split, train, test)


@dataclass(frozen=True)
class StepRecord:
    """One decomposition step: the state before it, the task's outputs, the GT subgoal (the step's
    values on every example) and the GT statement's candidate index."""

    state: list[list[dsl.Value]]
    outputs: tuple[dsl.Value, ...]
    subgoal: tuple[dsl.Value, ...]
    statement: int
    step: int
    length: int


def step_records(tasks: list[Task]) -> list[StepRecord]:
    """Split every task into its single-step records (ExeDec's decomposed training data)."""
    records = []
    for task in tasks:
        trace = task.trace()
        n_in = len(task.program.inputs)
        for t, statement in enumerate(task.program.statements):
            state = [row[: n_in + t] for row in trace]
            subgoal = tuple(row[n_in + t] for row in trace)
            records.append(
                StepRecord(state, task.outputs, subgoal, CANDIDATES.index_of(statement), t, len(task.program))
            )
    return records


def is_list_kind(kind: int) -> bool:
    return kind == KIND_LIST
