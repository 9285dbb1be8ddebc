"""One place per method (issue 42, item 6): the layout stays as ``src/neurips26/methods/README.md`` draws it.

- a module under ``data/`` or ``zoo/`` serves two methods or more (or none: a tool such as ``zoo.cli``);
  one that only one method reaches belongs in that method's folder;
- every registered method has its own ``tests/methods/<slug>/`` with at least one test file, and a test
  file or benchmark named after one method lives in that method's folder, not beside the shared ones.

The imports are found by the fingerprint's static scan (imports anywhere in a file and module names written
as strings, followed transitively), the same reach that decides which files a method's results depend on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neurips26.bench.fingerprint import PACKAGE_ROOT, imported_modules
from neurips26.registry import SLUGS

ROOT = Path(__file__).resolve().parents[1]
SHARED_PACKAGES = ("data", "zoo")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.fixture(scope="module")
def reached() -> dict[str, set[str]]:
    return _methods_reaching()


def _methods_reaching() -> dict[str, set[str]]:
    """Shared module name -> the registered methods whose code imports it (directly or through others)."""
    reached: dict[str, set[str]] = {}
    for slug in SLUGS:
        roots = [_module_name(p) for p in sorted((PACKAGE_ROOT / "methods" / slug).rglob("*.py"))]
        for module in imported_modules(roots):
            reached.setdefault(module, set()).add(slug)
    return reached


def test_no_shared_module_serves_only_one_method(reached: dict[str, set[str]]) -> None:
    single = {
        _module_name(path): sorted(reached[_module_name(path)])
        for package in SHARED_PACKAGES
        for path in sorted((PACKAGE_ROOT / package).glob("*.py"))
        if len(reached.get(_module_name(path), ())) == 1
    }
    assert not single, (
        f"these shared modules serve one method only; move each into src/neurips26/methods/<slug>/: {single}"
    )


def test_the_scan_sees_a_shared_module_reached_by_several_methods(reached: dict[str, set[str]]) -> None:
    """Guards the test above against a scan that finds nothing (then no module would ever look single)."""
    assert len(reached.get("neurips26.zoo.builders", ())) >= 2


@pytest.mark.parametrize("slug", SLUGS)
def test_every_registered_method_has_a_test_folder_of_its_own(slug: str) -> None:
    folder = ROOT / "tests" / "methods" / slug
    assert list(folder.glob("test_*.py")), f"method {slug!r} has no tests/methods/{slug}/test_*.py"
    assert (folder / "__init__.py").is_file(), (
        f"tests/methods/{slug}/ needs an __init__.py: test files of different methods may share a basename"
    )


def _named_after_one_method(stem: str) -> str | None:
    """The longest registered slug that ``stem`` (``test_x_y``, ``bench_x``, ``x_probe``) is named after."""
    words = stem.split("_")
    matches = [slug for slug in SLUGS if slug in words or stem.startswith(f"{slug}_")]
    return max(matches, key=len) if matches else None


def test_files_named_after_a_method_live_in_its_folder() -> None:
    """Test files and benchmarks; the shared test helpers (``tests/methods/<slug>_helpers.py``) stay put."""
    misplaced = [
        str(path.relative_to(ROOT))
        for folder, pattern in ((ROOT / "tests" / "methods", "test_*.py"), (ROOT / "benchmarks", "*.py"))
        for path in sorted(folder.glob(pattern))
        if _named_after_one_method(path.stem)
    ]
    assert not misplaced, (
        f"move these into their method's folder (tests/methods/<slug>/, benchmarks/<slug>/): {misplaced}"
    )
