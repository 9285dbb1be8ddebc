import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


# The measured cost of `neurips26 list` before budgets were registry data: 40 s and 0.9 GB (19 experiments
# imported, torch among them); after: about 0.25 s on a 2-core machine, mostly the interpreter's start-up.
# 2 s leaves an 8x margin for a loaded machine, yet importing torch alone (about 2 s here) breaks it.
LIST_SECONDS = 2.0
HEAVY_MODULES = ("torch", "transformers", "numpy", "jax")
LIST_WITHOUT_HEAVY_IMPORTS = f"""
import sys
from neurips26.registry import METHODS
statuses = [spec.status for spec in METHODS]  # find_spec on every extra's modules
after_status = [m for m in {HEAVY_MODULES!r} if m in sys.modules]
from neurips26.cli import main
code = main(["list"])
print("HEAVY", after_status, [m for m in {HEAVY_MODULES!r} if m in sys.modules], code)
"""


def _python_with_these_sources() -> dict[str, str]:
    """The environment of a child interpreter that imports this checkout's ``neurips26``."""
    source = os.path.dirname(os.path.dirname(neurips26.__file__))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}


def test_list_is_instant_and_imports_no_torch() -> None:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", LIST_WITHOUT_HEAVY_IMPORTS],
        capture_output=True,
        text=True,
        check=True,
        env=_python_with_these_sources(),
    )
    seconds = time.perf_counter() - start
    assert "HEAVY [] [] 0" in out.stdout, out.stdout[-500:] + out.stderr[-2000:]
    assert "default profile: about" in out.stdout
    assert seconds < LIST_SECONDS, f"`neurips26 list` took {seconds:.2f} s"


@pytest.mark.parametrize("spec", [s for s in METHODS if s.experiment], ids=lambda s: s.slug)
def test_registry_budget_is_the_default_profile_budget(spec) -> None:
    if spec.status != "ready":
        pytest.skip(f"{spec.slug}: {spec.status_text()}")
    assert spec.default_budget_s == spec.load_experiment().profile("default").budget_s, (
        f"registry.py: set default_budget_s={spec.load_experiment().profile('default').budget_s} "
        f"on {spec.slug}'s line (its experiment's default profile budget)"
    )


def test_a_runnable_method_without_a_budget_is_refused() -> None:
    from neurips26.registry import MethodSpec

    with pytest.raises(ValueError, match="'future': default_budget_s must be > 0"):
        MethodSpec("future", "A paper", "agent", "api", "claim", experiment="mod:EXPERIMENT")


def test_every_method_ships_its_abstract() -> None:
    from importlib.resources import files

    from neurips26.papers import abstract

    shipped = {p.name[: -len(".md")] for p in files("neurips26.papers").iterdir() if p.name.endswith(".md")}
    assert shipped == set(SLUGS)
    assert all(len(abstract(slug)) > 500 for slug in SLUGS)
    with pytest.raises(KeyError, match="'nosuch'"):
        abstract("nosuch")


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
