"""WebApp: a web app in Debian's chromium driven by Playwright, read as an accessibility tree.

Playwright (PyPI) launches the system browser through ``executable_path`` (never a downloaded one) with
background networking off. A screen is the page's accessibility tree from the Chrome DevTools Protocol
(``Accessibility.getFullAXTree``: the tree Playwright's ``aria_snapshot`` is built from) with each node's
box from ``DOM.getBoxModel``. Actions: ``click`` (mouse at the box centre) for controls, ``type`` for text
boxes. Reset = a new browser context (fresh storage, fresh JavaScript state).

Loopback fixtures with hidden state (:func:`wizard_fixture`, :func:`todo_fixture`, :func:`settings_fixture`)
are served by a thread of the standard library's HTTP server. Set-up (Debian 12):
``apt-get install chromium``; ``pip install playwright`` (no ``playwright install``).
"""

from __future__ import annotations

import contextlib
import http.server
import shutil
import threading
from pathlib import Path

from neurips26.methods.screensearch.backends import BackendCrashed, BackendUnavailable
from neurips26.methods.screensearch.screen import Action, Screen

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
)
CONTROL_ROLES = {"button", "link", "checkbox", "radio", "menuitem", "tab", "switch", "combobox", "option"}
TEXT_ROLES = {"textbox", "searchbox"}
_SKIP_ROLES = {"none", "generic", "InlineTextBox", "LineBreak", "ignored"}
_STATE_PROPERTIES = ("checked", "selected", "expanded", "pressed", "disabled", "focused", "required")


def find_chromium() -> str:
    """The system chromium's path, or :class:`BackendUnavailable` naming the apt command."""
    for path in CHROMIUM_CANDIDATES:
        if Path(path).exists():
            return path
    found = shutil.which("chromium")
    if found:
        return found
    raise BackendUnavailable("no chromium found: sudo apt-get install -y chromium")


class FixtureServer:
    """Serve ``pages`` (path -> HTML) on 127.0.0.1 in a daemon thread."""

    def __init__(self, pages: dict[str, str]) -> None:
        data = {k: v.encode() for k, v in pages.items()}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = data.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(body or b"not found")

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class WebApp:
    """A loopback web app in chromium behind the backend protocol.

    Parameters
    ----------
    pages: path -> HTML of the fixture (served on loopback); ``start`` is the first path opened.
    name: the app's name in the graph.
    settle_ms: wait after an action (ours: 50 ms; the fixtures update synchronously).
    screenshots: attach a PNG of the viewport to every screen (the graph keeps one per new state).
    """

    def __init__(
        self,
        pages: dict[str, str],
        start: str = "/",
        name: str = "web",
        settle_ms: int = 50,
        screenshots: bool = False,
    ) -> None:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as error:
            raise BackendUnavailable("WebApp needs playwright: pip install 'neurips26[agent]'") from error
        executable = find_chromium()
        self.name, self.settle_ms, self.screenshots = name, settle_ms, screenshots
        self.server = FixtureServer(pages)
        self.start_url = self.server.url + start
        self._pw = sync_playwright().start()
        try:
            self.browser = self._pw.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS))
        except Exception as error:
            self._pw.stop()
            self.server.close()
            raise BackendUnavailable(f"chromium at {executable} did not start: {error}") from error
        self.context = None
        self.page = None
        self._screen: Screen | None = None

    def reset(self) -> Screen:
        """A new browser context (fresh state), then the start page."""
        if self.context is not None:
            self.context.close()
        self.context = self.browser.new_context(viewport={"width": 1024, "height": 768})
        self.page = self.context.new_page()
        self.page.goto(self.start_url)
        self._cdp = self.context.new_cdp_session(self.page)
        return self.observe()

    def observe(self) -> Screen:
        if self.page is None:
            return self.reset()
        if self.page.is_closed():
            raise BackendCrashed("the page was closed")
        nodes = self._cdp.send("Accessibility.getFullAXTree")["nodes"]
        by_id = {n["nodeId"]: n for n in nodes}
        root = next(n for n in nodes if not n.get("parentId"))
        tree = self._convert(root, by_id)
        shot = self.page.screenshot(type="png") if self.screenshots else None
        self._screen = Screen.from_tree(tree, app=self.name, window=self.page.title(), screenshot=shot)
        return self._screen

    def _convert(self, node: dict, by_id: dict) -> dict:
        """An AT-SPI-like node from a CDP AX node; ignored/generic wrappers are flattened away."""
        children: list[dict] = []
        for child_id in node.get("childIds", ()):
            child = by_id.get(child_id)
            if child is None:
                continue
            role = child.get("role", {}).get("value", "")
            if child.get("ignored") or role in _SKIP_ROLES:
                children += self._convert(child, by_id)["children"]
            else:
                children.append(self._convert(child, by_id))
        role = node.get("role", {}).get("value", "")
        props = {p["name"]: p.get("value", {}).get("value") for p in node.get("properties", ())}
        states = ["showing", "visible"] + ([] if props.get("disabled") else ["enabled"])
        states += [
            k for k in _STATE_PROPERTIES if k != "disabled" and props.get(k) not in (None, False, "false")
        ]
        extents = (0, 0, 0, 0)
        backend = node.get("backendDOMNodeId")
        if backend is not None and (role in CONTROL_ROLES or role in TEXT_ROLES or role == "heading"):
            try:
                quad = self._cdp.send("DOM.getBoxModel", {"backendNodeId": backend})["model"]["border"]
                xs, ys = quad[0::2], quad[1::2]
                extents = (int(min(xs)), int(min(ys)), int(max(xs) - min(xs)), int(max(ys) - min(ys)))
            except Exception:
                states.remove("showing")  # not rendered
        actions = ("click",) if role in CONTROL_ROLES else ("type",) if role in TEXT_ROLES else ()
        name = str(node.get("name", {}).get("value", ""))
        if role in TEXT_ROLES:
            name = f"{name} = {node.get('value', {}).get('value', '')}"
        return {
            "role": role,
            "name": name,
            "states": states,
            "extents": extents,
            "actions": actions,
            "children": children,
        }

    def actions(self, screen: Screen) -> list[Action]:
        return screen.actions()

    def act(self, action: Action) -> Screen:
        if self._screen is None or self.page is None:
            self.observe()
        if not 0 <= action.element < len(self._screen.elements):  # type: ignore[union-attr]
            raise ValueError(f"action.element={action.element} is not an element of the current screen")
        x, y, w, h = self._screen.elements[action.element].extents  # type: ignore[union-attr]
        try:
            self.page.mouse.click(x + w / 2, y + h / 2)  # type: ignore[union-attr]
            if action.name == "type":
                self.page.keyboard.type("item")  # type: ignore[union-attr]
                self.page.keyboard.press("Enter")  # type: ignore[union-attr]
            self.page.wait_for_timeout(self.settle_ms)  # type: ignore[union-attr]
        except Exception as error:
            raise BackendCrashed(f"chromium failed on {action.signature}: {error}") from error
        return self.observe()

    def close(self) -> None:
        for closer in (
            lambda: self.context and self.context.close(),
            self.browser.close,
            self._pw.stop,
            self.server.close,
        ):
            with contextlib.suppress(Exception):
                closer()
        self.context = None
