"""Shared work of an experiment is a setup stage, never a module-level cache (issue 42)."""

from pathlib import Path

import pytest

import neurips26.methods
from neurips26.testing.caches import module_caches

METHODS_DIR = Path(neurips26.methods.__file__).parent
EXPERIMENTS = sorted(METHODS_DIR.glob("*/experiment.py"))


def test_every_method_folder_is_scanned() -> None:
    folders = {p.parent for p in METHODS_DIR.glob("*/__init__.py")}
    assert EXPERIMENTS and {p.parent for p in EXPERIMENTS} == folders


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda path: path.parent.name)
def test_experiment_has_no_module_level_cache(path: Path) -> None:
    found = module_caches(path)
    assert not found, "move this shared work into Experiment(setup=...): " + "; ".join(found)


def test_the_scanner_finds_decorated_and_mutated_caches_and_spares_constants(tmp_path) -> None:
    source = tmp_path / "experiment.py"
    source.write_text(
        "import functools\n"
        "from functools import cache, lru_cache\n"
        "TABLE = {'a': 1}\n"  # a constant: never mutated
        "_RESULTS: dict[str, int] = {}\n"
        "_SEEN = []\n"
        "_PAIRS = dict()\n"
        "@functools.lru_cache(maxsize=2)\n"
        "def model(name): return name\n"
        "@cache\n"
        "def data(seed): return seed\n"
        "@lru_cache\n"
        "def other(seed): return seed\n"
        "def run(key):\n"
        "    _SEEN.append(key)\n"
        "    _PAIRS.setdefault(key, 0)\n"
        "    if key not in _RESULTS:\n"
        "        _RESULTS[key] = TABLE['a']\n"
        "    return _RESULTS[key]\n"
    )
    found = module_caches(source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "module-level _RESULTS is mutated (a cache)",
        "module-level _SEEN is mutated (a cache)",
        "module-level _PAIRS is mutated (a cache)",
        "@lru_cache on model()",
        "@cache on data()",
        "@lru_cache on other()",
    ]
