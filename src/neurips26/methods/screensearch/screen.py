"""Screens as accessibility trees, their location-aware structural tokens and action signatures.

ScreenSearch (Solodko & Wagle, 2026) turns UIA trees into "location-aware structural features". Our Linux
analogue reads AT-SPI trees (desktop) or ARIA trees (web): every node has a role, a name, a state set,
screen extents and the actions it exposes. A :class:`Screen` is such a tree flattened in document order,
each element keeping its role path (``frame/panel/push button``).

Tokens (ours; the abstract names only "location-aware structural features"): per visible element
``role``, ``role+name``, ``role+name+grid cell``, ``role path+name`` and ``role+name+state set`` (the kept
states). Volatile attributes (clock and date texts, parenthesised counters, focus/armed/hover states,
progress bars) are filtered before tokenisation, so two screens that differ only in them share one token
set. Tokens are hashed to short hexadecimal words so SQLite's FTS5 tokenizer keeps each one whole.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# ours: states that flicker without any user action (focus follows the pointer; armed/hover are transient)
VOLATILE_STATES = frozenset({"focused", "armed", "hover", "busy", "animated"})
# ours: roles whose whole content changes on its own
VOLATILE_ROLES = frozenset({"progress bar", "animation", "timer", "status bar"})
_TIME = re.compile(r"\b\d{1,2}:\d{2}(:\d{2})?(\s?[ap]\.?m\.?)?\b", re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_COUNTER = re.compile(r"\(\s*\d+\s*\)")
_SPACE = re.compile(r"\s+")
# the keys of a tree node, AT-SPI-like; the web backend writes the same shape
TREE_KEYS = ("role", "name", "states", "extents", "actions", "children")


@dataclass(frozen=True)
class Element:
    """One accessible node: role, name, states, extents ``(x, y, w, h)`` and the actions it exposes."""

    role: str
    name: str
    states: tuple[str, ...]
    extents: tuple[int, int, int, int]
    actions: tuple[str, ...]
    path: str
    index: int
    content: bool = False  # its name is the document (a display value, an editor buffer), not structure

    @property
    def visible(self) -> bool:
        """Hidden menu items report sentinel extents (-2**31) and no ``showing`` state: skip them."""
        if self.states and "showing" not in self.states and "visible" not in self.states:
            return False
        x, y, w, h = self.extents
        return x > -(2**30) and y > -(2**30) and w >= 0 and h >= 0


@dataclass(frozen=True)
class Action:
    """An action on an element of a screen; ``signature`` is what matches it across similar screens."""

    element: int
    name: str
    signature: str
    role: str
    label: str


@dataclass
class Screen:
    """A flattened accessibility tree of one window, plus optional screenshot bytes and ground truth."""

    app: str
    window: str
    elements: tuple[Element, ...]
    tree: dict[str, Any] = field(repr=False, default_factory=dict)
    screenshot: bytes | None = field(default=None, repr=False)
    truth: Mapping[str, Any] = field(default_factory=dict)  # synthetic worlds only: latent/screen ids

    @classmethod
    def from_tree(
        cls,
        tree: Mapping[str, Any],
        app: str,
        window: str = "",
        truth: Mapping[str, Any] | None = None,
        screenshot: bytes | None = None,
    ) -> Screen:
        """Flatten a nested ``{"role", "name", "states", "extents", "actions", "children"}`` tree."""
        if not isinstance(tree, Mapping) or "role" not in tree:
            raise ValueError(f"tree must be a mapping with at least a 'role' key, got {type(tree).__name__}")
        elements: list[Element] = []
        for node, path in _walk(tree, ""):
            extents = tuple(int(v) for v in node.get("extents", (0, 0, 0, 0)))
            if len(extents) != 4:
                raise ValueError(f"tree node extents must have 4 numbers, got {node.get('extents')!r}")
            elements.append(
                Element(
                    role=str(node["role"]),
                    name=str(node.get("name", "")),
                    states=tuple(sorted(str(s) for s in node.get("states", ()))),
                    extents=extents,  # type: ignore[arg-type]
                    actions=tuple(str(a) for a in node.get("actions", ())),
                    path=path,
                    index=len(elements),
                    content=bool(node.get("content", False)),
                )
            )
        window = window or str(tree.get("name", ""))
        return cls(app, window, tuple(elements), dict(tree), screenshot, dict(truth or {}))

    def actions(self, filter_volatile: bool = True) -> list[Action]:
        """Every (visible element, action) pair in document order, with its matching signature."""
        found = []
        for element in self.elements:
            if not element.visible or ("enabled" not in element.states and element.states):
                continue
            # a content element's name is its document: the action must match across contents
            label = "<content>" if element.content else normalise_name(element.name, filter_volatile)
            for name in element.actions:
                signature = f"{element.role}|{label}|{name}"
                found.append(Action(element.index, name, signature, element.role, label))
        return found

    def role_counts(self) -> dict[str, int]:
        """Visible elements per role: the metadata filters of retrieval (ours: role counts, app, window)."""
        counts: dict[str, int] = {}
        for element in self.elements:
            if element.visible:
                counts[element.role] = counts.get(element.role, 0) + 1
        return counts


def _walk(node: Mapping[str, Any], parent: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    path = f"{parent}/{node['role']}" if parent else str(node["role"])
    yield node, path
    for child in node.get("children", ()):
        yield from _walk(child, path)


def normalise_name(name: str, filter_volatile: bool = True) -> str:
    """Lower-case, collapse white space; with ``filter_volatile`` replace clock/date texts and counters."""
    text = _SPACE.sub(" ", name.strip().lower())
    if filter_volatile:
        text = _COUNTER.sub("(#)", _DATE.sub("<date>", _TIME.sub("<time>", text)))
    return text


def structural_tokens(
    screen: Screen,
    grid: int = 4,
    filter_volatile: bool = True,
    screen_size: tuple[int, int] = (0, 0),
    mask_content: bool = False,
) -> list[str]:
    """Location-aware structural tokens of ``screen`` (a multiset, in document order).

    Parameters
    ----------
    screen: the screen.
    grid: cells per axis of the location grid (ours: 4, coarse enough that a one-pixel layout shift keeps
        the cell).
    filter_volatile: drop volatile states/roles and normalise clock, date and counter texts.
    screen_size: ``(width, height)`` for the grid; ``(0, 0)`` takes the union of visible extents.
    mask_content: replace the names of content elements (``Element.content``) by ``<content>``: the
        screen's structure without its document (see :func:`structure_key`).
    """
    if grid < 1:
        raise ValueError(f"grid must be >= 1, got {grid}")
    visible = [e for e in screen.elements if e.visible]
    if filter_volatile:
        visible = [e for e in visible if e.role not in VOLATILE_ROLES]
    width, height = screen_size
    if width <= 0 or height <= 0:
        width = max([e.extents[0] + e.extents[2] for e in visible] + [1])
        height = max([e.extents[1] + e.extents[3] for e in visible] + [1])
    words: list[str] = []
    for e in visible:
        name = "<content>" if mask_content and e.content else normalise_name(e.name, filter_volatile)
        cx = min(grid - 1, max(0, (e.extents[0] + e.extents[2] // 2) * grid // max(width, 1)))
        cy = min(grid - 1, max(0, (e.extents[1] + e.extents[3] // 2) * grid // max(height, 1)))
        words += [
            f"r:{e.role}",
            f"n:{e.role}:{name}",
            f"c:{e.role}:{name}:{cx},{cy}",
            f"p:{e.path}:{name}",
        ]
        states = [s for s in e.states if not (filter_volatile and s in VOLATILE_STATES)]
        words.append(f"s:{e.role}:{name}:{','.join(states)}")
    return [hash_token(w) for w in words]


def structure_key(screen: Screen, grid: int = 4, filter_volatile: bool = True) -> str | None:
    """The token-set key of ``screen`` with its content elements masked (``None`` when it has none): two
    screens with one structure key differ only in content (a calculator's display value)."""
    if not any(e.content for e in screen.elements):
        return None
    return token_set_key(structural_tokens(screen, grid, filter_volatile, mask_content=True))


def hash_token(word: str) -> str:
    """A 12-hex-digit word for ``word`` (FTS5's unicode61 tokenizer keeps it as one token)."""
    return "t" + hashlib.blake2b(word.encode(), digest_size=6).hexdigest()


def token_set_key(tokens: Sequence[str]) -> str:
    """The exact identity of a token set (order and multiplicity ignored)."""
    return hashlib.blake2b(" ".join(sorted(set(tokens))).encode(), digest_size=16).hexdigest()


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Exact Jaccard similarity of two token sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
