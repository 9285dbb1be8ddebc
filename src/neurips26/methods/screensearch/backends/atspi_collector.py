"""AT-SPI tree collector: runs under Debian's system python3 (python3-pyatspi is not on PyPI).

A long-lived subprocess of :class:`~neurips26.methods.screensearch.backends.atspi.AtspiApp`. It reads one
JSON command per line on stdin and answers one JSON line on stdout:

- ``{"cmd": "tree", "app": NAME}`` -> ``{"ok": true, "tree": {...}}``: the application node with its
  showing windows (frame, open menus, dialogs) as a nested ``role/name/states/extents/actions/children``
  tree; each node also carries ``id``, its child-index path from the application, so an action can find
  it again.
- ``{"cmd": "act", "app": NAME, "id": [i, j, ...], "action": "click"}`` -> ``{"ok": true}``: run that
  action through the AT-SPI Action interface (``{"ok": false, "error": ...}`` when it has none).
- ``{"cmd": "type", "app": NAME, "id": [...], "text": TEXT}`` -> ``{"ok": true}``: insert ``TEXT`` at the
  caret through the EditableText interface.
- ``{"cmd": "ping"}`` -> ``{"ok": true}``.

This file imports nothing from neurips26 and must stay runnable by ``/usr/bin/python3 atspi_collector.py``.
"""

import json
import sys

MAX_NODES = 2000  # ours: a bound on pathological trees (a spreadsheet's cells)
# roles whose label may live in the Text interface instead of the name (file-manager icons, table cells)
TEXT_NAMED = ("text", "label", "icon", "table cell", "paragraph", "entry")


def _app(app_name):
    """The application accessible named ``app_name`` on the desktop (its showing windows are the tree)."""
    import pyatspi

    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is not None and (app.name or "").lower() == app_name.lower():
            return app
    return None


def _node(acc, path, budget):
    import pyatspi

    budget[0] -= 1
    states = [pyatspi.stateToString(s) for s in acc.getState().getStates()]
    try:
        ext = acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        extents = [ext.x, ext.y, ext.width, ext.height]
    except NotImplementedError:
        extents = [0, 0, 0, 0]
    actions = []
    try:
        action = acc.queryAction()
        actions = [action.getName(k) for k in range(action.nActions)]
    except NotImplementedError:
        pass
    name = acc.name or ""
    if not name and acc.getRoleName() in TEXT_NAMED:
        try:
            text = acc.queryText()
            name = text.getText(0, min(text.characterCount, 200))
        except NotImplementedError:
            pass
    children = []
    if "showing" in states or not path:
        for k in range(min(acc.childCount, 500)):
            if budget[0] <= 0:
                break
            child = acc.getChildAtIndex(k)
            if child is not None:
                children.append(_node(child, [*path, k], budget))
    return {
        "role": acc.getRoleName(),
        "name": name,
        "states": states,
        "extents": extents,
        "actions": actions,
        "children": children,
        "id": path,
    }


def _find(frame, path):
    acc = frame
    for k in path:
        acc = acc.getChildAtIndex(k)
        if acc is None:
            raise LookupError(f"no node at {path}")
    return acc


def handle(command):
    if command.get("cmd") == "ping":
        return {"ok": True}
    frame = _app(command["app"])
    if frame is None:
        return {"ok": False, "error": f"application {command['app']!r} is not on the AT-SPI bus"}
    if command["cmd"] == "tree":
        return {"ok": True, "tree": _node(frame, [], [MAX_NODES])}
    if command["cmd"] == "act":
        acc = _find(frame, command["id"])
        try:
            action = acc.queryAction()
        except NotImplementedError:
            return {"ok": False, "error": "no Action interface"}
        names = [action.getName(k) for k in range(action.nActions)]
        if command["action"] not in names:
            return {"ok": False, "error": f"action {command['action']!r} not in {names}"}
        action.doAction(names.index(command["action"]))
        return {"ok": True}
    if command["cmd"] == "type":
        acc = _find(frame, command["id"])
        try:
            editable = acc.queryEditableText()
        except NotImplementedError:
            return {"ok": False, "error": "no EditableText interface"}
        try:
            offset = acc.queryText().caretOffset
        except NotImplementedError:
            offset = 0
        text = command["text"]
        editable.insertText(max(offset, 0), text, len(text))
        return {"ok": True}
    return {"ok": False, "error": f"unknown cmd {command.get('cmd')!r}"}


def main():
    for line in sys.stdin:
        try:
            reply = handle(json.loads(line))
        except Exception as error:  # report, keep serving
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
