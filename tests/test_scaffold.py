"""``neurips26 new``: the skeleton imports, registers, runs its smoke profile, and its own tests fail until
the method is filled in (then they pass). Everything is written into a temporary copy of the package tree,
never into this repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import neurips26
from neurips26.scaffold import TODO, write_method

SLUG = "newmethod"
PACKAGE_SOURCE = Path(neurips26.__file__).resolve().parent
OWED = {
    "test_central_ideas_are_declared_with_a_test_that_exists",
    "test_conformance_is_declared",
    "test_claims_state_the_paper_effect_and_a_control",
    "test_nothing_is_left_to_fill_in",
    "test_the_central_idea_switched_off_fails",
    "test_with_its_novelty_off_the_method_equals_a_known_baseline",
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package tree (weights left out: the skeleton needs none) with the method generated."""
    root = tmp_path_factory.mktemp("checkout")
    ignore = shutil.ignore_patterns("__pycache__", "checkpoints", "*.pt", "*.safetensors", "*.png")
    shutil.copytree(PACKAGE_SOURCE, root / "src" / "neurips26", ignore=ignore)
    for package in ("tests", "tests/methods"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    write_method(SLUG, root)
    return root


def _python(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A child interpreter that imports the copied tree's ``neurips26``, run in the copy."""
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


def _outcomes(root: Path) -> dict[str, str]:
    """Test name -> PASSED/FAILED for the generated test file, run by pytest in the copy."""
    out = _python(root, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", f"tests/methods/{SLUG}")
    found = dict(
        (name, outcome)
        for outcome, name in re.findall(r"^(PASSED|FAILED|ERROR) \S+::(\w+)", out.stdout, flags=re.MULTILINE)
    )
    assert found, out.stdout[-3000:] + out.stderr[-3000:]
    return found


def test_new_writes_the_template_and_registers_the_method(checkout: Path) -> None:
    package = checkout / "src" / "neurips26" / "methods" / SLUG
    expected = {"__init__.py", "config.py", "core.py", "integration.py", "baselines.py", "conformance.py"}
    assert expected | {"experiment.py", "README.md"} <= {p.name for p in package.iterdir()}
    assert (checkout / "tests" / "methods" / SLUG / f"test_{SLUG}.py").is_file()
    assert (checkout / "src" / "neurips26" / "papers" / f"{SLUG}.md").is_file()
    code = (
        "from neurips26.registry import SLUGS, get_spec; import neurips26.methods.newmethod as m; "
        "e = get_spec('newmethod').load_experiment(); "
        "print(SLUGS[-1], e.slug, sorted(e.systems), m.IDEAS, m.CONFORMANCE)"
    )
    out = _python(checkout, "-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(maxsplit=2)[:2] == [SLUG, SLUG]
    listed = _python(checkout, "-m", "neurips26", "list")
    assert listed.returncode == 0 and SLUG in listed.stdout, listed.stderr


def test_the_skeleton_runs_but_its_tests_fail_until_filled_in(checkout: Path) -> None:
    outcomes = _outcomes(checkout)
    assert outcomes.pop("test_smoke_run_meets_the_contract") == "PASSED"
    assert outcomes == dict.fromkeys(OWED, "FAILED")


def _fill_in(root: Path) -> None:
    """What an author does: declare the idea, the conformance reason and the paper's effect, write the two
    owed tests and replace every marker."""
    package = root / "src" / "neurips26" / "methods" / SLUG
    test_file = root / "tests" / "methods" / SLUG / f"test_{SLUG}.py"
    node = f"tests/methods/{SLUG}/test_{SLUG}.py::test_the_central_idea_switched_off_fails"
    init = (
        (package / "__init__.py")
        .read_text()
        .replace("IDEAS: dict[str, str] = {}", f"IDEAS = {{'trim': {node!r}}}")
    )
    (package / "__init__.py").write_text(init)
    experiment = (package / "experiment.py").read_text()
    experiment = experiment.replace(
        'paper_effect=None,\n            paper_effect_source=""',
        'paper_effect=0.1,\n            paper_effect_source="abstract"',
    )
    (package / "experiment.py").write_text(experiment)
    tests = re.sub(r"pytest\.fail\([^\n]*\)", "assert 1 + 1 == 2", test_file.read_text())
    test_file.write_text(tests)
    for path in [
        *package.rglob("*.py"),
        *package.glob("*.md"),
        root / "src" / "neurips26" / "papers" / f"{SLUG}.md",
    ]:
        path.write_text(path.read_text().replace(TODO, "filled in"))


def test_filled_in_the_generated_tests_pass(checkout: Path) -> None:
    _fill_in(checkout)
    assert set(_outcomes(checkout).values()) == {"PASSED"}


@pytest.mark.parametrize(
    ("slug", "message"), [("Bad-Slug", "lowercase"), ("samhybrid", "exists"), ("class", "lowercase")]
)
def test_a_malformed_or_taken_slug_is_refused_before_anything_is_written(
    tmp_path: Path, slug: str, message: str
) -> None:
    shutil.copytree(
        PACKAGE_SOURCE / "methods" / "samhybrid",
        tmp_path / "src/neurips26/methods/samhybrid",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(PACKAGE_SOURCE / "registry.py", tmp_path / "src/neurips26/registry.py")
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match=message):
        write_method(slug, tmp_path)
    assert sorted(p for p in tmp_path.rglob("*")) == before
