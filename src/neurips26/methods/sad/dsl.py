"""The DeepCoder DSL of ExeDec (Shi et al., ICLR 2024), re-implemented from its documented semantics.

Values are ints in ``[MIN_INT, MAX_INT] = [-50, 50]`` or lists (tuples here) of at most ``MAX_LIST_LENGTH
= 5`` such ints. A program is written as ExeDec prints it::

    x0 = INPUT | x1 = INPUT | x2 = Map (+1) x0 | x3 = ZipWith (-) x2 x1

Semantics (the rules the interpreter, the batched executor and the tests share):

* An operation whose result holds an int outside ``[-50, 50]`` yields **no value** (``None``): the
  statement, and so the program, fails on that example. Nothing is clipped or wrapped.
* ``Head``, ``Last``, ``Minimum``, ``Maximum`` of an empty list fail; ``Access n xs`` fails unless
  ``0 <= n < len(xs)``; ``Sum []`` is 0; ``Map``/``Filter``/``Reverse``/``Sort``/``Scanl1`` of ``[]``
  are ``[]``.
* ``Take n xs`` and ``Drop n xs`` are Python slices ``xs[:n]`` and ``xs[n:]`` (a negative ``n`` counts
  from the end).
* ``(/2)``, ``(/3)``, ``(/4)`` are floor divisions (``-3 // 2 == -2``); ``(%2==1)`` is Python's modulo,
  so ``-3`` is odd.
* ``ZipWith f xs ys`` stops at the shorter list; ``Scanl1 f xs`` keeps ``xs[0]`` then folds from the left.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MIN_INT = -50
MAX_INT = 50
MAX_LIST_LENGTH = 5
MAX_VARIABLES = 10

Value = int | tuple[int, ...]

INT = "int"
LIST = "list"


class DSLParseError(ValueError):
    """Malformed program or value text; ``position`` is the 0-based character offset of the culprit."""

    def __init__(self, message: str, text: str, position: int) -> None:
        self.text = text
        self.position = position
        pointer = f"\n  {text}\n  {' ' * position}^" if len(text) <= 200 else ""
        super().__init__(f"{message} (at character {position}){pointer}")


class DSLTypeError(TypeError):
    """A statement applied to a variable of the wrong type (int where a list is needed or vice versa)."""


@dataclass(frozen=True)
class Lambda:
    """A constant lambda such as ``(+1)`` or ``(min)``: its token, arity and result kind."""

    token: str
    arity: int
    returns: str  # "int" or "bool"
    func: Callable[..., int | bool]


def _floor_div(k: int) -> Callable[[int], int]:
    return lambda x: x // k


LAMBDAS: tuple[Lambda, ...] = (
    Lambda("(+1)", 1, INT, lambda x: x + 1),
    Lambda("(-1)", 1, INT, lambda x: x - 1),
    Lambda("(*2)", 1, INT, lambda x: x * 2),
    Lambda("(/2)", 1, INT, _floor_div(2)),
    Lambda("(*(-1))", 1, INT, lambda x: -x),
    Lambda("(**2)", 1, INT, lambda x: x * x),
    Lambda("(*3)", 1, INT, lambda x: x * 3),
    Lambda("(/3)", 1, INT, _floor_div(3)),
    Lambda("(*4)", 1, INT, lambda x: x * 4),
    Lambda("(/4)", 1, INT, _floor_div(4)),
    Lambda("(>0)", 1, "bool", lambda x: x > 0),
    Lambda("(<0)", 1, "bool", lambda x: x < 0),
    Lambda("(%2==0)", 1, "bool", lambda x: x % 2 == 0),
    Lambda("(%2==1)", 1, "bool", lambda x: x % 2 == 1),
    Lambda("(+)", 2, INT, lambda x, y: x + y),
    Lambda("(-)", 2, INT, lambda x, y: x - y),
    Lambda("(*)", 2, INT, lambda x, y: x * y),
    Lambda("(min)", 2, INT, lambda x, y: min(x, y)),
    Lambda("(max)", 2, INT, lambda x, y: max(x, y)),
)
TOKEN_TO_LAMBDA = {lam.token: lam for lam in LAMBDAS}


@dataclass(frozen=True)
class Operation:
    """A DSL operation: ``arg_types`` lists the variable arguments; ``lambda_kind`` the lambda it takes.

    ``lambda_kind`` is ``None`` for first-order operations, else ``("int", 1)``, ``("bool", 1)`` or
    ``("int", 2)`` (result kind, arity).
    """

    token: str
    arg_types: tuple[str, ...]
    returns: str
    lambda_kind: tuple[str, int] | None = None

    @property
    def higher_order(self) -> bool:
        return self.lambda_kind is not None

    def lambdas(self) -> tuple[Lambda, ...]:
        """The lambdas this operation accepts (empty for first-order operations)."""
        if self.lambda_kind is None:
            return ()
        kind, arity = self.lambda_kind
        return tuple(lam for lam in LAMBDAS if lam.returns == kind and lam.arity == arity)


OPERATIONS: tuple[Operation, ...] = (
    Operation("Head", (LIST,), INT),
    Operation("Last", (LIST,), INT),
    Operation("Take", (INT, LIST), LIST),
    Operation("Drop", (INT, LIST), LIST),
    Operation("Access", (INT, LIST), INT),
    Operation("Minimum", (LIST,), INT),
    Operation("Maximum", (LIST,), INT),
    Operation("Reverse", (LIST,), LIST),
    Operation("Sort", (LIST,), LIST),
    Operation("Sum", (LIST,), INT),
    Operation("Map", (LIST,), LIST, (INT, 1)),
    Operation("Filter", (LIST,), LIST, ("bool", 1)),
    Operation("Count", (LIST,), INT, ("bool", 1)),
    Operation("ZipWith", (LIST, LIST), LIST, (INT, 2)),
    Operation("Scanl1", (LIST,), LIST, (INT, 2)),
)
TOKEN_TO_OPERATION = {op.token: op for op in OPERATIONS}
FIRST_ORDER = tuple(op.token for op in OPERATIONS if not op.higher_order)
HIGHER_ORDER = tuple(op.token for op in OPERATIONS if op.higher_order)


def value_type(value: Value) -> str:
    """``"int"`` or ``"list"``; raises TypeError for anything else."""
    if isinstance(value, bool):
        raise TypeError(f"value must be an int or a tuple of ints, got bool {value!r}")
    if isinstance(value, int):
        return INT
    if isinstance(value, tuple):
        return LIST
    raise TypeError(f"value must be an int or a tuple of ints, got {type(value).__name__} {value!r}")


def in_range(value: Value) -> bool:
    """Whether every int of ``value`` lies in ``[MIN_INT, MAX_INT]`` (ExeDec's ``validate_result``)."""
    if isinstance(value, int):
        return MIN_INT <= value <= MAX_INT
    return all(MIN_INT <= v <= MAX_INT for v in value)


def apply_operation(op: Operation, lam: Lambda | None, args: Sequence[Value]) -> Value | None:
    """Run one operation on argument values; ``None`` when the DSL defines no result (see module doc)."""
    if len(args) != len(op.arg_types):
        raise ValueError(f"{op.token} takes {len(op.arg_types)} variable argument(s), got {len(args)}")
    for index, (arg, expected) in enumerate(zip(args, op.arg_types, strict=True)):
        if value_type(arg) != expected:
            raise DSLTypeError(f"{op.token} argument {index} must be {expected}, got {arg!r}")
    if op.higher_order and (lam is None or lam not in op.lambdas()):
        raise ValueError(f"{op.token} needs one of the lambdas {[x.token for x in op.lambdas()]}, got {lam}")
    result: Value | None
    t = op.token
    if t in ("Head", "Last", "Minimum", "Maximum"):
        xs = args[0]
        if not xs:
            return None
        result = {"Head": xs[0], "Last": xs[-1], "Minimum": min(xs), "Maximum": max(xs)}[t]
    elif t == "Take":
        result = args[1][: args[0]]
    elif t == "Drop":
        result = args[1][args[0] :]
    elif t == "Access":
        n, xs = args
        result = xs[n] if 0 <= n < len(xs) else None
    elif t == "Reverse":
        result = tuple(reversed(args[0]))
    elif t == "Sort":
        result = tuple(sorted(args[0]))
    elif t == "Sum":
        result = sum(args[0])
    elif t == "Map":
        result = tuple(int(lam.func(x)) for x in args[0])
    elif t == "Filter":
        result = tuple(x for x in args[0] if lam.func(x))
    elif t == "Count":
        result = sum(1 for x in args[0] if lam.func(x))
    elif t == "ZipWith":
        result = tuple(int(lam.func(x, y)) for x, y in zip(args[0], args[1], strict=False))
    elif t == "Scanl1":
        out: list[int] = []
        for x in args[0]:
            out.append(x if not out else int(lam.func(out[-1], x)))
        result = tuple(out)
    else:  # pragma: no cover - the table above is exhaustive
        raise ValueError(f"unknown operation {t!r}")
    if result is None or not in_range(result):
        return None
    return result


@dataclass(frozen=True)
class Statement:
    """``variable = op [lambda] args...``; ``args`` are variable names (``"x3"``)."""

    variable: str
    op: Operation
    lam: Lambda | None
    args: tuple[str, ...]

    def rhs(self) -> str:
        parts = [self.op.token] + ([self.lam.token] if self.lam else []) + list(self.args)
        return " ".join(parts)

    def __str__(self) -> str:
        return f"{self.variable} = {self.rhs()}"


@dataclass(frozen=True)
class Program:
    """A program: its input variables then its statements, in ExeDec's textual order."""

    inputs: tuple[str, ...]
    statements: tuple[Statement, ...]

    def __str__(self) -> str:
        return format_program(self)

    def __len__(self) -> int:
        return len(self.statements)


def format_value(value: Value) -> str:
    """ExeDec's text of a value: ``3`` or ``[ 1 -2 3 ]`` (``[ ]`` when empty)."""
    if value_type(value) == INT:
        return str(value)
    return "[ " + "".join(f"{v} " for v in value) + "]"


def format_program(program: Program) -> str:
    """Print a program as ExeDec does: ``x0 = INPUT | x1 = Map (+1) x0``."""
    lines = [f"{v} = INPUT" for v in program.inputs] + [str(s) for s in program.statements]
    return " | ".join(lines)


def _tokens_with_offsets(text: str) -> list[tuple[str, int]]:
    return [(m.group(), m.start()) for m in re.finditer(r"\S+", text)]


def _check_variable(token: str, text: str, position: int, what: str) -> str:
    match = re.fullmatch(r"x(\d+)", token)
    if not match:
        raise DSLParseError(
            f"expected a variable x0..x{MAX_VARIABLES - 1} as {what}, got {token!r}", text, position
        )
    if int(match.group(1)) >= MAX_VARIABLES:
        raise DSLParseError(f"variable {token!r} is out of range x0..x{MAX_VARIABLES - 1}", text, position)
    return token


def _split_lines(text: str) -> list[list[tuple[str, int]]]:
    lines: list[list[tuple[str, int]]] = [[]]
    for token, position in _tokens_with_offsets(text):
        if token == "|":
            if not lines[-1]:
                raise DSLParseError("empty statement before '|'", text, position)
            lines.append([])
        else:
            lines[-1].append((token, position))
    if not lines[-1]:
        raise DSLParseError("empty statement at the end of the text", text, len(text))
    return lines


def parse_statement_tokens(line: list[tuple[str, int]], text: str, defined: Sequence[str]) -> Statement:
    """Parse one statement given as ``(token, offset)`` pairs; ``defined`` are the variables so far."""
    if len(line) < 3:
        raise DSLParseError("a statement needs 'x<i> = Op ...'", text, line[0][1])
    variable = _check_variable(line[0][0], text, line[0][1], "the assigned variable")
    if variable in defined:
        raise DSLParseError(f"variable {variable} is assigned twice", text, line[0][1])
    if line[1][0] != "=":
        raise DSLParseError(f"expected '=', got {line[1][0]!r}", text, line[1][1])
    op_token, op_pos = line[2]
    if op_token not in TOKEN_TO_OPERATION:
        raise DSLParseError(
            f"unknown operation {op_token!r}; allowed: {', '.join(TOKEN_TO_OPERATION)}", text, op_pos
        )
    op = TOKEN_TO_OPERATION[op_token]
    rest = line[3:]
    lam = None
    if op.higher_order:
        if not rest:
            raise DSLParseError(f"{op_token} needs a lambda", text, op_pos + len(op_token))
        lam_token, lam_pos = rest[0]
        if lam_token not in TOKEN_TO_LAMBDA:
            raise DSLParseError(
                f"unknown lambda {lam_token!r}; {op_token} takes {', '.join(x.token for x in op.lambdas())}",
                text,
                lam_pos,
            )
        lam = TOKEN_TO_LAMBDA[lam_token]
        if lam not in op.lambdas():
            allowed = ", ".join(x.token for x in op.lambdas())
            raise DSLParseError(
                f"{op_token} cannot take lambda {lam_token}; allowed: {allowed}",
                text,
                lam_pos,
            )
        rest = rest[1:]
    if len(rest) != len(op.arg_types):
        where = (
            rest[len(op.arg_types)][1] if len(rest) > len(op.arg_types) else line[-1][1] + len(line[-1][0])
        )
        raise DSLParseError(
            f"{op_token} takes {len(op.arg_types)} variable argument(s), got {len(rest)}", text, where
        )
    args = []
    for token, position in rest:
        if token in TOKEN_TO_LAMBDA:
            raise DSLParseError(f"lambda {token} where a variable is expected", text, position)
        arg = _check_variable(token, text, position, f"an argument of {op_token}")
        if arg not in defined:
            raise DSLParseError(f"variable {arg} is used before it is assigned", text, position)
        args.append(arg)
    return Statement(variable, op, lam, tuple(args))


def parse_program(text: str) -> Program:
    """Parse ExeDec program text; raises :class:`DSLParseError` with the character position."""
    if not isinstance(text, str):
        raise TypeError(f"program text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise DSLParseError("empty program text", text, 0)
    inputs: list[str] = []
    statements: list[Statement] = []
    for line in _split_lines(text):
        if line[-1][0] == "INPUT":
            if statements:
                raise DSLParseError("INPUT after a statement", text, line[-1][1])
            if len(line) != 3 or line[1][0] != "=":
                raise DSLParseError("an input line reads 'x<i> = INPUT'", text, line[0][1])
            variable = _check_variable(line[0][0], text, line[0][1], "an input")
            if variable in inputs:
                raise DSLParseError(f"variable {variable} is assigned twice", text, line[0][1])
            inputs.append(variable)
        else:
            defined = inputs + [s.variable for s in statements]
            statements.append(parse_statement_tokens(line, text, defined))
    if not inputs:
        raise DSLParseError("a program starts with at least one 'x<i> = INPUT'", text, 0)
    return Program(tuple(inputs), tuple(statements))


def parse_statement(text: str, defined: Sequence[str]) -> Statement:
    """Parse one statement ``x3 = Map (+1) x0`` whose arguments must be among ``defined``."""
    lines = _split_lines(text)
    if len(lines) != 1:
        raise DSLParseError("expected one statement, found '|'", text, 0)
    return parse_statement_tokens(lines[0], text, list(defined))


def parse_value(text: str, offset: int = 0, full_text: str | None = None) -> Value:
    """Parse ``3`` or ``[ 1 -2 ]`` (ExeDec's value text); checks range and list length."""
    full = text if full_text is None else full_text
    tokens = _tokens_with_offsets(text)
    if not tokens:
        raise DSLParseError("empty value", full, offset)

    def parse_int(token: str, position: int) -> int:
        if not re.fullmatch(r"-?\d+", token):
            raise DSLParseError(f"expected an integer, got {token!r}", full, offset + position)
        value = int(token)
        if not MIN_INT <= value <= MAX_INT:
            raise DSLParseError(f"integer {value} outside [{MIN_INT}, {MAX_INT}]", full, offset + position)
        return value

    if tokens[0][0] != "[":
        if len(tokens) != 1:
            raise DSLParseError("an int value is one token", full, offset + tokens[1][1])
        return parse_int(*tokens[0])
    if tokens[-1][0] != "]":
        raise DSLParseError("list not closed by ']'", full, offset + tokens[-1][1])
    items = tuple(parse_int(t, p) for t, p in tokens[1:-1])
    if len(items) > MAX_LIST_LENGTH:
        raise DSLParseError(f"list longer than {MAX_LIST_LENGTH}", full, offset + tokens[0][1])
    return items


def parse_state(text: str) -> dict[str, Value]:
    """Parse an ExeDec program state / input line ``x0 = [ 1 2 ] | x1 = 3`` into ``{name: value}``."""
    state: dict[str, Value] = {}
    start = 0
    for chunk in text.split("|"):
        if "=" not in chunk:
            raise DSLParseError("expected 'x<i> = value'", text, start)
        eq = chunk.index("=")
        name = chunk[:eq].strip()
        name_pos = start + (len(chunk[:eq]) - len(chunk[:eq].lstrip()))
        _check_variable(name, text, name_pos, "a state variable")
        if name in state:
            raise DSLParseError(f"variable {name} appears twice", text, name_pos)
        state[name] = parse_value(chunk[eq + 1 :], start + eq + 1, text)
        start += len(chunk) + 1
    return state


def run_statement(statement: Statement, state: dict[str, Value]) -> Value | None:
    """Result of one statement on one example's state (``None``: no value, see the module doc)."""
    missing = [a for a in statement.args if a not in state]
    if missing:
        raise ValueError(f"statement {statement} reads undefined variable(s) {missing}")
    return apply_operation(statement.op, statement.lam, [state[a] for a in statement.args])


def run_program(program: Program, inputs: Sequence[Value]) -> list[Value] | None:
    """Every variable's value on one example (inputs first), or ``None`` if some statement fails."""
    if len(inputs) != len(program.inputs):
        raise ValueError(f"program takes {len(program.inputs)} input(s), got {len(inputs)}")
    state = dict(zip(program.inputs, inputs, strict=True))
    values = list(inputs)
    for statement in program.statements:
        result = run_statement(statement, state)
        if result is None:
            return None
        state[statement.variable] = result
        values.append(result)
    return values


def program_output(program: Program, inputs: Sequence[Value]) -> Value | None:
    """The program's output (its last variable) on one example, ``None`` if it fails."""
    values = run_program(program, inputs)
    return None if values is None else values[-1]


def has_dead_code(program: Program) -> bool:
    """Whether some non-final statement's variable is never read later (dead inputs are allowed)."""
    used = {a for s in program.statements for a in s.args}
    return any(s.variable not in used for s in program.statements[:-1])
