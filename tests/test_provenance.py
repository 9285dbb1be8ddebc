"""Committed results are the only source of a README's numbers, and the tree keeps its shape.

- every ``results/<slug>/<profile>.json`` is a valid result of that method and profile, with its command;
- a method README's generated block equals what ``neurips26 report --readme`` makes from that file, and
  so does every derived-analysis block (``<!-- analysis:NAME:PROFILE -->``) and its committed figure;
- no import cycle inside the package; no Python file over 600 lines (one documented exception).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from neurips26.bench.experiment import Analysis
from neurips26.bench.results import read_result
from neurips26.registry import METHODS, get_spec
from neurips26.report import (
    analysis_block,
    analysis_figure_link,
    current_analysis_block,
    current_readme_block,
    readme_analyses,
    readme_block,
    refresh_analysis_blocks,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "neurips26"
RESULTS = ROOT / "results"
MAX_LINES = 600
# the official-format evaluation driver: one sandboxed subprocess's whole life, kept in one file on purpose
LONG_FILE_EXCEPTIONS = {"methods/solexecbench/driver.py"}


def _published() -> list[Path]:
    return sorted(RESULTS.glob("*/*.json")) if RESULTS.is_dir() else []


@pytest.mark.parametrize("path", _published(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_published_results_name_their_method_profile_and_command(path: Path) -> None:
    result = read_result(path)
    info = result["run_info"]
    assert info["slug"] == path.parent.name and info["profile"] == path.stem
    assert info.get("command", "").startswith("neurips26 run"), "published without its command"
    assert info["config_hash"] and result["meta_info"].get("torch")


@pytest.mark.parametrize("spec", METHODS, ids=lambda spec: spec.slug)
def test_published_default_was_run_under_the_current_config(spec) -> None:
    """A config field added or a default changed after publishing makes the committed numbers stale."""
    from neurips26.core.config import config_hash

    published = RESULTS / spec.slug / "default.json"
    if spec.status != "ready" or not published.is_file():
        pytest.skip(f"{spec.slug}: not ready or nothing published")
    experiment = spec.load_experiment()
    info = read_result(published)["run_info"]
    current = config_hash(
        experiment.config_for(experiment.profile("default"), {}, info.get("overrides") or {})
    )
    assert info["config_hash"] == current, (
        f"results/{spec.slug}/default.json was run under config {info['config_hash']}, the code now gives "
        f"{current}: rerun `neurips26 run {spec.slug} --profile default --publish`"
    )


@pytest.mark.parametrize("spec", METHODS, ids=lambda spec: spec.slug)
def test_published_default_was_made_by_the_current_code(spec) -> None:
    """A result made by older code is republished, never kept: the default's recorded code fingerprint is
    the method's current one (docstrings, comments and READMEs do not count, see bench.fingerprint)."""
    from neurips26.bench.fingerprint import code_fingerprint

    published = RESULTS / spec.slug / "default.json"
    if spec.status != "ready" or not published.is_file():
        pytest.skip(f"{spec.slug}: not ready or nothing published")
    made_by = read_result(published)["run_info"].get("code_fingerprint")
    current = code_fingerprint(spec.experiment)
    assert made_by == current, (
        f"results/{spec.slug}/default.json was made by code {made_by}, the method's code is now {current}: "
        f"rerun `neurips26 run {spec.slug} --profile default --publish` and `neurips26 report --readme "
        f"{spec.slug}`"
    )


@pytest.mark.parametrize("spec", METHODS, ids=lambda spec: spec.slug)
def test_readme_results_block_is_generated_from_the_committed_json(spec) -> None:
    readme = PACKAGE / "methods" / spec.slug / "README.md"
    published = RESULTS / spec.slug / "default.json"
    if not readme.is_file() or not published.is_file():
        pytest.skip(f"{spec.slug}: no README or no results/{spec.slug}/default.json yet")
    block = current_readme_block(readme)
    assert block is not None, f"{readme} has no results markers"
    assert block == readme_block(read_result(published)), (
        f"{readme}'s results block differs from {published}: run `neurips26 report --readme {spec.slug}`"
    )


@pytest.mark.parametrize("spec", METHODS, ids=lambda spec: spec.slug)
def test_readme_prose_states_no_verdict_the_committed_json_does_not_hold(spec) -> None:
    """Issue #43 rule 8: poes' prose said "the fixed-random control never passes" while its JSON had it pass;
    exact verdicts belong in the generated ``verdicts`` block (``<!-- analysis:verdicts:PROFILE -->``)."""
    from neurips26.report.verdicts import prose_verdict_mismatches

    readme = PACKAGE / "methods" / spec.slug / "README.md"
    results = [read_result(path) for path in sorted((RESULTS / spec.slug).glob("*.json"))]
    if not readme.is_file() or not results:
        pytest.skip(f"{spec.slug}: no README or no committed result")
    assert prose_verdict_mismatches(readme.read_text(encoding="utf-8"), results) == []


OTHER_PROFILES = sorted(p for p in RESULTS.glob("*/*.json") if p.stem != "default")


@pytest.mark.parametrize("published", OTHER_PROFILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_other_profiles_results_blocks_are_generated_from_their_json(published: Path) -> None:
    """A README that shows a full (or other) profile's results shows exactly its committed JSON."""
    readme = PACKAGE / "methods" / published.parent.name / "README.md"
    block = current_readme_block(readme, published.stem) if readme.is_file() else None
    if block is None:
        pytest.skip(f"{readme} shows no {published.stem} results block")
    assert block == readme_block(read_result(published)), (
        f"{readme}'s {published.stem} block differs from {published}: run "
        f"`neurips26 report --readme {published.parent.name} --profile {published.stem}`"
    )


def test_profile_markers_keep_blocks_apart(tmp_path: Path) -> None:
    from neurips26.report import refresh_method_readme, results_markers

    readme = tmp_path / "README.md"
    default_start, default_end = results_markers()
    full_start, full_end = results_markers("full")
    readme.write_text(f"a\n{default_start}\nold\n{default_end}\nb\n{full_start}\nold full\n{full_end}\n")
    result = read_result(sorted(RESULTS.glob("*/default.json"))[0])
    full = {**result, "run_info": {**result["run_info"], "profile": "full"}}
    assert refresh_method_readme(readme, full)
    text = readme.read_text()
    assert "old full" not in text and "\nold\n" in text  # only the full block changed
    assert current_readme_block(readme, "full") == readme_block(full)


def _analysis_blocks() -> list:
    found = []
    for readme in sorted((PACKAGE / "methods").glob("*/README.md")):
        text = readme.read_text(encoding="utf-8")
        for name, profile in re.findall(r"<!-- analysis:(\w+):([\w-]+):start -->", text):
            found.append(
                pytest.param(readme.parent.name, name, profile, id=f"{readme.parent.name}-{name}-{profile}")
            )
    return found


@pytest.mark.parametrize(("slug", "name", "profile"), _analysis_blocks())
def test_readme_analysis_blocks_are_generated_from_the_committed_json(
    slug: str, name: str, profile: str
) -> None:
    analyses = readme_analyses(get_spec(slug).load_experiment())
    assert name in analyses, f"{slug}'s README shows analysis {name!r}, which its experiment does not define"
    result = read_result(RESULTS / slug / f"{profile}.json")
    readme = PACKAGE / "methods" / slug / "README.md"
    analysis = analyses[name](result)
    link = None
    if analysis.figure is not None:
        link = analysis_figure_link(readme, ROOT / "docs" / slug, name, profile)
        assert (readme.parent / link).is_file(), f"{link} is not committed"
    assert current_analysis_block(readme, name, profile) == analysis_block(
        result, name, analysis.markdown, link
    ), (
        f"{readme}'s {name} ({profile}) block is stale: "
        f"run `neurips26 report --readme {slug} --profile {profile}`"
    )


def test_analysis_blocks_are_refreshed_with_their_figure_and_nothing_else(tmp_path: Path) -> None:
    result = read_result(sorted(RESULTS.glob("*/default.json"))[0])
    readme = tmp_path / "README.md"
    readme.write_text(
        "a\n<!-- analysis:gap:default:start -->\nold\n<!-- analysis:gap:default:end -->\n"
        "b\n<!-- analysis:gap:full:start -->\nold full\n<!-- analysis:gap:full:end -->\n"
    )
    drawn = []
    analyses = {
        "gap": lambda r: Analysis(f"cells: {len(r['cells'])}", figure=lambda path: drawn.append(path)),
        "absent": lambda r: pytest.fail("an analysis without markers must not be computed"),
    }
    assert refresh_analysis_blocks(readme, result, analyses, tmp_path / "figs") == ["gap"]
    text = readme.read_text()
    assert "old full" in text and "\nold\n" not in text
    assert f"cells: {len(result['cells'])}" in text
    assert drawn == [tmp_path / "figs" / "gap_default.png"]
    assert "](figs/gap_default.png)" in text


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """Modules of the package this file imports at module level (lazy imports inside functions are a
    deliberate way to keep `import neurips26` light and are not edges of the import graph)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from .x import y: resolve against the importing package
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], base]).strip(".")
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {module for module in found if module.startswith("neurips26")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == 1:
                return [*path[path.index(child) :], child]
            if child not in state and (cycle := visit(child)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def _related(a: str, b: str) -> bool:
    """A package and its own submodule (``pkg/__init__`` re-exporting ``pkg.mod``) are not a cycle."""
    return a.startswith(b + ".") or b.startswith(a + ".")


def test_the_package_has_no_import_cycle() -> None:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {
        name: {m for m in _imports(path, name) if m in files and m != name and not _related(m, name)}
        for name, path in files.items()
    }
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_python_file_is_over_600_lines() -> None:
    long = {
        path.relative_to(PACKAGE).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert set(long) <= LONG_FILE_EXCEPTIONS, f"split these files (> {MAX_LINES} lines): {long}"


def test_run_outputs_live_in_results_not_in_the_package() -> None:
    """Results JSON and figures of runs belong in ``results/<slug>/``; the package ships code and data."""
    methods = ROOT / "src" / "neurips26" / "methods"
    stray = sorted(str(p.relative_to(ROOT)) for p in methods.glob("*/results/**/*") if p.is_file())
    assert not stray, f"run outputs inside the package: {stray}; move them to results/<slug>/"
