"""Third-party noise is silenced at its source (``neurips26.core.noise``); our own heartbeat still prints.

Each check runs a child interpreter with stderr on a pipe, as a log or CI sees it (no terminal).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import neurips26
from neurips26.core.noise import KNOWN_NOISE, silence_third_party_noise

# what each noise source printed before the filters (torchao 0.18, torch 2.13, diffusers 0.42, transformers 5)
NOISE_MARKERS = (
    "torchao/_C_",  # "Failed to load .../torchao/_C_mxfp8...so"
    "is an Enum subclass and is now natively supported",
    "Unable to import `torchao` Tensor objects",
    "Loading weights",
)
SOURCE = str(Path(neurips26.__file__).parents[1])
TINY_LLAMA = Path(neurips26.__file__).parent / "zoo" / "checkpoints" / "tiny-llama"
SEPARATOR = "--- neurips26 imported ---"
# Transformers loads that bypass zoo.load (which switches its own bar off): the first, before neurips26 is
# imported, is the control (it imports torchao on the way); the second, after, must print nothing.
LOAD_BEFORE_AND_AFTER = f"""
import sys
from transformers import AutoModelForCausalLM
AutoModelForCausalLM.from_pretrained(sys.argv[1])
print("IMPORTED", "torchao" in sys.modules)
print({SEPARATOR!r}, file=sys.stderr, flush=True)
import neurips26
AutoModelForCausalLM.from_pretrained(sys.argv[1])
"""


def _child(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``code``; stdout and stderr as the bytes a log file gets (text mode would turn \r into \n)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "CI")}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        check=True,
        cwd=cwd,
        env={**env, "PYTHONPATH": SOURCE, "OMP_NUM_THREADS": "1"},
    )
    done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
    return done


def _lines(text: str) -> list[str]:
    return text.split("\n")  # a progress bar redraws with \r: in a log file it is one line


def _noise(text: str) -> list[str]:
    return [line[:200] for line in _lines(text) if any(m in line for m in NOISE_MARKERS)]


def test_importing_neurips26_switches_off_a_loaded_transformers_bar() -> None:
    pytest.importorskip("transformers")
    done = _child(LOAD_BEFORE_AND_AFTER, str(TINY_LLAMA))
    before, after = done.stderr.split(SEPARATOR)
    assert "Loading weights" in before  # the control: without neurips26, a log gets the bar,
    assert max(len(line) for line in _lines(before)) > 1000  # as one long line
    if "IMPORTED True" in done.stdout:  # and torchao's import noise
        assert "torchao/_C_" in before or "Enum subclass" in before
    assert after.strip() == ""


def test_a_smoke_run_logs_no_third_party_noise_and_keeps_its_heartbeat(tmp_path) -> None:
    """styleroute's smoke run imports transformers, torchao and diffusers (every source above)."""
    pytest.importorskip("diffusers")
    run = f"""
import sys
import neurips26.cli as cli
cli.HEARTBEAT_S = 1.0  # a heartbeat line within the short smoke run
code = cli.main(["run", "styleroute", "--profile", "smoke", "--seeds", "1", "--jobs", "1", "--device", "cpu",
                 "--out", {str(tmp_path)!r}])
print("IMPORTED", sorted(m for m in ("torchao", "transformers", "diffusers") if m in sys.modules), code)
"""
    done = _child(run, cwd=tmp_path)
    assert "IMPORTED ['diffusers', 'torchao', 'transformers'] 0" in done.stdout, done.stderr[-2000:]
    assert _noise(done.stderr) == [] and _noise(done.stdout) == []
    assert "styleroute: 0/" in done.stdout and "cells, elapsed" in done.stdout  # our own heartbeat
    assert max(len(line) for line in _lines(done.stdout + done.stderr)) < 300


def test_only_the_known_messages_are_dropped(caplog) -> None:
    silence_third_party_noise()
    silence_third_party_noise()  # idempotent: one filter per logger
    for name in KNOWN_NOISE:  # a library may add filters of its own (diffusers does, once imported)
        ours = [f for f in logging.getLogger(name).filters if type(f).__module__ == "neurips26.core.noise"]
        assert len(ours) == 1, name
    torchao = logging.getLogger("torchao")
    with caplog.at_level(logging.WARNING, logger="torchao"):
        torchao.warning("Failed to load /x/_C_mxfp8.so: no CUDA")
        torchao.warning("Skipping import of cpp extensions due to incompatible torch version.")
    assert [r.getMessage() for r in caplog.records] == [
        "Skipping import of cpp extensions due to incompatible torch version."
    ]


def test_a_users_progress_bar_setting_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    silence_third_party_noise(progress_bars=False)
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
    silence_third_party_noise(progress_bars=True)  # a terminal: bars stay
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
