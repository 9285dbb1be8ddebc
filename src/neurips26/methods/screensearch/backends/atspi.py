"""AtspiApp: a GTK desktop app under Xvfb, read and driven through AT-SPI (the Linux analogue of UIA).

Each instance owns its display (Xvfb), a private D-Bus session bus, the AT-SPI bus launcher and the app,
started with ``GTK_MODULES=gail:atk-bridge`` and a fresh ``HOME`` (so a reset is a deterministic restart).
Trees are read by :mod:`.atspi_collector` under Debian's system ``python3`` (``python3-pyatspi`` exists only
there), JSON over its stdout. Actions go through the AT-SPI Action interface; a node without one is
clicked at its centre with ``xdotool``. A dead app raises :class:`BackendCrashed`; the explorer restarts it.

Each app has a profile (:mod:`.profiles`): launch command, files seeded into the fresh HOME, volatile name
rewrites, content elements, excluded actions and an optional typing action; the profile edits every
collected tree before it becomes a :class:`Screen`.

Set-up (Debian 12): ``apt-get install xvfb dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0 xdotool``
plus the app (``galculator``, ``mousepad``, ``gnumeric``, ``abiword``, ``pcmanfm``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from neurips26.methods.screensearch.backends import BackendCrashed, BackendUnavailable
from neurips26.methods.screensearch.backends.profiles import PROFILES, AppProfile
from neurips26.methods.screensearch.screen import Action, Screen

log = logging.getLogger(__name__)

SYSTEM_PYTHON = "/usr/bin/python3"
BUS_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
APT_PACKAGES = "xvfb dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0 xdotool"
COLLECTOR = Path(__file__).with_name("atspi_collector.py")


def check_requirements(command: str, package: str | None = None) -> None:
    """Raise :class:`BackendUnavailable` naming the apt command when anything is missing."""
    missing = [tool for tool in ("Xvfb", "dbus-launch", "xdotool") if shutil.which(tool) is None]
    if not Path(BUS_LAUNCHER).exists():
        missing.append("at-spi-bus-launcher")
    probe = (
        subprocess.run([SYSTEM_PYTHON, "-c", "import pyatspi"], capture_output=True)
        if Path(SYSTEM_PYTHON).exists()
        else None
    )
    if probe is None or probe.returncode != 0:
        missing.append("python3-pyatspi")
    if missing:
        raise BackendUnavailable(f"AtspiApp needs {missing}: sudo apt-get install -y {APT_PACKAGES}")
    if shutil.which(command) is None:
        raise BackendUnavailable(
            f"app {command!r} is not installed: sudo apt-get install -y {package or command}"
        )


def _free_display() -> int:
    for number in range(90, 190):
        if not Path(f"/tmp/.X{number}-lock").exists() and not Path(f"/tmp/.X11-unix/X{number}").exists():
            return number
    raise BackendUnavailable("no free X display number in :90-:189")


class AtspiApp:
    """A GTK app behind the backend protocol.

    Parameters
    ----------
    command: the app's executable (``galculator``) or a profile name; its profile in :data:`PROFILES` is
        used unless ``args`` or ``profile`` are given.
    args: extra arguments (a bare profile: no exclusions beyond the common ones).
    app_name: its name on the AT-SPI bus (default: the profile's, else the command).
    settle_s: wait after an action before reading the tree (default: the profile's, 0.15 s; the tree is
        re-read until two reads agree, at most 3 times).
    start_timeout_s: how long to wait for the app to appear on the bus.
    profile: an explicit :class:`AppProfile`.
    """

    def __init__(
        self,
        command: str = "galculator",
        args: Sequence[str] = (),
        app_name: str | None = None,
        settle_s: float | None = None,
        start_timeout_s: float = 15.0,
        profile: AppProfile | None = None,
    ) -> None:
        if profile is None:
            profile = PROFILES.get(command) if not args else None
            profile = profile or AppProfile(name=command, command=command, package=command, args=tuple(args))
        check_requirements(profile.command, profile.package)
        self.profile = profile
        self.command, self.args = profile.command, profile.args
        self.name = profile.name
        self.bus_name = app_name or profile.bus_name or profile.command
        self.settle_s = profile.settle_s if settle_s is None else settle_s
        self.start_timeout_s = start_timeout_s
        self._procs: dict[str, subprocess.Popen] = {}
        self._home: tempfile.TemporaryDirectory | None = None
        self._ids: list[list[int]] = []
        self._screen: Screen | None = None
        self.display = _free_display()
        self.env = self._start_session()
        try:
            self._start_app()
        except BackendCrashed as error:  # seen once in ~10 starts of abiword under load: start again, once
            log.warning("%s crashed at start (%s); starting it again", self.command, error)
            self._stop("app")
            try:
                self._start_app()
            except Exception:
                self.close()  # no display, bus or collector left behind
                raise

    # ------------------------------------------------------------------ processes
    def _spawn(self, key: str, argv: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=env, start_new_session=True, **kw)
        self._procs[key] = proc
        return proc

    def _start_session(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "AT_SPI", "GTK_"))}
        env["DISPLAY"] = f":{self.display}"
        self._spawn(
            "xvfb",
            ["Xvfb", f":{self.display}", "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-noreset"],
            env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        # the socket appears before Xvfb accepts clients (abiword then exits with "No DISPLAY")
        while (
            not Path(f"/tmp/.X11-unix/X{self.display}").exists()
            or subprocess.run(["xdotool", "getdisplaygeometry"], env=env, capture_output=True).returncode
        ):
            if time.monotonic() > deadline:
                raise BackendUnavailable(f"Xvfb did not start on :{self.display}")
            time.sleep(0.05)
        out = subprocess.run(["dbus-launch", "--sh-syntax"], env=env, capture_output=True, text=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition("=")
            if key in ("DBUS_SESSION_BUS_ADDRESS", "DBUS_SESSION_BUS_PID"):
                env[key] = value.rstrip(";").strip("'")
        if "DBUS_SESSION_BUS_ADDRESS" not in env:
            raise BackendUnavailable("dbus-launch gave no session bus: sudo apt-get install -y dbus-x11")
        self._bus_pid = int(env.get("DBUS_SESSION_BUS_PID", "0"))
        self._spawn(
            "atspi",
            [BUS_LAUNCHER, "--launch-immediately"],
            env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        env["GTK_MODULES"] = "gail:atk-bridge"
        env["NO_AT_BRIDGE"] = "0"
        env["GDK_BACKEND"] = "x11"
        time.sleep(0.3)
        return env

    def _start_app(self) -> None:
        if self._home is not None:
            self._home.cleanup()
        self._home = tempfile.TemporaryDirectory(prefix="screensearch-home-")
        home = self._home.name
        for relative, text in self.profile.files.items():
            target = Path(home, relative)
            if relative.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
        self._editor = self.profile.editor(home)
        env = {
            **self.env,
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_DATA_HOME": f"{home}/.local/share",
            "XDG_CACHE_HOME": f"{home}/.cache",
        }
        self._log = Path(home, ".screensearch-app.log")  # the app's stderr, quoted when it dies
        with self._log.open("w") as log:
            self._spawn("app", self.profile.argv(home), env, stdout=subprocess.DEVNULL, stderr=log)
        if "collector" not in self._procs or self._procs["collector"].poll() is not None:
            self._spawn(
                "collector",
                [SYSTEM_PYTHON, str(COLLECTOR)],
                self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            reply = self._ask({"cmd": "tree", "app": self.bus_name})
            if reply.get("ok") and reply["tree"].get("children"):
                return
            if self._procs["app"].poll() is not None:
                raise BackendCrashed(
                    f"{self.command} exited with {self._procs['app'].returncode} at start: {self._stderr()}"
                )
            if time.monotonic() > deadline:
                raise BackendUnavailable(
                    f"{self.bus_name!r} did not appear on the AT-SPI bus within {self.start_timeout_s} s "
                    f"({reply.get('error')})"
                )
            time.sleep(0.2)

    def _stderr(self, lines: int = 3) -> str:
        """The last lines of the app's stderr (for crash messages)."""
        try:
            return " | ".join(self._log.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""

    def _ask(self, command: dict) -> dict:
        proc = self._procs["collector"]
        if proc.poll() is not None:
            raise BackendCrashed("the AT-SPI collector died")
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(command) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise BackendCrashed("the AT-SPI collector closed its output")
        return json.loads(line)

    def _stop(self, key: str) -> None:
        proc = self._procs.pop(key, None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=3)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)

    # ------------------------------------------------------------------ protocol
    def reset(self) -> Screen:
        """Restart the app with a fresh HOME and observe."""
        self._stop("app")
        self._start_app()
        return self.observe()

    def _read(self) -> dict:
        if self._procs["app"].poll() is not None:
            raise BackendCrashed(
                f"{self.command} exited with {self._procs['app'].returncode}: {self._stderr()}"
            )
        reply = self._ask({"cmd": "tree", "app": self.bus_name})
        if not reply.get("ok"):
            raise BackendCrashed(f"cannot read {self.bus_name!r}: {reply.get('error')}")
        return reply["tree"]

    def observe(self) -> Screen:
        tree, previous = self._read(), None
        for _ in range(3):  # settle: read until two reads agree
            if tree == previous:
                break
            previous = tree
            time.sleep(self.settle_s / 3)
            tree = self._read()
        self._ids = []

        def walk(node: dict) -> None:
            self._ids.append(node.pop("id"))
            for child in node.get("children", ()):
                walk(child)

        walk(tree)
        self._editor(tree)
        self._screen = Screen.from_tree(tree, app=self.name, window=tree.get("name", ""))
        return self._screen

    def actions(self, screen: Screen) -> list[Action]:
        return screen.actions()

    def act(self, action: Action) -> Screen:
        if self._screen is None:
            self.observe()
        if not 0 <= action.element < len(self._ids):
            raise ValueError(f"action.element={action.element} is not an element of the current screen")
        command = {"cmd": "act", "app": self.bus_name, "id": self._ids[action.element], "action": action.name}
        if action.name == "type":
            command = {**command, "cmd": "type", "text": self.profile.type_text}
        reply = self._ask(command)
        if not reply.get("ok") and action.name != "type":  # xdotool fallback: click the element's centre
            x, y, w, h = self._screen.elements[action.element].extents  # type: ignore[union-attr]
            subprocess.run(
                ["xdotool", "mousemove", str(x + w // 2), str(y + h // 2), "click", "1"],
                env=self.env,
                capture_output=True,
                check=False,
            )
        time.sleep(self.settle_s)
        return self.observe()

    def close(self) -> None:
        for key in ("collector", "app", "atspi", "xvfb"):
            self._stop(key)
        if getattr(self, "_bus_pid", 0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._bus_pid, signal.SIGTERM)
            self._bus_pid = 0
        if self._home is not None:
            self._home.cleanup()
            self._home = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
