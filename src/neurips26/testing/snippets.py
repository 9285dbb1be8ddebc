"""README usage snippets as tests: every ```` ```python ```` block of a method's README runs on its own.

One runner for all methods (it replaces one hand-written copy per method): each block is executed in a
fresh namespace, so a block that forgets an import fails here as it would for a reader who pastes it
alone. A block that cannot run on every machine says so in an HTML comment on the line just above its
fence, which the rendered README does not show:

    <!-- snippet: requires cuda -->        runs only where torch sees a CUDA device
    <!-- snippet: skip <reason> -->        never run by the matrix (a method test runs it its own way)

A method's test can still run one block itself (``run_snippet``) to assert on the names it defines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neurips26.registry import method_readme

__all__ = ["Snippet", "readme_snippets", "run_snippet"]

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_DIRECTIVE = re.compile(r"<!--\s*snippet:\s*(requires|skip)\s*(.*?)\s*-->\s*$")
REQUIREMENTS = ("cuda",)


@dataclass(frozen=True)
class Snippet:
    """One ```` ```python ```` block: where it is, its code, and what it needs to run."""

    readme: Path
    index: int  # 0-based among the README's python blocks
    line: int  # 1-based line of the first code line
    code: str
    requires: tuple[str, ...] = ()
    skip_reason: str | None = None

    @property
    def name(self) -> str:
        return f"{self.readme.parent.name}[{self.index}]"


def readme_snippets(readme: str | Path) -> list[Snippet]:
    """Every python block of ``readme`` (a path, or a method slug), in order, with its directive."""
    path = Path(readme) if Path(readme).suffix == ".md" else method_readme(str(readme))
    if not path.is_file():
        raise FileNotFoundError(f"no README at {path}")
    text = path.read_text(encoding="utf-8")
    snippets = []
    for index, match in enumerate(_FENCE.finditer(text)):
        line = text.count("\n", 0, match.start(1)) + 1
        requires, skip_reason = _directive(text, match.start())
        snippets.append(Snippet(path, index, line, match.group(1), requires, skip_reason))
    return snippets


def _directive(text: str, fence_start: int) -> tuple[tuple[str, ...], str | None]:
    """The ``<!-- snippet: ... -->`` comment on the line just above a fence, if any."""
    above = text[:fence_start].rstrip("\n").rsplit("\n", 1)[-1]
    match = _DIRECTIVE.search(above)
    if match is None:
        return (), None
    kind, argument = match.groups()
    if kind == "skip":
        if not argument:
            raise ValueError(f"'<!-- snippet: skip -->' needs a reason: {above.strip()!r}")
        return (), argument
    requires = tuple(argument.split())
    unknown = sorted(set(requires) - set(REQUIREMENTS))
    if unknown:
        raise ValueError(f"snippet requires {unknown}; known requirements: {list(REQUIREMENTS)}")
    return requires, None


def missing_requirements(snippet: Snippet) -> list[str]:
    """The requirements of ``snippet`` this machine does not meet."""
    missing = []
    if "cuda" in snippet.requires:
        import torch

        if not torch.cuda.is_available():
            missing.append("cuda")
    return missing


def run_snippet(snippet: Snippet, replacements: dict[str, str] | None = None) -> dict[str, Any]:
    """Execute ``snippet`` in a fresh namespace and return it.

    ``replacements`` (old -> new text) point a snippet's illustrative paths elsewhere (e.g. a temporary
    folder). Tracebacks name the README and the block's real line numbers.
    """
    code = snippet.code
    for old, new in (replacements or {}).items():
        if old not in code:
            raise ValueError(f"{snippet.name}: {old!r} does not occur in the snippet")
        code = code.replace(old, new)
    namespace: dict[str, Any] = {"__name__": f"readme_snippet_{snippet.readme.parent.name}"}
    # Padding keeps the README's line numbers in tracebacks.
    exec(compile("\n" * (snippet.line - 1) + code, str(snippet.readme), "exec"), namespace)
    return namespace
