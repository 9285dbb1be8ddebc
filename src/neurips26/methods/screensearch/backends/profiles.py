"""App profiles: how each real GTK app is launched, cleaned and restricted for exploration (ours).

The paper explores 11 Windows apps in VMs and says nothing about per-app set-up. A profile holds what a
Linux desktop app needs so that a reset is deterministic and exploration stays inside the app:

- the launch command and arguments (``{home}`` is the fresh HOME of that reset), the Debian package, the
  app's name on the AT-SPI bus, and files seeded into the fresh HOME (a file manager needs a folder);
- volatile attributes: name rewrites applied before tokenisation (disk free space, the temporary HOME's
  path, cursor positions), on top of the generic clock/date/counter/focus filter of ``screen.py``;
- content elements: elements whose *name is the document* (a calculator's display, an editor's buffer).
  Their value is state (dedup keeps it), but a change of it alone is the ordinary effect of an action,
  so the ambiguity signal compares outcomes with it masked (see ``ambiguity.py``);
- excluded actions: labels of actions that end the process (quit, close window), open modal file or
  print dialogs that block or reach outside HOME (open, save as, print, export), or launch another
  program (help contents, open with); they are removed from the observed tree, so the graph, the policy
  and the frontier never see them. ``press``/``release`` duplicates of a ``click`` are dropped too;
- an optional typing action: editable text elements whose path matches ``type_into`` get a ``type``
  action that inserts ``type_text`` through the AT-SPI EditableText interface.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# ours: labels (normalised, full match) that end the app, block on a modal file/print dialog, or start
# another program, in every GTK app; a profile adds its own
COMMON_EXCLUDE = (
    r"quit",
    r"exit",
    r"close( window| tab| all| all windows)?",
    r"open(\.\.\.| with.*| in terminal.*| file\.\.\.|( a)? new window)?",
    r"new window",
    r"save( as.*| all| a copy.*|\.\.\.)?",
    r"export.*",
    r"import.*",
    r"print.*",
    r"page setup.*",
    r"send.*",
    r"contents|online help|report a (bug|problem).*|get help online.*|translate this application.*",
)
# ours: name rewrites common to every app (a free-space read-out changes with the disk)
COMMON_VOLATILE = ((r"free space: .*", "free space: <n>"),)


@dataclass(frozen=True)
class AppProfile:
    """Everything that makes one real GTK app explorable (see the module docstring).

    Parameters
    ----------
    name: the experiment's app name.
    command: the executable.
    package: the Debian package that installs it.
    args: arguments; ``{home}`` becomes the fresh HOME of each reset.
    bus_name: its application name on the AT-SPI bus (default: ``command``).
    files: files seeded into each fresh HOME (relative path -> text; a trailing ``/`` makes a folder).
    exclude: extra action-label regexes (full match on the normalised label) beyond ``COMMON_EXCLUDE``.
    volatile: extra ``(regex, replacement)`` rewrites of element names beyond ``COMMON_VOLATILE``.
    content: regexes (search) on an element's role path whose name is content, not structure.
    type_into: regex (search) on the role path of editable elements that get a ``type`` action.
    type_text: the text that action inserts.
    settle_s: wait after an action before reading the tree.
    """

    name: str
    command: str
    package: str
    args: tuple[str, ...] = ()
    bus_name: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    volatile: tuple[tuple[str, str], ...] = ()
    content: tuple[str, ...] = ()
    type_into: str | None = None
    type_text: str = ""
    settle_s: float = 0.15

    def __post_init__(self) -> None:
        for pattern in (*self.exclude, *self.content, *(p for p, _ in self.volatile), self.type_into or ""):
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"profile {self.name!r}: bad regex {pattern!r}: {error}") from error
        if self.type_into is not None and not self.type_text:
            raise ValueError(f"profile {self.name!r}: type_into needs a non-empty type_text")
        if self.settle_s < 0:
            raise ValueError(f"profile {self.name!r}: settle_s must be >= 0, got {self.settle_s}")

    def argv(self, home: str) -> list[str]:
        """The command line for a fresh ``home``."""
        return [self.command, *(a.replace("{home}", home) for a in self.args)]

    def editor(self, home: str) -> TreeEditor:
        """The tree rewriter of this profile for a session whose HOME is ``home``."""
        return TreeEditor(self, home)


class TreeEditor:
    """Applies a profile to a collected tree in place: names, content marks, action lists."""

    def __init__(self, profile: AppProfile, home: str) -> None:
        self.profile = profile
        self.exclude = re.compile("|".join(f"(?:{p})" for p in (*COMMON_EXCLUDE, *profile.exclude)))
        rewrites = [*COMMON_VOLATILE, *profile.volatile]
        if home:
            rewrites.insert(0, (re.escape(home.lower()), "~"))
        self.rewrites = [(re.compile(p, re.IGNORECASE), r) for p, r in rewrites]
        self.content = [re.compile(p) for p in profile.content]
        self.type_into = re.compile(profile.type_into) if profile.type_into else None

    def label(self, name: str) -> str:
        return re.sub(r"\s+", " ", name.strip().lower())

    def rename(self, name: str) -> str:
        for pattern, replacement in self.rewrites:
            name = pattern.sub(replacement, name)
        return name

    def __call__(self, node: dict[str, Any], parent: str = "") -> dict[str, Any]:
        path = f"{parent}/{node['role']}" if parent else str(node["role"])
        node["name"] = self.rename(str(node.get("name", "")))
        actions = list(node.get("actions", ()))
        if "click" in actions:  # press/release duplicate a click
            actions = [a for a in actions if a not in ("press", "release")]
        if actions and self.exclude.fullmatch(self.label(node["name"])):
            actions = []
        editable = "editable" in node.get("states", ())
        if self.type_into is not None and editable and self.type_into.search(path):
            actions.append("type")
        node["actions"] = actions
        if any(p.search(path) for p in self.content):
            node["content"] = True
        for child in node.get("children", ()):
            self(child, path)
        return node


PROFILES: dict[str, AppProfile] = {
    "galculator": AppProfile(
        name="galculator",
        command="galculator",
        package="galculator",
        # the display's value and its memory/status read-outs are the calculator's content
        content=(r"/text$",),
    ),
    "mousepad": AppProfile(
        name="mousepad",
        command="mousepad",
        package="mousepad",
        # the tab list of a session with one document; help's About has a link that starts a browser
        # (hiding the menu bar leaves only typing until the next reset)
        exclude=(r"new from template", r"open recent", r"select font\.\.\.", r"about", r"menubar"),
        # the editor's buffer is the document; a root-account warning bar names no state
        content=(r"page tab/scroll pane/text$",),
        type_into=r"page tab/scroll pane/text$",
        type_text="hello ",
    ),
    "gnumeric": AppProfile(
        name="gnumeric",
        command="gnumeric",
        package="gnumeric",
        # Tools > Goal Seek/Solver and Data > Get External Data open modal file pickers or long analyses
        exclude=(
            r"hyperlink\.\.\.",
            r"(get )?external data.*",
            r"text file.*|database.*|import data.*",
            r"solver\.\.\.|goal seek\.\.\.|simulation\.\.\.",
            r"plug-ins\.\.\.|auto ?save\.\.\.",
            r"about",
        ),
        # the formula entry holds a cell's content; the sheet's cells are not on the bus
        content=(r"tool bar/panel/filler/text$",),
        type_into=r"tool bar/panel/filler/text$",
        type_text="7",
        settle_s=0.25,
    ),
    "abiword": AppProfile(
        name="abiword",
        command="abiword",
        package="abiword",
        exclude=(
            r"hyperlink\.\.\.",
            r"file\.\.\.|picture\.\.\.|from file.*",
            r"about.*",
            r"check for updates",
            # abiword runs its dialogs modally inside the action call, which takes it off the AT-SPI bus
            # until a restart (seen on properties..., table..., save copy..., new using template..., revert,
            # new revision): every item that opens a dialog (GTK's "..." convention) is left out
            r".*\.\.\.|.*…|new revision|revert",
        ),
        settle_s=0.25,
    ),
    "pcmanfm": AppProfile(
        name="pcmanfm",
        command="pcmanfm",
        package="pcmanfm",
        args=("--no-desktop", "{home}/files"),
        files={
            "files/docs/readme.txt": "ScreenSearch fixture\n",
            "files/docs/notes.txt": "notes\n",
            "files/photos/": "",
            "files/music/": "",
            "files/todo.txt": "todo\n",
        },
        # deleting or trashing would change the seeded folder for the rest of the episode only (reset
        # reseeds it), but "open"/"run" start other programs and "terminal" a shell
        # and activating a file (a name with an extension) starts its default application
        exclude=(
            r"open in terminal.*|terminal.*|run .*|execute.*",
            r"about",
            r"eject.*|unmount.*|mount.*",
            r"[^/ ]+\.[a-z0-9]{1,5}",
        ),
        volatile=((r"\d+(\.\d+)? (bytes|kib|mib|gib|b|kb|mb|gb)", "<size>"),),
        # the location bar holds the current folder, which is the state (kept) but content-like
        content=(r"tool bar/panel/filler/text$",),
    ),
}


def get_profile(app: str) -> AppProfile:
    """The profile of ``app`` (a :class:`ValueError` naming the known apps otherwise)."""
    if app not in PROFILES:
        raise ValueError(f"app={app!r} has no profile; choose one of {sorted(PROFILES)}")
    return PROFILES[app]
