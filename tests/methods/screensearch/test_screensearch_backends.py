"""ScreenSearch's real backends (skipped without the Debian packages) and its Ray scale-out."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
from pathlib import Path

import pytest

from neurips26.methods.screensearch import (
    Explorer,
    RandomPolicy,
    ScreenSearchConfig,
    ScreenSearchPolicy,
    SyntheticGUI,
)
from neurips26.methods.screensearch.backends import BackendUnavailable

HAVE_ATSPI = (
    all(shutil.which(t) for t in ("Xvfb", "dbus-launch", "xdotool", "galculator"))
    and Path("/usr/lib/python3/dist-packages/pyatspi").exists()
)
HAVE_CHROMIUM = shutil.which("chromium") is not None and importlib.util.find_spec("playwright") is not None
APT = "apt-get install -y xvfb dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0 xdotool galculator"


@pytest.mark.skipif(not HAVE_ATSPI, reason=f"needs Xvfb, AT-SPI and galculator: {APT}")
def test_galculator_click_under_xvfb_changes_the_display_and_reset_clears_it() -> None:
    from neurips26.methods.screensearch.backends.atspi import AtspiApp

    app = AtspiApp("galculator")
    try:
        screen = app.observe()
        seven = next(a for a in screen.actions() if a.label == "7")
        after = app.act(seven)
        assert any(e.role == "text" and e.name.strip() == "7" for e in after.elements)
        fresh = app.reset()
        assert any(e.role == "text" and e.name.strip() == "0" for e in fresh.elements)
        # a crashed app is restarted by the explorer and the graph keeps what it had
        explorer = Explorer(app, RandomPolicy(), config=ScreenSearchConfig(dedup_threshold=1.0), seed=0)
        explorer.run(3)
        states = explorer.graph.num_states
        os.killpg(app._procs["app"].pid, signal.SIGKILL)
        app._procs["app"].wait()
        explorer.run(3)
        assert explorer.stats.crashes >= 1 and explorer.graph.num_states >= states
    finally:
        app.close()


@pytest.mark.skipif(not HAVE_CHROMIUM, reason="needs chromium (apt-get install -y chromium) and playwright")
def test_wizard_fixture_in_chromium_has_identical_screens_with_different_successors() -> None:
    from neurips26.methods.screensearch.backends.fixtures import wizard_fixture
    from neurips26.methods.screensearch.backends.web import WebApp

    app = WebApp(wizard_fixture(), name="web_wizard", screenshots=True)
    try:
        seen = {}
        for plan in ("basic", "pro"):
            screen = app.reset()
            screen = app.act(next(a for a in screen.actions() if a.label == plan))
            screen = app.act(next(a for a in screen.actions() if a.label == "next"))
            details = sorted((e.role, e.name) for e in screen.elements)
            screen = app.act(next(a for a in screen.actions() if a.label == "next"))
            seen[plan] = (details, [e.name for e in screen.elements if e.role == "heading"])
        assert seen["basic"][0] == seen["pro"][0]  # identical "Details" screens
        assert seen["basic"][1] == ["Summary"] and seen["pro"][1] == ["Billing"]
        explorer = Explorer(app, ScreenSearchPolicy(), seed=0)
        explorer.run(12)
        assert explorer.graph.num_states >= 3
        shot = explorer.graph.conn.execute("SELECT screenshot FROM states LIMIT 1").fetchone()[0]
        assert shot[:4] == b"\x89PNG"
    finally:
        app.close()


def test_missing_chromium_names_the_apt_command(monkeypatch) -> None:
    from neurips26.methods.screensearch.backends import web

    monkeypatch.setattr(web, "CHROMIUM_CANDIDATES", ("/nonexistent/chromium",))
    monkeypatch.setattr(web.shutil, "which", lambda name: None)
    with pytest.raises(BackendUnavailable, match="apt-get install -y chromium"):
        web.find_chromium()


def test_missing_app_names_the_apt_command() -> None:
    from neurips26.methods.screensearch.backends.atspi import check_requirements

    with pytest.raises(BackendUnavailable, match="apt-get install"):
        check_requirements("no-such-app-screensearch")


def test_one_worker_equals_the_in_process_run(tmp_path) -> None:
    from neurips26.methods.screensearch.distributed import GraphStore, explore, run_worker

    summary = explore("synthetic", "screensearch", 80, 1, str(tmp_path / "a.sqlite"), seed=3)
    direct = run_worker("synthetic", "screensearch", 80, 3, "w0")
    store = GraphStore(str(tmp_path / "b.sqlite"))
    store.ingest(direct["events"], "w0")
    assert store.counts() == {"states": summary["states"], "transitions": summary["transitions"]}
    assert summary["transitions"] == 80 == summary["actions"]


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="needs ray: pip install 'neurips26[dist]'"
)
def test_two_ray_workers_leave_a_consistent_graph(tmp_path) -> None:
    import ray

    from neurips26.methods.screensearch.distributed import explore, run_worker
    from neurips26.methods.screensearch.graph import StateGraph

    db = tmp_path / "ray.sqlite"
    try:
        summary = explore("synthetic", "screensearch", 60, 2, str(db), seed=5)
    finally:
        ray.shutdown()
    assert summary["transitions"] == summary["actions"] == 120  # counts add up
    graph = StateGraph(db)
    keys = [r[0] for r in graph.conn.execute("SELECT key FROM states")]
    assert len(keys) == len(set(keys)) == graph.num_states  # no duplicate states
    singles = [run_worker("synthetic", "screensearch", 60, 5 + i, f"w{i}", world_seed=5) for i in range(2)]
    truth = {t["screen"] for r in singles for e in r["events"] if e[0] == "screen" for t in [e[4]]}
    merged = {t["screen"] for records in graph.truth.values() for t in records}
    assert merged == truth  # the union of what both workers saw, nothing lost
    windows = {w for (w,) in graph.conn.execute("SELECT window FROM states")}
    assert windows <= {p.title for p in SyntheticGUI(seed=5).pages}  # one app: both explored world 5
