"""Re-stamping published results after a change of the fingerprint's scope, checked against git."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from neurips26.bench.fingerprint import PACKAGE_ROOT
from neurips26.bench.rescope import _fingerprint_module_of, rescope

SLUG = "dacs"  # a method that declares conformance factories: the old rule followed them into the testers
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip


def _publish(repo: Path, package: Path) -> Path:
    """A result stamped by the rule in ``package``'s own fingerprint.py, committed."""
    rule = _fingerprint_module_of(package)
    made_by = rule.code_fingerprint(f"neurips26.methods.{SLUG}.experiment", package)
    result = repo / "results" / SLUG / "default.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps({"run_info": {"slug": SLUG, "code_fingerprint": made_by}}))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "publish")
    return result


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding a copy of the package whose fingerprint rule still follows the tests."""
    repo = tmp_path / "repo"
    package = repo / "src" / "neurips26"
    shutil.copytree(PACKAGE_ROOT, package, ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.npz"))
    rule = package / "bench" / "fingerprint.py"
    rule.write_text(rule.read_text().replace('"neurips26.testing", ', ""))  # the old, wider scope
    _git(repo, "init", "-q")
    return repo


def test_a_result_whose_counted_code_is_unchanged_is_re_stamped(repo: Path) -> None:
    package = repo / "src" / "neurips26"
    result = _publish(repo, package)
    shutil.copy(PACKAGE_ROOT / "bench" / "fingerprint.py", package / "bench" / "fingerprint.py")  # new rule
    tester = package / "testing" / "conformance" / "press.py"
    tester.write_text(tester.read_text() + "\nEDITED = True\n")  # code the method's numbers never pass
    recorded = json.loads(result.read_text())["run_info"]["code_fingerprint"]
    _git(repo, "commit", "-qam", "rescope")

    line = rescope(result, repo, root=package)

    info = json.loads(result.read_text())["run_info"]
    assert "re-stamped" in line and info["code_fingerprint"] != recorded
    assert info["fingerprint_rescoped"]["recorded"] == recorded


def test_a_result_whose_counted_code_changed_is_left_alone(repo: Path) -> None:
    package = repo / "src" / "neurips26"
    result = _publish(repo, package)
    shutil.copy(PACKAGE_ROOT / "bench" / "fingerprint.py", package / "bench" / "fingerprint.py")
    model = package / "methods" / SLUG / "experiment.py"
    model.write_text(model.read_text() + "\nEDITED = True\n")  # the method's own code moved
    before = result.read_text()

    line = rescope(result, repo, root=package)

    assert "left alone" in line and result.read_text() == before


def test_a_result_not_made_by_its_commit_is_left_alone(repo: Path) -> None:
    package = repo / "src" / "neurips26"
    result = _publish(repo, package)
    payload = json.loads(result.read_text())
    payload["run_info"]["code_fingerprint"] = "0" * 16  # made by some code no commit holds
    result.write_text(json.dumps(payload))
    _git(repo, "commit", "-qam", "foreign")

    assert "does not hold the code" in rescope(result, repo, root=package)
