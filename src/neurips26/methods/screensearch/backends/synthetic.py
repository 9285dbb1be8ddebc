"""SyntheticGUI: a state machine that emits AT-SPI-like trees, with ground truth (ours; issue #32).

The world is a random multi-page application generated from a seed:

- **pages** in layers (page 0 is home); each page has a title, a shared menu bar (Home, Help), navigation
  buttons mostly to deeper pages, decorative labels/icons that expose ``click`` but do nothing, and on
  a few pages an irreversible action (``Delete``/``Quit``) to a dead-end page with no actions;
- **hidden variables** (a wizard's earlier choice): on a *chooser* page two buttons (``Use X mode`` /
  ``Use classic X``) lead to the same next page but set hidden bit ``k`` to 0 or 1; nothing shows the bit
  afterwards. On *aliased* pages one navigation button (``Continue``) leads to a page that depends on a
  bit: identical screens, different successors;
- **visible options**: *settings* pages hold a check box that reveals three extra widgets (a different,
  similar screen: dedup must keep the two apart, matching must treat them as variants);
- **nondeterminism**: on *flaky* pages one button fails (no-op) with probability ``flaky_prob``;
- **distractors**: a clock label and a notification counter that change every step, focus on a random
  element (all filtered as volatile), and with probability ``toast_prob`` a one-line toast whose text is
  drawn from a pool (not filtered: near-duplicate dedup has to absorb it).

Ground truth on every screen (``Screen.truth``): ``page``, ``latent`` (page plus what matters there: the
bit an aliased page reads, a settings page's box), ``screen`` (what a perfect dedup would merge: page plus
the box it displays) and the page's labels ``aliased`` / ``flaky``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neurips26.methods.screensearch.screen import Action, Screen

_WORDS = [
    "account",
    "billing",
    "network",
    "privacy",
    "display",
    "sound",
    "keyboard",
    "printer",
    "storage",
    "backup",
    "users",
    "search",
    "update",
    "language",
    "region",
    "power",
    "mouse",
    "camera",
    "sharing",
    "history",
    "export",
    "import",
    "fonts",
    "theme",
    "sync",
]
_TOASTS = tuple(f"Tip: {w} can be changed later" for w in _WORDS[:12]) + tuple(
    f"Saved draft of {w}" for w in _WORDS[12:]
)


@dataclass(frozen=True)
class SyntheticWorldSpec:
    """Size and difficulty of a generated world (defaults: ours, sized for a 300-action budget)."""

    pages: int = 40
    layers: int = 6
    nav_per_page: tuple[int, int] = (2, 4)
    decorative_per_page: tuple[int, int] = (3, 5)
    hidden_bits: int = 2
    aliased_pages: int = 6
    flaky_pages: int = 4
    flaky_prob: float = 0.4
    irreversible: int = 3
    settings_pages: int = 2
    toast_prob: float = 0.3
    hidden: bool = True  # False: no hidden variables (aliased pages behave deterministically)
    noise: bool = True  # False: no flaky buttons, no toasts, no clock/counter/focus distractors

    def __post_init__(self) -> None:
        if self.pages < self.layers + 2:
            raise ValueError(f"pages must be >= layers + 2, got pages={self.pages}, layers={self.layers}")
        if not 0.0 <= self.flaky_prob <= 1.0 or not 0.0 <= self.toast_prob <= 1.0:
            raise ValueError("flaky_prob and toast_prob must lie in [0, 1]")
        if self.hidden_bits < 0 or self.aliased_pages < 0 or self.flaky_pages < 0:
            raise ValueError("hidden_bits, aliased_pages and flaky_pages must be >= 0")


@dataclass
class _Page:
    title: str
    layer: int
    nav: list[tuple[str, int]] = field(default_factory=list)  # (button label, target page)
    decorative: list[tuple[str, str]] = field(default_factory=list)  # (role, label)
    setter: int = -1  # 1: a settings page with a visible check box (its own bit, shown only here)
    chooser: tuple[int, int, int] | None = None  # (hidden bit, value of nav 0, value of nav 1)
    alias: tuple[int, int, int, int] | None = None  # (nav index, bit, target if 0, target if 1)
    flaky: int = -1  # nav index that fails with flaky_prob
    sink: bool = False
    irreversible: list[tuple[str, int]] = field(default_factory=list)


class SyntheticGUI:
    """A generated GUI world behind the backend protocol (``reset/observe/actions/act/close``).

    Parameters
    ----------
    spec: the world's size and difficulty.
    seed: the world's generator seed (the same seed gives the same app).
    noise_seed: the seed of the run-time noise (toasts, flaky failures, focus).
    """

    name = "synthetic"

    def __init__(self, spec: SyntheticWorldSpec | None = None, seed: int = 0, noise_seed: int = 0) -> None:
        self.spec = spec or SyntheticWorldSpec()
        self.seed = seed
        self._noise = np.random.default_rng(noise_seed)
        self.pages = self._generate(np.random.default_rng(seed))
        self.steps = 0
        self.page = 0
        self.bits = (0,) * self.spec.hidden_bits
        self.shown: dict[int, int] = {}
        self._screen: Screen | None = None
        self._tags: list[str] = []

    # ----------------------------------------------------------------------- generation
    def _generate(self, rng: np.random.Generator) -> list[_Page]:
        s = self.spec
        extra = rng.integers(1, s.layers + 1, size=s.pages - 2 - s.layers)
        layer_of = np.sort(np.concatenate([np.arange(1, s.layers + 1), extra]))  # every layer non-empty
        titles = rng.permutation(len(_WORDS) * 4)
        pages = [_Page("Home", 0)]
        for i, layer in enumerate(layer_of):
            word = _WORDS[titles[i] % len(_WORDS)]
            pages.append(_Page(f"{word.title()} {titles[i] // len(_WORDS) + 1}", int(layer)))
        pages.append(_Page("Help", 0))
        help_page = len(pages) - 1
        by_layer = [[i for i, p in enumerate(pages[:-1]) if p.layer == k] for k in range(s.layers + 1)]
        for i, page in enumerate(pages[:-1]):
            deeper = [
                j for k in range(page.layer + 1, min(page.layer + 3, s.layers + 1)) for j in by_layer[k]
            ]
            pool = deeper or [j for j in range(1, len(pages) - 1) if j != i]
            n_nav = int(rng.integers(s.nav_per_page[0], s.nav_per_page[1] + 1))
            targets = rng.choice(pool, size=min(n_nav, len(pool)), replace=False)
            page.nav = [(f"Open {pages[int(t)].title}", int(t)) for t in targets]
            if page.layer > 0:
                page.nav.append(("Back", int(rng.choice(by_layer[page.layer - 1]))))
            n_dec = int(rng.integers(s.decorative_per_page[0], s.decorative_per_page[1] + 1))
            page.decorative = [
                (
                    str(rng.choice(["label", "icon", "image"])),
                    f"{_WORDS[int(rng.integers(len(_WORDS)))]} info",
                )
                for _ in range(n_dec)
            ]
        pages[help_page].nav = [("Home", 0)]
        pages[help_page].decorative = [("label", f"{w} info") for w in ("about", "shortcuts", "license")]
        inner = list(range(1, len(pages) - 1))
        chosen = rng.permutation(inner)
        cursor = 0
        if s.hidden_bits:
            shallow = [i for i in inner if pages[i].layer <= 2 and len(pages[i].nav) >= 1]
            # bit 0 is chosen on Home (every episode passes it), the others on shallow pages
            others = rng.choice(shallow, size=s.hidden_bits - 1, replace=False)
            for bit, page_id in enumerate([0, *others.tolist()]):
                page = pages[int(page_id)]
                label, target = page.nav[0]
                mode = _WORDS[int(rng.integers(len(_WORDS)))]
                page.nav[0] = (f"Use {mode} mode", target)
                page.nav.insert(1, (f"Use classic {mode}", target))
                page.chooser = (bit, 0, 1)
            candidates = [i for i in chosen if pages[i].layer >= 2 and pages[i].chooser is None]
            for page_id in candidates[: s.aliased_pages]:
                page = pages[page_id]
                nav = int(rng.integers(len(page.nav)))
                alt = [j for j in range(1, len(pages) - 1) if j != page.nav[nav][1] and j != page_id]
                page.alias = (nav, int(rng.integers(s.hidden_bits)), page.nav[nav][1], int(rng.choice(alt)))
                page.nav[nav] = ("Continue", page.nav[nav][1])
            cursor = s.aliased_pages
        plain = [i for i in inner if pages[i].alias is None and pages[i].chooser is None]
        for page_id in rng.choice(plain, size=min(s.settings_pages, len(plain)), replace=False):
            pages[int(page_id)].setter = 1
        flaky = [i for i in chosen[cursor:] if pages[i].chooser is None and pages[i].alias is None]
        for page_id in flaky[: s.flaky_pages]:
            pages[page_id].flaky = int(rng.integers(len(pages[page_id].nav)))
        for k, page_id in enumerate(rng.choice(inner, size=s.irreversible, replace=False)):
            label = ("Delete", "Quit", "Reset all")[k % 3]
            sink = _Page(f"{label} done", pages[int(page_id)].layer, sink=True)
            sink.decorative = [("label", f"{w} notice") for w in ("status", "details", "contact")]
            pages.append(sink)
            pages[int(page_id)].irreversible.append((label, len(pages) - 1))
        return pages

    # ----------------------------------------------------------------------- protocol
    def reset(self) -> Screen:
        """Back to Home with every hidden bit 0 (a fresh HOME, in real-app terms)."""
        self.page, self.bits, self.shown = 0, (0,) * self.spec.hidden_bits, {}
        self._screen = self._render()
        return self._screen

    def observe(self) -> Screen:
        if self._screen is None:
            return self.reset()
        return self._screen

    def actions(self, screen: Screen) -> list[Action]:
        return screen.actions()

    def act(self, action: Action) -> Screen:
        """Apply ``action`` (an action of the current screen) and render the next screen."""
        screen = self.observe()
        if not 0 <= action.element < len(screen.elements):
            raise ValueError(f"action.element={action.element} is not an element of the current screen")
        self.steps += 1
        page = self.pages[self.page]
        kind, _, arg = self._tags[action.element].partition(":")
        if kind == "nav":
            index = int(arg)
            fails = self.spec.noise and index == page.flaky and self._noise.random() < self.spec.flaky_prob
            if not fails:
                self.page, self.bits = self._next(page, index, self.bits)
        elif kind == "menu":
            self.page = 0 if arg == "home" else len([p for p in self.pages if not p.sink]) - 1
        elif kind == "toggle":
            self.shown[self.page] = 1 - self.shown.get(self.page, 0)
        elif kind == "irreversible":
            self.page = page.irreversible[int(arg)][1]
        self._screen = self._render()
        return self._screen

    def close(self) -> None:
        self._screen = None

    # ----------------------------------------------------------------------- ground truth
    def _next(self, page: _Page, index: int, bits: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """Target page and hidden bits after navigation button ``index`` of ``page``."""
        target = page.nav[index][1]
        if self.spec.hidden and page.alias is not None and page.alias[0] == index:
            target = page.alias[3] if bits[page.alias[1]] else page.alias[2]
        if self.spec.hidden and page.chooser is not None and index in (0, 1):
            new = list(bits)
            new[page.chooser[0]] = page.chooser[1 + index]
            bits = tuple(new)
        return target, bits

    def latent_of(self, page_id: int, bits: tuple[int, ...], shown: int = 0) -> str:
        """Page plus what matters there: the bit an aliased page reads, a settings page's visible box."""
        page = self.pages[page_id]
        if page.setter >= 0:
            return f"{page_id}:box={shown}"
        if self.spec.hidden and page.alias is not None:
            return f"{page_id}:{page.alias[1]}={bits[page.alias[1]]}"
        return str(page_id)

    def reachable_latents(self) -> set[str]:
        """Every latent state reachable from reset (BFS over pages x hidden bits; boxes add both values)."""
        start = (0, (0,) * self.spec.hidden_bits)
        seen, frontier = {start}, [start]
        home, help_page = 0, len([p for p in self.pages if not p.sink]) - 1
        while frontier:
            page_id, bits = frontier.pop()
            page = self.pages[page_id]
            nexts = [self._next(page, index, bits) for index in range(len(page.nav))]
            if not page.sink:
                nexts += [(home, bits), (help_page, bits)]
            nexts += [(target, bits) for _, target in page.irreversible]
            for state in nexts:
                if state not in seen:
                    seen.add(state)
                    frontier.append(state)
        latents = {self.latent_of(p, b) for p, b in seen}
        return latents | {self.latent_of(p, b, 1) for p, b in seen if self.pages[p].setter >= 0}

    # ----------------------------------------------------------------------- rendering
    def _render(self) -> Screen:
        page = self.pages[self.page]
        noise = self.spec.noise
        children: list[dict] = []
        y = 40

        def add(role: str, name: str, tag: str, actions: tuple[str, ...] = ("click",), x: int = 20, **kw):
            nonlocal y
            states = ["enabled", "showing", "visible", "sensitive", *kw.get("states", ())]
            children.append(
                {
                    "role": role,
                    "name": name,
                    "states": states,
                    "extents": (x, y, 160, 24),
                    "actions": actions,
                    "children": [],
                    "tag": tag,
                }
            )
            y += 30

        menu = [] if page.sink else [("Home", "menu:home"), ("Help", "menu:help")]
        for k, (label, tag) in enumerate(menu):
            children.append(
                {
                    "role": "menu item",
                    "name": label,
                    "states": ["enabled", "showing", "visible", "sensitive"],
                    "extents": (10 + 60 * k, 5, 50, 20),
                    "actions": ("click",),
                    "children": [],
                    "tag": tag,
                }
            )
        add("heading", page.title, "title", ())
        for index, (label, _) in enumerate(page.nav):
            add("push button", label, f"nav:{index}")
        for k, (label, _) in enumerate(page.irreversible):
            add("push button", label, f"irreversible:{k}", x=400)
        if page.setter >= 0:
            on = self.shown.get(self.page, 0)
            add("check box", "Show advanced options", "toggle:0", states=("checked",) if on else ())
            if on:
                for k in range(3):
                    add("spin button", f"Advanced setting {k + 1}", "extra", ("increment",))
        for k, (role, label) in enumerate(page.decorative):
            add(role, label, f"deco:{k}", x=400)
        if noise:
            t = 9 * 3600 + 7 * self.steps
            add("label", f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}", "clock", (), x=600)
            add("label", f"Notifications ({int(self._noise.integers(0, 9))})", "counter", (), x=600)
            if self._noise.random() < self.spec.toast_prob:
                add("label", str(self._noise.choice(_TOASTS)), "toast", (), x=300)
            if children:
                focus = children[int(self._noise.integers(len(children)))]
                focus["states"] = [*focus["states"], "focused"]
        self._tags = ["", "", *(child.pop("tag") for child in children)]
        tree = {
            "role": "frame",
            "name": f"Synthetic app {self.seed}",
            "states": ["enabled", "showing", "visible", "active"],
            "extents": (0, 0, 800, 600),
            "actions": (),
            "children": [
                {
                    "role": "panel",
                    "name": "",
                    "states": ["enabled", "showing", "visible"],
                    "extents": (0, 0, 800, 600),
                    "actions": (),
                    "children": children,
                }
            ],
        }
        screen = Screen.from_tree(tree, app=self.name, window=page.title)
        bits_shown = f":{self.shown.get(self.page, 0)}" if page.setter >= 0 else ""
        screen.truth = {
            "page": self.page,
            "latent": self.latent_of(self.page, self.bits, self.shown.get(self.page, 0)),
            "screen": f"{self.page}{bits_shown}",
            "aliased": bool(self.spec.hidden and page.alias is not None),
            "flaky": bool(noise and page.flaky >= 0),
        }
        return screen
