"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — formats.

pydantic v2 models for the four public files, field for field, so official problem directories load
unchanged: ``definition.json`` (:class:`Definition`), ``workload.jsonl`` (one :class:`Workload` a line),
``solution.json`` (:class:`Solution`) and the JSONL trace (:class:`Trace` with its :class:`Evaluation`).
Axis expressions (``{"type": "expr", "expression": "2 * hidden"}``) are evaluated by an AST allow-list
(:func:`evaluate_axis_expression`), never by ``eval``.
"""

from __future__ import annotations

import ast
import json
import operator
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "float4_e2m1fn_x2",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
)
LANGUAGES = (
    "pytorch",
    "triton",
    "cute_dsl",
    "cutile",
    "cudnn_frontend",
    "cuda_cpp",
    "cutlass",
    "cudnn",
    "cublas",
    "cpp",
)
PYTHON_LANGUAGES = ("pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend")
CPU_LANGUAGES = ("pytorch", "cpp")  # languages this harness runs without CUDA


class EvaluationStatus(StrEnum):
    """The statuses of the official trace format."""

    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"
    INVALID_REFERENCE = "INVALID_REFERENCE"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------------------------------------
# axis expressions
# ---------------------------------------------------------------------------------------------------------

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_EXPRESSION_LENGTH = 256


def evaluate_axis_expression(expression: str, values: dict[str, int]) -> int:
    """Value of an axis expression over known axes; only ``+ - * / // % **``, parentheses, unary signs,
    integer literals and axis names are allowed (an AST allow-list; nothing is ``eval``-ed).

    Raises ``ValueError`` naming the expression for anything else, unknown names, a non-integer result,
    or an exponent above 64 (which would let a file ask for astronomically large numbers).
    """
    if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValueError(f"axis expression must be a string of <= {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise ValueError(f"axis expression {expression!r} is not valid: {error.msg}") from None

    def visit(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return visit(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ValueError(f"axis expression {expression!r} names unknown axis {node.id!r}")
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = visit(node.left), visit(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError(f"axis expression {expression!r}: exponent {right} exceeds 64")
            try:
                return _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ValueError(f"axis expression {expression!r} divides by zero") from None
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](visit(node.operand))
        raise ValueError(
            f"axis expression {expression!r}: {type(node).__name__} is not allowed "
            "(only + - * / // % **, parentheses, integers and axis names)"
        )

    result = visit(tree)
    if isinstance(result, float):
        if not result.is_integer():
            raise ValueError(f"axis expression {expression!r} = {result} is not an integer")
        result = int(result)
    return result


# ---------------------------------------------------------------------------------------------------------
# definition.json
# ---------------------------------------------------------------------------------------------------------


class AxisConst(_Model):
    type: Literal["const"]
    value: int
    description: str | None = None


class AxisVar(_Model):
    type: Literal["var"]
    description: str | None = None


class AxisExpr(_Model):
    type: Literal["expr"]
    expression: str
    description: str | None = None


Axis = Annotated[AxisConst | AxisVar | AxisExpr, Field(discriminator="type")]


class TensorSpec(_Model):
    """``shape``: axis names, ``[]`` for a 0-d tensor, ``None`` for a Python scalar."""

    shape: list[str] | None
    dtype: str
    description: str | None = None

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in DTYPES:
            raise ValueError(f"dtype {value!r} is unknown; allowed: {list(DTYPES)}")
        return value


class Definition(BaseModel):
    """A problem: axes, input/output specs and the reference ``run`` (Python source)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    op_type: str | None = None
    description: str | None = None
    hf_id: str | None = None
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    constraints: list[str] | None = None
    custom_inputs_entrypoint: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Definition:
        for role, specs in (("inputs", self.inputs), ("outputs", self.outputs)):
            for name, spec in specs.items():
                for axis in spec.shape or []:
                    if axis not in self.axes:
                        raise ValueError(f"{role}[{name!r}].shape names unknown axis {axis!r}")
        if not self.outputs:
            raise ValueError("outputs must name at least one output")
        overlap = set(self.inputs) & set(self.outputs)
        if overlap:
            raise ValueError(f"names {sorted(overlap)} are both inputs and outputs")
        return self

    def var_axes(self) -> list[str]:
        return [name for name, axis in self.axes.items() if isinstance(axis, AxisVar)]

    def resolve_axes(self, workload_axes: dict[str, int]) -> dict[str, int]:
        """All axis values: consts from here, vars from the workload, exprs computed (in any order)."""
        missing = [name for name in self.var_axes() if name not in workload_axes]
        if missing:
            raise ValueError(f"workload axes miss var axes {missing} of definition {self.name!r}")
        extra = sorted(set(workload_axes) - set(self.var_axes()))
        if extra:
            raise ValueError(f"workload axes {extra} are not var axes of definition {self.name!r}")
        values: dict[str, int] = {}
        for name, axis in self.axes.items():
            if isinstance(axis, AxisConst):
                values[name] = axis.value
            elif isinstance(axis, AxisVar):
                values[name] = int(workload_axes[name])
        pending = {n: a.expression for n, a in self.axes.items() if isinstance(a, AxisExpr)}
        while pending:
            progressed = False
            for name, expression in list(pending.items()):
                names = {
                    n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)
                }
                if names <= set(values):
                    values[name] = evaluate_axis_expression(expression, values)
                    del pending[name]
                    progressed = True
            if not progressed:
                raise ValueError(f"axis expressions {pending} are circular or name unknown axes")
        for name, value in values.items():
            if value < 0:
                raise ValueError(f"axis {name!r} = {value} is negative")
        for constraint in self.constraints or []:
            if not check_constraint(constraint, values):
                raise ValueError(f"constraint {constraint!r} fails for axes {values}")
        return values


_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def check_constraint(constraint: str, values: dict[str, int]) -> bool:
    """A definition constraint such as ``"hidden % 8 == 0"``: one comparison chain of axis expressions."""
    tree = ast.parse(constraint, mode="eval").body
    if not isinstance(tree, ast.Compare) or not all(type(op) in _COMPARE for op in tree.ops):
        raise ValueError(f"constraint {constraint!r} must be a comparison of axis expressions")
    left = evaluate_axis_expression(ast.unparse(tree.left), values)
    for op, comparator in zip(tree.ops, tree.comparators, strict=True):
        right = evaluate_axis_expression(ast.unparse(comparator), values)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


# ---------------------------------------------------------------------------------------------------------
# workload.jsonl
# ---------------------------------------------------------------------------------------------------------


class RandomInput(_Model):
    type: Literal["random"]


class ScalarInput(_Model):
    type: Literal["scalar"]
    value: int | float | bool


class SafetensorsInput(_Model):
    type: Literal["safetensors"]
    path: str
    tensor_key: str


class CustomInput(_Model):
    type: Literal["custom"]


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput | CustomInput, Field(discriminator="type")]


class Tolerance(_Model):
    max_atol: float = 1e-2
    max_rtol: float = 1e-2
    required_matched_ratio: float = Field(0.99, ge=0.0, le=1.0)
    max_error_cap: float | None = None
    allow_negative_inf: bool = False


class Workload(BaseModel):
    model_config = ConfigDict(extra="allow")

    uuid: str = Field(min_length=1)
    axes: dict[str, int]
    inputs: dict[str, InputSpec]
    tolerance: Tolerance | None = None


# ---------------------------------------------------------------------------------------------------------
# solution.json
# ---------------------------------------------------------------------------------------------------------


class SourceFile(_Model):
    path: str
    content: str

    @field_validator("path")
    @classmethod
    def _safe_path(cls, value: str) -> str:
        pure = PurePosixPath(value)
        if not value or pure.is_absolute() or ".." in pure.parts or "\\" in value:
            raise ValueError(f"sources path {value!r} must be relative, without '..'")
        return value


class CompileOptions(_Model):
    cflags: list[str] = Field(default_factory=list)
    cuda_cflags: list[str] = Field(default_factory=lambda: ["-O3", "--use_fast_math"])
    ld_flags: list[str] = Field(default_factory=lambda: ["-lcuda"])


class BuildSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    languages: list[str] = Field(min_length=1)
    target_hardware: list[str] = Field(default_factory=list)
    entry_point: str
    destination_passing_style: bool = True
    binding: str | None = None
    dependencies: list[str] = Field(default_factory=list)
    compile_options: CompileOptions | None = None

    @field_validator("languages")
    @classmethod
    def _known_languages(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in LANGUAGES]
        if unknown:
            raise ValueError(f"languages {unknown} are unknown; allowed: {list(LANGUAGES)}")
        python = [v for v in value if v in PYTHON_LANGUAGES]
        if python and len(python) != len(value):
            raise ValueError(f"languages {value} mix Python and C++ languages")
        return value

    @field_validator("entry_point")
    @classmethod
    def _entry_form(cls, value: str) -> str:
        if value.count("::") != 1 or not all(value.split("::")):
            raise ValueError(f"entry_point {value!r} must look like 'file.py::function'")
        return value


class Solution(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    author: str
    description: str | None = None
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)

    @model_validator(mode="after")
    def _entry_exists(self) -> Solution:
        paths = [s.path for s in self.sources]
        if len(set(paths)) != len(paths):
            raise ValueError(f"sources has duplicate paths {paths}")
        entry_file = self.spec.entry_point.split("::")[0]
        if entry_file not in paths:
            raise ValueError(f"entry_point file {entry_file!r} is not among sources {paths}")
        return self


# ---------------------------------------------------------------------------------------------------------
# trace (JSONL output)
# ---------------------------------------------------------------------------------------------------------


class Correctness(_Model):
    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    has_nan: bool = False
    has_inf: bool = False


class Performance(_Model):
    latency_ms: float
    reference_latency_ms: float | None = None
    speedup_factor: float | None = None


class Environment(_Model):
    hardware: str
    libs: dict[str, str] = Field(default_factory=dict)


class Evaluation(BaseModel):
    model_config = ConfigDict(extra="allow")  # our additions (sol, timing stats) ride along

    status: EvaluationStatus
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None
    environment: Environment
    timestamp: str


class Trace(BaseModel):
    model_config = ConfigDict(extra="allow")

    definition: str
    solution: str | None = None
    workload: Workload
    evaluation: Evaluation | None = None


# ---------------------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------------------


class FormatError(ValueError):
    """A problem or solution file that cannot be loaded; the message names the file and the field."""


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise FormatError(f"{path}: file not found")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise FormatError(f"{path}: malformed JSON ({error.msg} at line {error.lineno})") from None


def _validate(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise FormatError(f"{where}: field {field!r}: {first['msg']}") from None


def load_definition(path: str | Path) -> Definition:
    path = Path(path)
    return _validate(Definition, _read_json(path), str(path))


def load_solution(path: str | Path) -> Solution:
    path = Path(path)
    return _validate(Solution, _read_json(path), str(path))


def load_workloads(path: str | Path, definition: Definition | None = None) -> list[Workload]:
    """Read ``workload.jsonl``; with ``definition``, check axes and input names against it."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"{path}: file not found")
    workloads = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise FormatError(f"{path}:{number}: malformed JSON ({error.msg})") from None
        workload = _validate(Workload, data, f"{path}:{number}")
        if definition is not None:
            check_workload(definition, workload, f"{path}:{number}")
        workloads.append(workload)
    if not workloads:
        raise FormatError(f"{path}: no workloads")
    return workloads


def check_workload(definition: Definition, workload: Workload, where: str = "workload") -> None:
    """Raise ``FormatError`` when the workload's axes or inputs do not fit the definition."""
    try:
        definition.resolve_axes(workload.axes)
    except (ValueError, SyntaxError) as error:
        raise FormatError(f"{where}: field 'axes': {error}") from None
    unknown = sorted(set(workload.inputs) - set(definition.inputs))
    if unknown:
        raise FormatError(f"{where}: field 'inputs': {unknown} are not inputs of {definition.name!r}")
    for name, spec in definition.inputs.items():
        given = workload.inputs.get(name)
        if spec.shape is None and not isinstance(given, ScalarInput):
            raise FormatError(f"{where}: field 'inputs.{name}': a scalar input needs {{type: scalar}}")
        if isinstance(given, CustomInput) and not definition.custom_inputs_entrypoint:
            raise FormatError(
                f"{where}: field 'inputs.{name}': type custom needs the definition's custom_inputs_entrypoint"
            )


def write_traces(traces: list[Trace], path: str | Path) -> Path:
    """Append-free JSONL write (temp file, then rename) of ``traces``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(t.model_dump_json(exclude_none=False) + "\n" for t in traces))
    tmp.replace(path)
    return path


def read_traces(path: str | Path) -> list[Trace]:
    return [
        _validate(Trace, json.loads(line), f"{path}:{i}")
        for i, line in enumerate(Path(path).read_text().splitlines(), start=1)
        if line.strip()
    ]
