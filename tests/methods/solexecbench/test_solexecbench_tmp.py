"""SOL-ExecBench's private /tmp (issue #41): each evaluation gets an empty tmpfs on /tmp, yet an interpreter
(a virtualenv), site-packages and a problem folder living under /tmp stay readable. Both paths run here:
the mount namespace (skipped, with the kernel's reason, only where it refuses one) and the fallback, each
forced with the ``NEURIPS26_SOLEXECBENCH_TMP`` switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from pathlib import Path

import pytest
import torch

from neurips26.methods.solexecbench import Sandbox, SolExecBench, SolExecBenchConfig, load_problem
from neurips26.methods.solexecbench.config import PRIVATE_TMP_SWITCH, private_tmp_policy
from neurips26.methods.solexecbench.problem_set import build_problems
from neurips26.methods.solexecbench.solutions import make_solution
from tests.methods.solexecbench_helpers import FAST as FAST_SETTINGS

# the probe reads a file by path, which the static check would not judge
FAST = {**FAST_SETTINGS, "timeout_s": 60.0, "static_check": False}
PROBE = "seb_tmp_probe"
# an honest rmsnorm that needs a module importable only from the virtualenv under /tmp (imported lazily:
# the fork server has not imported it), and leaves a file in /tmp (private: gone after the evaluation)
SOLUTION = """import os
import tempfile

import torch


def run(x, norm_weight, eps, y):
    import PROBE

    with open(os.path.join(tempfile.gettempdir(), "seb-tmp-TOKEN"), "w") as handle:
        handle.write(PROBE.WORD)
    torch.mul(x, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), out=y)
    y.mul_(norm_weight)
"""


@pytest.fixture(scope="module")
def tmp_root():
    """A folder under /tmp itself (not wherever pytest's basetemp lives): what the namespace hides."""
    folder = Path(tempfile.mkdtemp(prefix="seb-tmp-test-", dir="/tmp"))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.fixture(scope="module")
def venv_python(tmp_root) -> str:
    """A virtualenv under /tmp whose site-packages holds the probe module and a ``.pth`` to this
    interpreter's packages (torch): the layout of a clone with its venv under /tmp."""
    venv = tmp_root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / f"{PROBE}.py").write_text("WORD = 'from-the-venv'\n")
    (Path(site) / "host-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(python)


def _stored_problem(root: Path):
    """rmsnorm with its inputs stored in a safetensors file of a problem folder under /tmp."""
    from safetensors.torch import save_file

    definition, _ = build_problems()["rmsnorm"]
    folder = root / f"rmsnorm_stored_{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    tensors = {"x": torch.full((4, 1024), 2.0), "norm_weight": torch.full((1024,), 3.0)}
    save_file(tensors, str(folder / "in.st"))
    (folder / "definition.json").write_text(json.dumps(definition))
    stored = {"type": "safetensors", "path": "in.st"}
    workload = {
        "uuid": "stored-0",
        "axes": {"tokens": 4},
        "inputs": {
            "x": {**stored, "tensor_key": "x"},
            "norm_weight": {**stored, "tensor_key": "norm_weight"},
            "eps": {"type": "scalar", "value": 1e-6},
        },
        "tolerance": {"max_atol": 1e-4, "max_rtol": 1e-4},
    }
    (folder / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    return load_problem(folder)


def test_the_switch_forces_a_policy_and_names_bad_values():
    assert private_tmp_policy(True, {}) == "auto" and private_tmp_policy(False, {}) == "fallback"
    assert private_tmp_policy(False, {PRIVATE_TMP_SWITCH: "namespace"}) == "namespace"
    assert private_tmp_policy(True, {PRIVATE_TMP_SWITCH: "fallback"}) == "fallback"
    assert private_tmp_policy(False, {PRIVATE_TMP_SWITCH: "auto"}) == "fallback"  # auto: the config decides
    with pytest.raises(ValueError, match=PRIVATE_TMP_SWITCH):
        private_tmp_policy(True, {PRIVATE_TMP_SWITCH: "tmpfs"})


@pytest.mark.parametrize("policy", ["namespace", "fallback"])
def test_venv_and_problem_under_tmp_stay_visible(policy, tmp_root, venv_python, monkeypatch):
    monkeypatch.setenv(PRIVATE_TMP_SWITCH, policy)
    token = uuid.uuid4().hex
    solution = make_solution("rmsnorm", "probe", SOLUTION.replace("PROBE", PROBE).replace("TOKEN", token))
    problem = _stored_problem(tmp_root)
    with (
        Sandbox(threads=1, python=venv_python) as box,
        SolExecBench(SolExecBenchConfig(**FAST), sandbox=box) as bench,
    ):
        result = bench.evaluate(problem, solution)
    evaluation = result.traces[0].evaluation
    if policy == "namespace" and "private /tmp was required" in evaluation.log:
        pytest.skip(f"the kernel refuses a mount namespace here: {evaluation.log[-300:]}")
    sandbox = evaluation.sandbox
    assert sandbox["tmp_policy"] == policy
    left = Path(f"/tmp/seb-tmp-{token}")
    if policy == "namespace":
        assert result.statuses == ["PASSED"], evaluation.log
        assert sandbox["tmp"] == "private-tmpfs"
        # the venv (its prefix covers site-packages) was bound back read-only: nothing else of /tmp was
        venv = str(Path(venv_python).parents[1])
        assert any(venv == path or venv.startswith(path + "/") for path in sandbox["tmp_bound_read_only"])
        assert not left.exists()  # written to the private tmpfs, gone with it
    else:  # the host's /tmp was visible: TMPDIR pointed into the staging dir, so /tmp stays clean
        assert result.statuses == ["PASSED"], evaluation.log
        assert sandbox["tmp"] == "staging-tmpdir+scan" and sandbox["tmp_refused"] == "switched off"
        assert not left.exists()


def test_namespace_policy_reports_a_refusal_instead_of_falling_back(tmp_path):
    """Forced ``namespace`` on a kernel that refuses: RUNTIME_ERROR naming the refusal, never the fallback."""
    child = """
import json, sys
from neurips26.methods.solexecbench import driver
driver._unshare = lambda flags: "Operation not permitted (simulated)"
try:
    driver._isolate({"max_processes": 8, "private_tmp": "namespace", "sandbox_uid": -1}, sys.argv[1])
    print(json.dumps({"raised": None}))
except driver.PrivateTmpRefused as error:
    print(json.dumps({"raised": str(error)}))
"""
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True
    )
    raised = json.loads(done.stdout.strip().splitlines()[-1])["raised"]
    assert raised and "private_tmp='namespace'" in raised and "simulated" in raised


def test_whats_needed_under_tmp_is_listed_once(monkeypatch, tmp_root):
    from neurips26.methods.solexecbench import driver

    inner = tmp_root / "env" / "lib" / "site"
    inner.mkdir(parents=True, exist_ok=True)
    link = tmp_root / "env-link"
    if not link.exists():
        link.symlink_to(tmp_root / "env")
    missing = "/tmp/missing-" + os.urandom(4).hex()
    monkeypatch.setattr(sys, "path", [str(inner), str(link / "lib"), "/usr/lib", missing])
    monkeypatch.setattr(sys, "prefix", str(tmp_root / "env"))
    needed = driver._paths_the_evaluation_needs()
    assert str(tmp_root / "env") in needed and str(inner) not in needed  # nested: covered by the prefix
    assert str(link / "lib") in needed  # the path as named, beside its resolved form
    assert not any(p.startswith("/usr/") for p in needed)  # only what a tmpfs would hide
