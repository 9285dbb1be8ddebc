"""Each method's declared central ideas (``IDEAS`` in its package) name a guarding test that exists.

The harness runs every declared guard as an idea-off matrix; here we check only that the declaration
is well formed: the node id points at a test function in the repository, and the method's README names
that test (so a reader finds how the idea is switched off).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from neurips26.registry import SLUGS

ROOT = Path(__file__).parents[1]
METHODS = ROOT / "src/neurips26/methods"


def _declared_ideas(package: Path) -> dict[str, str] | None:
    """The literal ``IDEAS`` dict of a method package's ``__init__.py`` (parsed, not imported)."""
    tree = ast.parse((package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "IDEAS" for t in targets):
                return ast.literal_eval(node.value)
    return None


DECLARING = sorted(p.name for p in METHODS.iterdir() if (p / "__init__.py").exists() and _declared_ideas(p))


# every registered method declares its central ideas (issue 42, item 5): a new method joins by registering
MUST_DECLARE = set(SLUGS)


def test_every_registered_method_declares_its_ideas():
    assert set(DECLARING) >= MUST_DECLARE, f"no IDEAS declared by: {sorted(MUST_DECLARE - set(DECLARING))}"


@pytest.mark.parametrize("slug", DECLARING)
def test_each_declared_idea_names_an_existing_guard_the_readme_mentions(slug):
    ideas = _declared_ideas(METHODS / slug)
    readme = (METHODS / slug / "README.md").read_text()
    for idea, node_id in ideas.items():
        path, _, name = node_id.partition("::")
        test_file = ROOT / path
        assert test_file.is_file(), f"{slug}: idea {idea!r} names a missing file {path}"
        tree = ast.parse(test_file.read_text())
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name.startswith("test_") and name in functions, f"{slug}: idea {idea!r}: no test {node_id}"
        assert name in readme, f"{slug}: the README does not mention the guard {name} of idea {idea!r}"
