"""C frontends: tree-sitter-c (primary) and pycparser after ``gcc -E`` (second opinion).

The tree-sitter tree gives every loop of a function with its canonical form (variable, bounds, step),
its access sites (``a[e]``, ``*p``, ``p->f``) classified as read / write / commutative update, and the
scalars it touches classified as read-only / private / carried. Everything downstream (graphs, the
instrumenting profiler, the CUDA generator) works on these objects, never on regexes over text.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any

ACCESS_TYPES = ("subscript_expression", "pointer_expression", "field_expression")
COMMUTATIVE_OPS = ("+=", "-=")
MATH_CALLS = frozenset(
    [
        "sqrtf",
        "sqrt",
        "fabsf",
        "fabs",
        "expf",
        "exp",
        "logf",
        "log",
        "sinf",
        "sin",
        "cosf",
        "cos",
        "fminf",
        "fmin",
        "fmaxf",
        "fmax",
        "powf",
        "pow",
        "floorf",
        "floor",
        "ceilf",
        "ceil",
        "tanhf",
        "tanh",
        "abs",
        "min",
        "max",
    ]
)


@functools.cache
def _parser() -> Any:
    import tree_sitter_c
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_c.language()))


@dataclass(frozen=True)
class Param:
    """One function parameter: ``float *restrict a`` -> name a, ctype float, pointer True, restrict True."""

    name: str
    ctype: str
    pointer: bool
    restrict: bool = False
    const: bool = False

    def declaration(self) -> str:
        qualifiers = ("const " if self.const else "") + self.ctype
        if self.pointer:
            return f"{qualifiers} *{'restrict ' if self.restrict else ''}{self.name}"
        return f"{qualifiers} {self.name}"


@dataclass
class AccessSite:
    """A memory access inside a loop: ``kind`` is read, write, update (``+=``/``-=``/``++``) or rw."""

    site: int
    kind: str
    base: str  # the array/pointer name (``a`` in ``a[i]``; the expression text when not a name)
    text: str
    start: int  # byte offsets of the access expression in the source
    end: int
    indirect: bool  # the index itself reads memory (``a[idx[i]]``) or a pointer is dereferenced
    index_text: str = ""


@dataclass
class Loop:
    """A ``for`` loop: canonical form when it has one, its access sites and scalar classes."""

    index: int
    line: int
    column: int
    depth: int
    node: Any = field(repr=False)
    var: str | None = None
    lower: str | None = None
    upper: str | None = None
    step: int | None = None
    sites: list[AccessSite] = field(default_factory=list)
    read_only_scalars: list[str] = field(default_factory=list)
    private_scalars: list[str] = field(default_factory=list)
    carried_scalars: list[str] = field(default_factory=list)
    reduction_scalars: list[str] = field(default_factory=list)
    unsupported: str = ""  # why the CUDA generator cannot map this loop ("" when it can)

    @property
    def text(self) -> str:
        return self.node.text.decode()

    @property
    def body(self) -> Any:
        return self.node.child_by_field_name("body")


@dataclass
class CFunction:
    """A parsed C function with its parameters and every ``for`` loop in pre-order."""

    name: str
    params: list[Param]
    loops: list[Loop]
    source: bytes = field(repr=False)
    node: Any = field(repr=False)
    local_types: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (ctype, pointer)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def _first_error(node: Any) -> Any | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    if not node.has_error:
        return None
    for child in node.children:
        found = _first_error(child)
        if found is not None:
            return found
    return node


def parse_source(source: str) -> Any:
    """Parse C ``source`` with tree-sitter-c; a syntax error raises ``ValueError`` with line and column."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of C code, got {type(source).__name__}")
    if not source.strip():
        raise ValueError("source is empty: expected C code with at least one function")
    tree = _parser().parse(source.encode())
    bad = _first_error(tree.root_node)
    if bad is not None:
        line, column = bad.start_point.row + 1, bad.start_point.column + 1
        snippet = source.splitlines()[line - 1].strip() if line <= len(source.splitlines()) else ""
        what = f"missing {bad.type!r}" if bad.is_missing else "unexpected input"
        raise ValueError(f"source: C syntax error at line {line}, column {column} ({what}): {snippet!r}")
    return tree


def _declarator_name(node: Any) -> tuple[str | None, bool, bool]:
    """(name, is_pointer, restrict) of a declarator node."""
    pointer = restrict = False
    while node is not None and node.type not in ("identifier", "field_identifier"):
        if node.type in ("pointer_declarator", "abstract_pointer_declarator"):
            pointer = True
            restrict |= any(c.type == "type_qualifier" and c.text == b"restrict" for c in node.children)
        elif node.type == "array_declarator":
            pointer = True
        node = node.child_by_field_name("declarator")
    return (node.text.decode() if node is not None else None), pointer, restrict


def _function_name(definition: Any) -> str | None:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return None
    name, _, _ = _declarator_name(declarator.child_by_field_name("declarator"))
    return name


def _params(definition: Any) -> list[Param]:
    declarator = definition.child_by_field_name("declarator")
    while declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    params = []
    for node in declarator.child_by_field_name("parameters").named_children:
        if node.type != "parameter_declaration":
            continue
        ctype = node.child_by_field_name("type").text.decode()
        const = any(c.type == "type_qualifier" and c.text == b"const" for c in node.children)
        name, pointer, restrict = _declarator_name(node.child_by_field_name("declarator"))
        if name is None:  # ``void f(void)``
            continue
        params.append(Param(name, ctype, pointer, restrict, const))
    return params


def _walk(node: Any):
    yield node
    for child in node.children:
        yield from _walk(child)


def _local_types(body: Any) -> dict[str, tuple[str, bool]]:
    types: dict[str, tuple[str, bool]] = {}
    for node in _walk(body):
        if node.type == "declaration":
            ctype = node.child_by_field_name("type").text.decode()
            for child in node.children_by_field_name("declarator"):
                target = child.child_by_field_name("declarator") if child.type == "init_declarator" else child
                name, pointer, _ = _declarator_name(target)
                if name:
                    types[name] = (ctype, pointer)
    return types


def list_functions(source: str) -> list[str]:
    """Names of the functions defined in ``source``."""
    tree = parse_source(source)
    return [
        n for n in (_function_name(d) for d in _walk(tree.root_node) if d.type == "function_definition") if n
    ]


def parse_function(source: str, function: str | None = None) -> CFunction:
    """Parse ``function`` (default: the only, or else the first, function) of ``source``.

    Raises ``ValueError`` naming the missing function and the ones that exist.
    """
    tree = parse_source(source)
    definitions = [d for d in _walk(tree.root_node) if d.type == "function_definition"]
    if not definitions:
        raise ValueError("source defines no function")
    names = [_function_name(d) for d in definitions]
    if function is None:
        chosen = definitions[0]
    elif function in names:
        chosen = definitions[names.index(function)]
    else:
        raise ValueError(f"function={function!r} not found; the source defines {names}")
    body = chosen.child_by_field_name("body")
    result = CFunction(_function_name(chosen) or "", _params(chosen), [], source.encode(), chosen)
    result.local_types = _local_types(body)
    for loop_node in (n for n in _walk(body) if n.type == "for_statement"):
        depth = sum(1 for a in _ancestors(loop_node, body) if a.type == "for_statement")
        loop = Loop(
            len(result.loops),
            loop_node.start_point.row + 1,
            loop_node.start_point.column + 1,
            depth,
            loop_node,
        )
        _canonical_form(loop)
        _collect_sites(loop)
        _classify_scalars(loop, result)
        _check_mappable(loop, result)
        result.loops.append(loop)
    return result


def _ancestors(node: Any, stop: Any):
    node = node.parent
    while node is not None and node.id != stop.id:
        yield node
        node = node.parent


def _canonical_form(loop: Loop) -> None:
    """Fill var/lower/upper/step for ``for (int i = L; i < U; i++ | i += c)``; else mark unsupported."""
    node = loop.node
    init, cond, update = (node.child_by_field_name(k) for k in ("initializer", "condition", "update"))
    var = lower = None
    if init is not None and init.type == "declaration":
        decl = init.child_by_field_name("declarator")
        if decl is not None and decl.type == "init_declarator":
            var = decl.child_by_field_name("declarator").text.decode()
            lower = decl.child_by_field_name("value").text.decode()
    elif (
        init is not None
        and init.type == "assignment_expression"
        and init.child_by_field_name("operator").text == b"="
    ):
        var = init.child_by_field_name("left").text.decode()
        lower = init.child_by_field_name("right").text.decode()
    upper = None
    if cond is not None and cond.type == "binary_expression" and var is not None:
        op = cond.child_by_field_name("operator").text.decode()
        left, right = (
            cond.child_by_field_name("left").text.decode(),
            cond.child_by_field_name("right").text.decode(),
        )
        if left == var and op in ("<", "<="):
            upper = right if op == "<" else f"({right}) + 1"
        elif right == var and op in (">", ">="):
            upper = left if op == ">" else f"({left}) + 1"
    step = None
    if update is not None and var is not None:
        text = re.sub(r"\s+", "", update.text.decode())
        if text in (f"{var}++", f"++{var}"):
            step = 1
        else:
            match = re.fullmatch(rf"{re.escape(var)}(?:\+=|={re.escape(var)}\+)(\d+)", text)
            step = int(match.group(1)) if match and int(match.group(1)) > 0 else None
    if var is None or lower is None or upper is None or step is None:
        loop.unsupported = "not in canonical form for (i = L; i < U; i++ or i += c)"
        return
    loop.var, loop.lower, loop.upper, loop.step = var, lower, upper, step


def _access_kind(node: Any) -> str:
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        node, parent = parent, parent.parent
    if parent is None:
        return "read"
    if parent.type == "assignment_expression" and parent.child_by_field_name("left").id == node.id:
        op = parent.child_by_field_name("operator").text.decode()
        return "write" if op == "=" else ("update" if op in COMMUTATIVE_OPS else "rw")
    if parent.type == "update_expression":
        return "update"
    if parent.type == "pointer_expression" and parent.child_by_field_name("operator").text == b"&":
        return "address"
    return "read"


def _collect_sites(loop: Loop) -> None:
    for node in _walk(loop.node):
        if node.type not in ACCESS_TYPES:
            continue
        if node.type == "pointer_expression" and node.child_by_field_name("operator").text != b"*":
            continue
        if node.type == "field_expression" and node.child_by_field_name("operator").text != b"->":
            continue
        kind = _access_kind(node)
        if kind == "address":
            continue
        argument = node.child_by_field_name("argument")
        index = node.child_by_field_name("index") if node.type == "subscript_expression" else None
        indirect = node.type != "subscript_expression" or any(n.type in ACCESS_TYPES for n in _walk(index))
        loop.sites.append(
            AccessSite(
                site=len(loop.sites),
                kind=kind,
                base=argument.text.decode(),
                text=node.text.decode(),
                start=node.start_byte,
                end=node.end_byte,
                indirect=indirect,
                index_text=index.text.decode() if index is not None else "",
            )
        )


def _identifier_uses(loop: Loop) -> list[tuple[str, str, Any]]:
    """(name, kind, node) for every scalar identifier use in the loop body, in source order."""
    uses = []
    body = loop.body
    if body is None:
        return uses
    for node in _walk(body):
        if node.type != "identifier":
            continue
        parent = node.parent
        if parent.type in ("call_expression",) and parent.child_by_field_name("function").id == node.id:
            continue
        if parent.type in ACCESS_TYPES and parent.child_by_field_name("argument").id == node.id:
            continue  # an array base, not a scalar
        if (
            parent.type in ("init_declarator", "declaration")
            and parent.child_by_field_name("declarator") is not None
            and parent.child_by_field_name("declarator").id == node.id
        ):
            uses.append((node.text.decode(), "declare", node))
            continue
        uses.append((node.text.decode(), _access_kind(node), node))
    return uses


def _classify_scalars(loop: Loop, function: CFunction) -> None:
    """Read-only (passed by value), private (written first at the body's top level), reduction
    (only ``s += e``) or carried (read before written across iterations)."""
    if loop.body is None:
        return
    declared_inside = {name for name, kind, _ in _identifier_uses(loop) if kind == "declare"}
    by_name: dict[str, list[tuple[str, Any]]] = {}
    for name, kind, node in _identifier_uses(loop):
        if name in declared_inside or name == loop.var:
            continue
        by_name.setdefault(name, []).append((kind, node))
    pointers = {p.name for p in function.params if p.pointer} | {
        n for n, (_, ptr) in function.local_types.items() if ptr
    }
    for name, uses in by_name.items():
        kinds = [k for k, _ in uses]
        if name.isupper() or name in ("NULL", "true", "false"):
            continue
        if name in pointers:
            if any(k != "read" for k in kinds):
                loop.carried_scalars.append(name)  # a pointer moved inside the loop
            continue
        if all(k == "read" for k in kinds):
            loop.read_only_scalars.append(name)
        elif all(k == "update" for k in kinds):
            loop.reduction_scalars.append(name)
        elif (
            kinds[0] == "write"
            and _top_level_statement(uses[0][1], loop.body)
            and not _reads_in_rhs(uses[0][1], name)
        ):
            loop.private_scalars.append(name)
        else:
            loop.carried_scalars.append(name)
    loop.read_only_scalars.sort()


def _top_level_statement(node: Any, body: Any) -> bool:
    statement = node
    while statement.parent is not None and statement.parent.id != body.id:
        statement = statement.parent
        if statement.type in (
            "if_statement",
            "for_statement",
            "while_statement",
            "do_statement",
            "switch_statement",
        ):
            return False
    return statement.parent is not None


def _reads_in_rhs(node: Any, name: str) -> bool:
    parent = node.parent
    right = parent.child_by_field_name("right") if parent.type == "assignment_expression" else None
    return right is not None and any(n.type == "identifier" and n.text.decode() == name for n in _walk(right))


def _check_mappable(loop: Loop, function: CFunction) -> None:
    if loop.unsupported:
        return
    for node in _walk(loop.body):
        if node.type in ("return_statement", "goto_statement"):
            loop.unsupported = f"'{node.type.split('_')[0]}' inside the loop"
        elif node.type == "break_statement" and not any(
            a.type in ("for_statement", "while_statement", "do_statement", "switch_statement")
            for a in _ancestors(node, loop.node)
        ):
            loop.unsupported = "'break' leaves the loop early"
        elif node.type == "call_expression":
            callee = node.child_by_field_name("function").text.decode()
            if callee not in MATH_CALLS:
                loop.unsupported = f"call to {callee!r} (only math functions map to device code)"
        if loop.unsupported:
            return
    after = function.source[loop.node.end_byte : function.node.end_byte].decode()
    for name in loop.private_scalars:
        if re.search(rf"\b{re.escape(name)}\b", after):
            loop.unsupported = f"private scalar {name!r} is used after the loop (last-private)"
            return


def pycparser_loops(source: str) -> dict[str, list[int]]:
    """The second frontend: ``gcc -E`` with pycparser-fake-libc, then pycparser; function -> loop lines.

    It rejects C that tree-sitter's error-tolerant grammar would accept (e.g. undeclared types).
    Raises ``ValueError`` (with line and column when pycparser gives them) or ``RuntimeError`` when gcc
    is missing.
    """
    import pycparser
    import pycparser.c_parser
    import pycparser_fake_libc

    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is missing: the pycparser frontend needs 'gcc -E' (apt-get install gcc)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "input.c")
        with open(path, "w") as handle:
            handle.write(source)
        done = subprocess.run(
            [gcc, "-E", "-nostdinc", f"-I{pycparser_fake_libc.directory}", "-D__restrict=", path],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise ValueError(f"source: gcc -E failed: {done.stderr.strip().splitlines()[-1:]}")
    try:
        ast = pycparser.CParser().parse(done.stdout, filename="input.c")
    except pycparser.c_parser.ParseError as exc:
        raise ValueError(f"source: pycparser: {exc}") from exc
    loops: dict[str, list[int]] = {}

    class Visitor(pycparser.c_ast.NodeVisitor):
        current = ""

        def visit_FuncDef(self, node: Any) -> None:
            Visitor.current = node.decl.name
            loops[node.decl.name] = []
            self.generic_visit(node)

        def visit_For(self, node: Any) -> None:
            loops[Visitor.current].append(node.coord.line)
            self.generic_visit(node)

    Visitor().visit(ast)
    return loops
