"""ScreenSearch's real-app profiles (mousepad, gnumeric, abiword, pcmanfm) and content masking.

The app smoke tests start each GTK app under its own Xvfb and AT-SPI bus and skip, naming the apt
command, when the app or the AT-SPI packages are missing; the profile and masking tests run anywhere.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from neurips26.methods.screensearch import AmbiguityEstimator, Screen, StateGraph, structural_tokens
from neurips26.methods.screensearch.backends.profiles import PROFILES, AppProfile, get_profile
from neurips26.methods.screensearch.experiment import APPS, DESKTOP_APPS
from neurips26.methods.screensearch.screen import structure_key

ATSPI_APT = "apt-get install -y xvfb dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0 xdotool"
HAVE_ATSPI = (
    all(shutil.which(t) for t in ("Xvfb", "dbus-launch", "xdotool"))
    and Path("/usr/lib/python3/dist-packages/pyatspi").exists()
)
BLOCKING = ("quit", "print...", "save as...", "save", "open...", "close window")


def needs(app: str):
    """Skip unless the AT-SPI stack and ``app`` are installed; the reason names the apt command."""
    package = PROFILES[app].package
    return pytest.mark.skipif(
        not (HAVE_ATSPI and shutil.which(PROFILES[app].command)),
        reason=f"needs {app} under Xvfb/AT-SPI: sudo {ATSPI_APT} {package}",
    )


# ---------------------------------------------------------------- profiles (no app needed)
def _node(role: str, name: str = "", actions=(), states=("enabled", "showing"), children=()) -> dict:
    return {
        "role": role,
        "name": name,
        "states": list(states),
        "extents": [0, 0, 10, 10],
        "actions": list(actions),
        "children": list(children),
    }


def test_profile_edits_the_tree_exclusions_volatile_content_and_typing() -> None:
    profile = AppProfile(
        name="demo",
        command="demo",
        package="demo",
        content=(r"scroll pane/text$",),
        type_into=r"scroll pane/text$",
        type_text="hi",
        volatile=((r"line \d+", "line <n>"),),
    )
    home = "/tmp/screensearch-home-abc123"
    tree = _node(
        "application",
        "demo",
        children=[
            _node("menu item", "Quit", ["click"]),
            _node("menu item", "Save As...", ["click"]),
            _node("menu item", "Print...", ["click"]),
            _node("menu item", "Word Wrap", ["click"]),
            _node("push button", "Home Folder", ["click", "press", "release"]),
            _node("combo box", "Size", ["press"]),
            _node("label", f"{home}/files, line 12", []),
            _node("label", "Free space: 72.8 GiB (Total: 252.0 GiB)", []),
            _node("scroll pane", children=[_node("text", "my doc", [], ("editable", "enabled", "showing"))]),
        ],
    )
    profile.editor(home)(tree)
    kids = {c["name"]: c for c in tree["children"]}
    assert kids["Quit"]["actions"] == kids["Save As..."]["actions"] == kids["Print..."]["actions"] == []
    assert kids["Word Wrap"]["actions"] == ["click"]
    assert kids["Home Folder"]["actions"] == ["click"]  # press/release duplicate the click
    assert kids["Size"]["actions"] == ["press"]  # a press without a click stays
    assert "~/files, line <n>" in kids and "free space: <n>" in kids
    text = tree["children"][-1]["children"][0]
    assert text["content"] is True and text["actions"] == ["type"]
    screen = Screen.from_tree(tree, "demo")
    assert [a.signature for a in screen.actions() if a.name == "type"] == ["text|<content>|type"]


def test_profiles_cover_the_issue_apps_and_reject_bad_input() -> None:
    assert set(DESKTOP_APPS) == set(PROFILES) and set(DESKTOP_APPS) <= set(APPS)
    for name, profile in PROFILES.items():
        assert profile.name == name and profile.package
        editor = profile.editor("/tmp/h")
        assert all(editor.exclude.fullmatch(label) for label in ("quit", "print...", "save as..."))
        assert not editor.exclude.fullmatch("help")  # the menu stays; its 'contents' item goes
    with pytest.raises(ValueError, match="app='notepad'"):
        get_profile("notepad")
    with pytest.raises(ValueError, match="bad regex"):
        AppProfile(name="x", command="x", package="x", exclude=("(",))
    with pytest.raises(ValueError, match="type_text"):
        AppProfile(name="x", command="x", package="x", type_into="text")


def test_missing_app_names_its_debian_package() -> None:
    from neurips26.methods.screensearch.backends import BackendUnavailable
    from neurips26.methods.screensearch.backends.atspi import check_requirements

    if not HAVE_ATSPI:
        pytest.skip(f"the AT-SPI check fires first here: sudo {ATSPI_APT}")
    with pytest.raises(BackendUnavailable, match="apt-get install -y some-package"):
        check_requirements("no-such-app-screensearch", "some-package")


# ---------------------------------------------------------------- content masking (ambiguity)
def _calculator(display: str) -> Screen:
    keys = [_node("push button", k, ["click"]) for k in "0123456789+-=C"]
    tree = _node("application", "calc", children=[_node("text", display), *keys])
    tree["children"][0]["content"] = True
    return Screen.from_tree(tree, "calc")


def _calculator_graph(mask_content: bool) -> tuple[StateGraph, AmbiguityEstimator, list[int]]:
    """'0' pressed on display '0' stays; on the similar display '7' it makes '70'."""
    graph = StateGraph(dedup_threshold=1.0)
    estimator = AmbiguityEstimator(graph, mask_content=mask_content)
    states = []
    for display in ("0", "7", "70"):
        screen = _calculator(display)
        state, _ = graph.add_screen(screen, structural_tokens(screen))
        estimator.set_shape(state, structure_key(screen))
        states.append(state)
    zero, seven, seventy = states
    graph.record(zero, "push button|0|click", zero, "h0")
    graph.record(seven, "push button|0|click", seventy, "h7")
    return graph, estimator, states


def test_content_only_changes_are_not_ambiguity() -> None:
    _, estimator, (zero, seven, _) = _calculator_graph(mask_content=True)
    assert estimator.outcome_class(seven, zero) == "stay"  # same structure, other display
    assert estimator.ambiguity(zero, "push button|0|click") == 0.0


def test_next_states_differing_only_in_content_are_one_outcome() -> None:
    graph = StateGraph(dedup_threshold=1.0)
    masked, unmasked = AmbiguityEstimator(graph), AmbiguityEstimator(graph, mask_content=False)
    states = {}
    for display in ("0", "7"):
        for menu in (False, True):
            screen = _calculator(display)
            if menu:  # an open menu: many new elements, so not similar to the screen it opened on
                items = [_node("menu item", f"item {i}", ["click"]) for i in range(12)]
                tree = dict(screen.tree, children=[*screen.tree["children"], *items])
                screen = Screen.from_tree(tree, "calc")
            state, _ = graph.add_screen(screen, structural_tokens(screen))
            for estimator in (masked, unmasked):
                estimator.set_shape(state, structure_key(screen))
            states[display, menu] = state
    for display in ("0", "7"):
        graph.record(states[display, False], "menu|edit|click", states[display, True], f"h{display}")
    assert masked.ambiguity(states["0", False], "menu|edit|click") == 0.0
    assert unmasked.ambiguity(states["0", False], "menu|edit|click") > 0.3  # two next-state ids


def test_idea_off_content_masking_reads_a_display_change_as_ambiguity() -> None:
    _, estimator, (zero, _, _) = _calculator_graph(mask_content=False)
    assert estimator.ambiguity(zero, "push button|0|click") > 0.3  # stay vs variant, mixed


def test_structure_key_ignores_content_only() -> None:
    assert structure_key(_calculator("0")) == structure_key(_calculator("12"))
    assert structure_key(Screen.from_tree(_node("application", "x"), "x")) is None  # no content elements
    plain = _calculator("0")
    other = Screen.from_tree(
        _node("application", "calc", children=[_node("text", "0"), _node("push button", "1", ["click"])]),
        "calc",
    )
    assert structure_key(other) is None and structure_key(plain) is not None
    assert math.isclose(len(set(structural_tokens(plain))), len(set(structural_tokens(_calculator("5")))))


# ---------------------------------------------------------------- the apps under Xvfb
def _start(app: str):
    from neurips26.methods.screensearch.backends.atspi import AtspiApp

    return AtspiApp(app, start_timeout_s=30)


def _labels(screen: Screen) -> set[str]:
    return {a.label for a in screen.actions()}


def _check_common(app, screen: Screen) -> None:
    assert screen.actions(), "no actions on the initial screen"
    assert not _labels(screen) & set(BLOCKING)
    home = app._home.name.lower()
    assert all(home not in e.name.lower() for e in screen.elements)  # the fresh HOME never leaks


def _open_menu(app, screen: Screen, label: str) -> Screen:
    return app.act(next(a for a in screen.actions() if a.role == "menu" and a.label == label))


@needs("mousepad")
def test_mousepad_types_into_its_buffer_and_excludes_file_dialogs() -> None:
    app = _start("mousepad")
    try:
        screen = app.observe()
        _check_common(app, screen)
        type_action = next(a for a in screen.actions() if a.name == "type")
        typed = app.act(type_action)
        assert next(e for e in typed.elements if e.content).name == "hello "
        assert structure_key(typed) != structure_key(screen)  # the title gains its '*' (modified)
        again = app.act(next(a for a in typed.actions() if a.signature == type_action.signature))
        assert next(e for e in again.elements if e.content).name == "hello hello "
        assert structure_key(again) == structure_key(typed)  # now only the content changed
        file_menu = _open_menu(app, typed, "file")
        assert "new" in _labels(file_menu) and not _labels(file_menu) & set(BLOCKING)
        fresh = app.reset()
        assert next(e for e in fresh.elements if e.content).name == ""
    finally:
        app.close()


@needs("gnumeric")
def test_gnumeric_opens_a_menu_and_types_into_the_entry() -> None:
    app = _start("gnumeric")
    try:
        screen = app.observe()
        _check_common(app, screen)
        menu = _open_menu(app, screen, "format")
        assert len(menu.actions()) > len(screen.actions())
        assert not _labels(menu) & set(BLOCKING)
        screen = app.reset()
        typed = app.act(next(a for a in screen.actions() if a.name == "type"))
        assert any(e.content and "7" in e.name for e in typed.elements)
    finally:
        app.close()


@needs("abiword")
def test_abiword_toggles_bold_and_keeps_file_dialogs_out() -> None:
    app = _start("abiword")
    try:
        screen = app.observe()
        _check_common(app, screen)
        bold = next(a for a in screen.actions() if a.label == "bold")
        after = app.act(bold)
        before_states = screen.elements[bold.element].states
        assert after.elements[bold.element].states != before_states  # pressed
        assert not _labels(_open_menu(app, after, "file")) & set(BLOCKING)
    finally:
        app.close()


@needs("pcmanfm")
def test_pcmanfm_browses_its_seeded_folder() -> None:
    app = _start("pcmanfm")
    try:
        screen = app.observe()
        _check_common(app, screen)
        icons = {a.label for a in screen.actions() if a.role == "icon"}
        assert icons == {"docs", "photos", "music"}  # todo.txt is shown, but opening it starts an editor
        assert any(e.role == "icon" and e.name == "todo.txt" for e in screen.elements)  # shown, inert
        docs = next(a for a in screen.actions() if a.role == "icon" and a.label == "docs")
        inside = app.act(docs)
        files = {e.name for e in inside.elements if e.role == "icon" and "layered pane" in e.path}
        assert files == {"readme.txt", "notes.txt"}
        assert any(e.content and e.name == "~/files/docs" for e in inside.elements)
        assert {a.label for a in app.reset().actions() if a.role == "icon"} == icons
    finally:
        app.close()
