"""A method's code fingerprint sees its own code, weights and the shared modules it imports, nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from neurips26.bench import fingerprint, runner
from neurips26.bench.fingerprint import CELL_MODULES, PACKAGE_ROOT, code_fingerprint, fingerprint_files
from neurips26.bench.runner import run_experiment
from neurips26.registry import METHODS
from neurips26.testing.toy_experiment import TOY_EXPERIMENT

A, B = "neurips26.methods.a.experiment:EXPERIMENT", "neurips26.methods.b.experiment:EXPERIMENT"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A miniature package: method a imports a shared module lazily, b imports nothing shared."""
    root = tmp_path / "neurips26"
    _write(root / "__init__.py", "def methods():\n    from neurips26.registry import METHODS\n")
    _write(root / "registry.py", f"REFS = [{A!r}, {B!r}]\n")  # names every method: must not count
    for package_dir in ("methods", "methods/a", "methods/b", "shared", "core", "bench"):
        _write(root / package_dir / "__init__.py", "")
    _write(root / "core/seeding.py", "SEED = 0\n")
    _write(root / "bench/numeric.py", "THREADS = 1\n")
    _write(root / "methods/a/experiment.py", "def run():\n    from neurips26.shared import util\n")
    _write(root / "methods/a/README.md", "# a\n")
    _write(root / "methods/a/figures/curve.png", "png")
    (root / "methods/a/weights").mkdir()
    (root / "methods/a/weights/model.pt").write_bytes(b"\x00weights")
    _write(root / "methods/b/experiment.py", "from .model import Model\n")
    _write(root / "methods/b/model.py", "class Model:\n    pass\n")
    _write(root / "methods/b/README.md", "# b\n")
    _write(root / "shared/util.py", "from . import helper\n")
    _write(root / "shared/helper.py", "X = 1\n")
    _write(root / "shared/other.py", "Y = 1\n")
    _write(root / "shared/tables/table.json", "{}")
    return root


def _prints(root: Path) -> tuple[str, str]:
    return code_fingerprint(A, root), code_fingerprint(B, root)


def _append(path: Path, text: str = "\n") -> None:
    path.write_text(path.read_text() + text)


def test_fingerprint_lists_the_method_folder_and_its_transitive_shared_imports(package: Path) -> None:
    files = {p.relative_to(package).as_posix() for p in fingerprint_files(A, package)}
    assert files == {
        "__init__.py",
        "methods/__init__.py",
        "methods/a/__init__.py",
        "methods/a/experiment.py",
        "methods/a/weights/model.pt",
        "shared/__init__.py",
        "shared/util.py",
        "shared/helper.py",  # imported by util (relative import)
        "shared/tables/table.json",  # data beside a shared module
        "core/__init__.py",
        "core/seeding.py",
        "bench/__init__.py",
        "bench/numeric.py",
    }


@pytest.mark.parametrize(
    ("edited", "a_changes", "b_changes"),
    [
        ("methods/a/README.md", False, False),  # what `neurips26 report --readme` does
        ("methods/a/figures/curve.png", False, False),
        ("methods/a/experiment.py", True, False),
        ("methods/a/weights/model.pt", True, False),
        ("methods/b/model.py", False, True),
        ("shared/helper.py", True, False),  # imported by what a imports
        ("shared/other.py", False, False),  # imported by nobody
        ("registry.py", False, False),  # only the package root's functions import it
        ("core/seeding.py", True, True),  # every cell's seeding
    ],
)
def test_an_edit_invalidates_exactly_the_methods_that_depend_on_it(
    package: Path, edited: str, a_changes: bool, b_changes: bool
) -> None:
    before = _prints(package)
    # a statement for sources (a comment would not count: see the docstring test), bytes for other files
    _append(package / edited, "EDITED = 1\n" if edited.endswith(".py") else "# edited\n")
    after = _prints(package)
    assert (after[0] != before[0], after[1] != before[1]) == (a_changes, b_changes)


def test_byte_code_caches_are_not_code(package: Path) -> None:
    before = _prints(package)
    _write(package / "methods/a/__pycache__/experiment.cpython-311.pyc", "compiled")
    assert _prints(package) == before


def test_resume_after_a_readme_edit_recomputes_nothing_and_other_methods_keep_their_cells(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end through the runner: two 'methods' (the toy under two refs) in a miniature package."""
    monkeypatch.setattr(runner, "code_fingerprint", lambda ref: fingerprint.code_fingerprint(ref, package))

    def run(ref: str) -> dict:
        return run_experiment(TOY_EXPERIMENT, ref, tmp_path / "runs" / ref.split(".")[2], profile="smoke")

    assert run(A)["run_info"]["resumed_cells"] == run(B)["run_info"]["resumed_cells"] == 0
    _append(package / "methods/a/README.md", "\nresults block refreshed\n")
    assert run(A)["run_info"]["resumed_cells"] == run(B)["run_info"]["resumed_cells"] == 20
    _append(package / "methods/a/experiment.py", "CHANGED_ALGORITHM = True\n")
    assert run(B)["run_info"]["resumed_cells"] == 20  # editing a never invalidates b
    assert run(A)["run_info"]["resumed_cells"] == 0  # but it invalidates a's own cells


def test_the_harness_modules_every_cell_uses_exist() -> None:
    for name in CELL_MODULES:
        assert fingerprint.module_file(name) is not None, f"CELL_MODULES names a missing module {name}"


def _copy_of_the_package(tmp_path: Path) -> Path:
    """The real package's sources and small data files (large weights are left out: same in both prints)."""
    target = tmp_path / "neurips26"

    def large_or_cache(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n == "__pycache__" or (Path(folder, n).is_file() and Path(folder, n).stat().st_size > 2**20)
        ]

    shutil.copytree(PACKAGE_ROOT, target, ignore=large_or_cache)
    return target


def test_on_the_real_package_readme_edits_keep_every_method_and_a_source_edit_moves_only_its_method(
    tmp_path: Path,
) -> None:
    ready = [spec for spec in METHODS if spec.experiment]
    assert ready, "no registered method has an experiment"
    root = _copy_of_the_package(tmp_path)
    before = {spec.slug: code_fingerprint(spec.experiment, root) for spec in ready}
    for readme in (root / "methods").glob("*/README.md"):
        _append(readme, "\n<!-- refreshed -->\n")
    edited = ready[0].slug
    _append(root / "methods" / edited / "experiment.py", "EDITED = True\n")
    after = {spec.slug: code_fingerprint(spec.experiment, root) for spec in ready}
    assert [slug for slug in before if before[slug] != after[slug]] == [edited]
    for spec in ready:
        listed = fingerprint_files(spec.experiment, root)
        assert not [p for p in listed if p.suffix in (".md", ".png")], f"{spec.slug}: docs in its fingerprint"


def test_docstrings_comments_and_layout_do_not_count_but_code_does(package: Path) -> None:
    source = package / "methods/b/model.py"
    before = code_fingerprint(B, package)
    source.write_text('"""A model."""\n\n\nclass Model:  # why\n    """Docs."""\n\n    pass\n')
    assert code_fingerprint(B, package) == before
    source.write_text("class Model:\n    size = 2\n")
    assert code_fingerprint(B, package) != before


def test_no_method_reaches_another_methods_code_but_through_a_declared_dependency() -> None:
    depends_on = {"solexecbench": {"solar"}}  # solexecbench's SOL floor is solar's bound
    for spec in (spec for spec in METHODS if spec.experiment):
        reached = {
            path.relative_to(PACKAGE_ROOT / "methods").parts[0]
            for path in fingerprint_files(spec.experiment)
            if path.is_relative_to(PACKAGE_ROOT / "methods") and path.parent != PACKAGE_ROOT / "methods"
        }
        assert reached - {spec.slug} <= depends_on.get(spec.slug, set()), f"{spec.slug} reaches {reached}"


def test_only_conformance_factories_import_the_test_support() -> None:
    """What lets the fingerprint skip ``neurips26.testing``: no experiment computes through it."""
    offenders = []
    for source in (PACKAGE_ROOT / "methods").rglob("*.py"):
        imported = fingerprint._imported_names(source, PACKAGE_ROOT)
        if source.name != "conformance.py" and any(name.startswith("neurips26.testing") for name in imported):
            offenders.append(source.relative_to(PACKAGE_ROOT).as_posix())
    assert not offenders, f"method code importing neurips26.testing: {offenders}"
