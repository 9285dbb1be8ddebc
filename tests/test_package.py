import subprocess
import sys

import neurips26
from neurips26.registry import METHODS, SLUGS, get_spec

EXPECTED_SLUGS = [
    "styleroute",
    "dacs",
    "sast",
    "spectralkv",
    "sprepe",
    "sad",
    "snapmla",
    "semfas",
    "samhybrid",
    "semanticdialect",
    "poes",
    "screensearch",
    "scalebits",
    "stparopt",
    "star",
    "srlmpc",
    "spcacw",
    "solar",
    "solexecbench",
]


def test_import_does_not_pull_torch() -> None:
    code = "import sys, neurips26, neurips26.registry, neurips26.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registry_lists_all_nineteen_papers() -> None:
    assert sorted(SLUGS) == sorted(EXPECTED_SLUGS)
    assert len(neurips26.list_methods()) == 19


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


def test_missing_extra_makes_method_unavailable() -> None:
    from dataclasses import replace

    spec = replace(get_spec("samhybrid"), extras=("definitely_missing",))
    from neurips26 import registry

    registry.EXTRA_IMPORTS["definitely_missing"] = ("no_such_module_xyz",)
    try:
        assert spec.status == "unavailable"
        assert "pip install 'neurips26[definitely_missing]'" in spec.status_text()
    finally:
        del registry.EXTRA_IMPORTS["definitely_missing"]
