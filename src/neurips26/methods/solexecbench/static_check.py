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

Two modules are *narrowed*, not banned (issue #33: an honest kernel that sleeps or reads a clock was a false
positive): ``time`` may be imported and its clocks read or ``sleep`` called (``ALLOWED_ATTRIBUTES``), but
any other attribute, any assignment to a ``time`` attribute (under any alias) and importing a name it does
not list stay banned; ``gc`` may ``collect``/``enable``/``disable`` and read its counters, but never
introspect other objects (``get_objects``, ``get_referrers``, ``get_referents``...). Aliases are tracked
(``import time as t; t.perf_counter = f`` is caught as a patch of ``time``). The runtime backs them up: the
driver snapshots the timers' identities and replaces ``gc``'s introspection functions with ones that record
the attempt (REWARD_HACK).
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
PATCH_TARGETS = frozenset({"torch", "time", "gc", "builtins", "sys", "F", "nn", "np", "numpy"})
# modules a solution may import, with the only attributes it may use (reading clocks, sleeping, collecting)
ALLOWED_ATTRIBUTES: dict[str, frozenset[str]] = {
    "time": frozenset(
        {
            "sleep",
            "perf_counter",
            "perf_counter_ns",
            "monotonic",
            "monotonic_ns",
            "time",
            "time_ns",
            "process_time",
            "process_time_ns",
            "thread_time",
            "thread_time_ns",
        }
    ),
    "gc": frozenset({"collect", "enable", "disable", "isenabled", "get_count", "get_threshold"}),
}


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

    # local name -> the module it stands for (``import time as t``: t -> time); every import, so a patch
    # through an alias of torch or time is still a patch
    aliases = {name: name for name in PATCH_TARGETS}
    narrowed: set[str] = set()  # local names bound to a narrowed module by ``import time [as t]``
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                aliases[local] = alias.name.split(".")[0]
                if aliases[local] in ALLOWED_ATTRIBUTES:
                    narrowed.add(local)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:  # ``from torch import nn as m``: m stands for a torch module
                aliases[alias.asname or alias.name] = node.module.split(".")[0]

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in BANNED_MODULES:
                    flag(node, f"imports {alias.name!r}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module.split(".")[0] in BANNED_MODULES:
                flag(node, f"imports from {module!r}")
            if node.level == 0 and module in ALLOWED_ATTRIBUTES:
                for alias in node.names:
                    if alias.name not in ALLOWED_ATTRIBUTES[module]:
                        flag(
                            node,
                            f"imports {alias.name!r} from {module!r} (allowed: reading clocks, sleeping)",
                        )
            if module.startswith("torch.utils.cpp_extension"):
                flag(node, "builds C++ at run time (torch.utils.cpp_extension)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
            flag(node, f"calls {node.func.id}()")
        elif isinstance(node, ast.Name) and node.id in {"__builtins__", "__import__"}:
            flag(node, f"uses {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in BANNED_ATTRIBUTES:
            flag(node, f"uses attribute {node.attr!r}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in narrowed
            and node.attr not in ALLOWED_ATTRIBUTES[aliases[node.value.id]]
        ):
            module = aliases[node.value.id]
            flag(node, f"uses {module}.{node.attr} (only {sorted(ALLOWED_ATTRIBUTES[module])} are allowed)")
        elif isinstance(node, ast.Name) and node.id in narrowed and not isinstance(node.ctx, ast.Load):
            flag(node, f"rebinds {node.id!r} (the {aliases[node.id]} module)")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                root = _root_name(target)
                if (
                    isinstance(target, (ast.Attribute, ast.Subscript))
                    and aliases.get(root or "") in PATCH_TARGETS
                ):
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
