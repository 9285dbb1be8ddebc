"""Every ```python block of every method README runs on its own, in a fresh namespace and a fresh folder.

One matrix for all methods (``neurips26.testing.snippets``): a block that needs an import from an earlier
block, a file the reader does not have, or a name that no longer exists fails here, as it would for a
reader who pastes it. Blocks that cannot run everywhere carry a ``<!-- snippet: ... -->`` directive.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from neurips26.registry import METHODS
from neurips26.testing.snippets import missing_requirements, readme_snippets, run_snippet

# What a snippet must leave behind, beyond running: the names its README text promises (by snippet name).
EXPECTATIONS: dict[str, Callable[[dict], bool]] = {
    "dacs[0]": lambda ns: len(ns["weights"]) == 2 and 0.0 <= ns["accuracy"] <= 1.0,
    "poes[0]": lambda ns: ns["best_prompt"] in ns["responses"],
    "sad[0]": lambda ns: len(ns["result"].solved) == 5,
    "samhybrid[0]": lambda ns: "theta_hat" in ns,
    "sast[0]": lambda ns: 0.0 <= ns["accuracy"] <= 1.0 and ns["trainer"].ledger.epochs == ns["config"].epochs,
    "screensearch[0]": lambda ns: Path("screensearch_readme.graphml").stat().st_size > 0,
    "snapmla[0]": lambda ns: ns["cache"].get_seq_length() == ns["tokens"].shape[1],
    "srlmpc[1]": lambda ns: ns["gsf"].s_star.shape == (2,),
    "star[0]": lambda ns: ns["scores"].shape == (3000,),
}


def _cases() -> list:
    cases = []
    for spec in METHODS:
        for snippet in readme_snippets(spec.slug):
            cases.append(pytest.param(spec, snippet, id=snippet.name))
    return cases


@pytest.mark.parametrize(("spec", "snippet"), _cases())
def test_readme_snippet_runs_alone(spec, snippet, tmp_path, monkeypatch) -> None:
    if spec.status != "ready":
        pytest.skip(f"{spec.slug} is {spec.status_text()}")
    if snippet.skip_reason:
        pytest.skip(f"README says: {snippet.skip_reason}")
    missing = missing_requirements(snippet)
    if missing:
        pytest.skip(f"needs {missing}")
    monkeypatch.chdir(tmp_path)  # whatever a snippet writes lands in a fresh folder
    namespace = run_snippet(snippet)
    expectation = EXPECTATIONS.get(snippet.name)
    assert expectation is None or expectation(namespace), f"{snippet.name} ran but left the wrong result"


def test_expectations_name_existing_snippets() -> None:
    names = {snippet.name for spec in METHODS for snippet in readme_snippets(spec.slug)}
    assert set(EXPECTATIONS) <= names, sorted(set(EXPECTATIONS) - names)


def test_every_method_readme_has_a_runnable_snippet() -> None:
    bare = [spec.slug for spec in METHODS if not any(not s.skip_reason for s in readme_snippets(spec.slug))]
    assert not bare, f"methods whose README shows no runnable python snippet: {bare}"


def test_directives_are_parsed_and_bad_ones_named(tmp_path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "text\n```python\nx = 1\n```\n<!-- snippet: requires cuda -->\n```python\ny = 2\n```\n"
        "<!-- snippet: skip too slow here -->\n```python\nz = 3\n```\n"
    )
    plain, cuda, skipped = readme_snippets(readme)
    assert (plain.line, plain.requires, plain.skip_reason) == (3, (), None)
    assert cuda.requires == ("cuda",) and skipped.skip_reason == "too slow here"
    assert run_snippet(plain)["x"] == 1
    with pytest.raises(ZeroDivisionError) as caught:
        run_snippet(plain, {"x = 1": "x = 1 / 0"})
    assert caught.traceback[-1].lineno + 1 == 3  # the README's own line number
    with pytest.raises(ValueError, match="does not occur"):
        run_snippet(plain, {"nope": "x"})
    readme.write_text("<!-- snippet: requires tpu -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="known requirements"):
        readme_snippets(readme)
