"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — AST check.

The paper mentions static analysis; the public repository has none. Before a Python-language solution is
staged, :func:`static_check` parses every source and reports the constructs an honest kernel never needs:
concurrency (``threading``, ``multiprocessing``, ``concurrent``, ``subprocess``, ``os.fork``...), escape
hatches (``ctypes``, ``socket``, ``signal``, ``sys.settrace``/``setprofile``, ``gc``, ``inspect``,
``importlib``, ``__import__``, ``exec``/``eval``/``compile``), assignment to ``builtins``/``sys.modules``,
attribute assignment on ``torch``/``time`` (monkey-patching timers or ops), dunder introspection
(``__globals__``, ``__subclasses__``, ``__code__``...), ``torch.cuda.Stream`` and file I/O (``open``,
``os``, ``pathlib``, ``shutil``, ``io``) — the staging dir holds nothing a solution may read or write.
A dynamic check still backs every rule (a static check alone is easy to dodge).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

BANNED_MODULES = frozenset(
    {
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "ctypes",
        "cffi",
        "socket",
        "signal",
        "gc",
        "inspect",
        "importlib",
        "os",
        "sys",
        "pathlib",
        "shutil",
        "io",
        "builtins",
        "pickle",
        "marshal",
        "time",
        "asyncio",
        "mmap",
        "resource",
        "sysconfig",
        "site",
        "__main__",
    }
)
BANNED_CALLS = frozenset(
    {
        "__import__",
        "exec",
        "eval",
        "compile",
        "open",
        "globals",
        "locals",
        "vars",
        "setattr",
        "delattr",
        "breakpoint",
        "input",
    }
)
BANNED_ATTRIBUTES = frozenset(
    {
        "__globals__",
        "__subclasses__",
        "__code__",
        "__builtins__",
        "__dict__",
        "__class__",
        "__bases__",
        "__mro__",
        "__closure__",
        "__getattribute__",
        "f_globals",
        "f_locals",
        "f_back",
        "settrace",
        "setprofile",
        "_getframe",
        "Stream",
        "cpp_extension",
        "load_inline",
    }
)
PATCH_TARGETS = frozenset({"torch", "time", "builtins", "sys", "F", "nn", "np", "numpy"})


@dataclass(frozen=True)
class Finding:
    """One banned construct: the file, the line and why."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def check_source(source: str, path: str = "<solution>") -> list[Finding]:
    """Findings for one Python source; a syntax error is one finding (the driver reports COMPILE_ERROR)."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        return [Finding(path, error.lineno or 0, f"syntax error: {error.msg}")]
    findings: list[Finding] = []

    def flag(node: ast.AST, reason: str) -> None:
        findings.append(Finding(path, getattr(node, "lineno", 0), reason))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in BANNED_MODULES:
                    flag(node, f"imports {alias.name!r}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module.split(".")[0] in BANNED_MODULES:
                flag(node, f"imports from {module!r}")
            if module.startswith("torch.utils.cpp_extension"):
                flag(node, "builds C++ at run time (torch.utils.cpp_extension)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
            flag(node, f"calls {node.func.id}()")
        elif isinstance(node, ast.Name) and node.id in {"__builtins__", "__import__"}:
            flag(node, f"uses {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in BANNED_ATTRIBUTES:
            flag(node, f"uses attribute {node.attr!r}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)) and _root_name(target) in PATCH_TARGETS:
                    flag(node, f"assigns to {ast.unparse(target)} (monkey-patching a library)")
        elif isinstance(node, ast.Global):
            flag(node, "uses global state (cross-call caches)")
    return findings


def static_check(sources: dict[str, str]) -> list[Finding]:
    """Findings over every ``.py`` source of a solution (``{path: content}``)."""
    findings: list[Finding] = []
    for path, content in sources.items():
        if path.endswith(".py"):
            findings.extend(check_source(content, path))
    return findings
