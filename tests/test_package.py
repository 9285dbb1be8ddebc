import subprocess
import sys
from pathlib import Path

import neurips26
from neurips26.registry import METHODS, SLUGS, get_spec

ROOT = Path(__file__).resolve().parents[1]
METHOD_FOLDERS = sorted(p.parent.name for p in (ROOT / "src" / "neurips26" / "methods").glob("*/__init__.py"))


def test_import_does_not_pull_torch() -> None:
    code = "import sys, neurips26, neurips26.registry, neurips26.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registry_lists_every_method_folder_once() -> None:
    """No hard-coded count: the registry and the method folders name the same methods."""
    assert sorted(SLUGS) == METHOD_FOLDERS and len(set(SLUGS)) == len(SLUGS)
    assert sorted(m["slug"] for m in neurips26.list_methods()) == METHOD_FOLDERS


def test_every_registered_method_has_tests_of_its_own() -> None:
    """The shared matrices alone do not make a method tested: each slug has its own test module."""
    untested = [slug for slug in SLUGS if not list((ROOT / "tests" / "methods").glob(f"test_{slug}*.py"))]
    assert not untested, f"registered methods without tests/methods/test_<slug>*.py: {untested}"


def test_planned_methods_have_no_experiment() -> None:
    for spec in METHODS:
        assert (spec.status == "planned") == (spec.experiment is None)


def test_unknown_slug_lists_known_ones() -> None:
    try:
        get_spec("nosuch")
    except KeyError as exc:
        assert "samhybrid" in str(exc)
    else:
        raise AssertionError("expected KeyError")


def test_extras_come_from_pyproject_and_a_missing_distribution_makes_a_method_unavailable(
    monkeypatch,
) -> None:
    """One declaration of each extra (pyproject): the registry reads it, no hand-kept import table."""
    import tomllib

    from neurips26 import registry

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    requirements = registry.extra_requirements()
    assert set(requirements) == set(declared)
    assert "kvpress" in requirements["llm"] and "pyod" in requirements["ts"] and requirements["all"] == ()
    for spec in METHODS:
        assert set(spec.extras) <= set(declared), f"{spec.slug} names an extra pyproject does not declare"
    spec = get_spec("star")
    monkeypatch.setattr(registry, "installed_distributions", lambda: frozenset({"numpy"}))
    assert spec.status == "unavailable" and "pip install 'neurips26[ts]'" in spec.status_text()
    try:
        registry.missing_distributions("nosuch")
    except KeyError as exc:
        assert "unknown extra 'nosuch'" in str(exc)
    else:
        raise AssertionError("an unknown extra must be named")
