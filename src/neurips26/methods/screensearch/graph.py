"""StateGraph: the persistent, deduplicated state graph in one SQLite file (WAL, schema version).

Tables: ``meta`` (format name, schema version), ``aliases`` (near-duplicate variants merged into a state),
``states`` (dedup key, app, window, element count, role
counts, tree JSON, tokens, MinHash, screenshot, visits, ground truth when a synthetic world gives it),
``actions`` (the action signatures a state offers), ``transitions`` (state, action signature, next state,
history, count) and ``observations`` (every screen seen, with the state it deduplicated to). The graph
exports to GraphML (networkx) and to a JSONL corpus. In-memory mirrors keep the explorer's hot queries
off SQL; the file is the durable record (a crashed worker loses nothing committed).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from pathlib import Path

from datasketch import MinHash

from neurips26.methods.screensearch.index import ScreenIndex
from neurips26.methods.screensearch.screen import Action, Screen, token_set_key

FORMAT_NAME = "neurips26.screensearch.graph"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS states(
  id INTEGER PRIMARY KEY, key TEXT UNIQUE, app TEXT, window TEXT, n_elements INTEGER, role_counts TEXT,
  tree TEXT, tokens TEXT, minhash BLOB, screenshot BLOB, visits INTEGER DEFAULT 0, truth TEXT);
CREATE TABLE IF NOT EXISTS actions(
  state INTEGER, signature TEXT, element INTEGER, name TEXT, role TEXT, label TEXT,
  PRIMARY KEY(state, signature));
CREATE TABLE IF NOT EXISTS transitions(
  src INTEGER, signature TEXT, dst INTEGER, history TEXT, count INTEGER,
  PRIMARY KEY(src, signature, dst, history));
CREATE TABLE IF NOT EXISTS observations(id INTEGER PRIMARY KEY, state INTEGER, worker TEXT, truth TEXT);
CREATE TABLE IF NOT EXISTS aliases(key TEXT PRIMARY KEY, state INTEGER, tokens TEXT);
"""


class GraphFormatError(ValueError):
    """The file is not a ScreenSearch graph, or one written by a newer schema."""


class StateGraph:
    """States, their trees and actions, and the transitions between them, deduplicated on insert.

    Parameters
    ----------
    path: the SQLite file (``":memory:"`` for a throwaway graph).
    dedup_threshold: screens whose token sets have Jaccard >= this are one state (ours: 0.9; 1.0 merges
        only identical filtered token sets).
    num_perm, lsh_threshold: the MinHash-LSH of :class:`ScreenIndex`.
    query_terms: rarest tokens per BM25 query (16: meets the 20 ms target at 100k states; 32 did not, README).
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        dedup_threshold: float = 0.9,
        num_perm: int = 64,
        lsh_threshold: float = 0.7,
        query_terms: int = 16,
    ) -> None:
        if not 0.0 < dedup_threshold <= 1.0:
            raise ValueError(f"dedup_threshold must lie in (0, 1], got {dedup_threshold}")
        self.path = str(path)
        self.dedup_threshold = dedup_threshold
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self._check_format()
        if self.path != ":memory:":
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)
        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT_NAME,))
        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        lsh = min(lsh_threshold, dedup_threshold)
        self.index = ScreenIndex(self.conn, num_perm=num_perm, lsh_threshold=lsh, query_terms=query_terms)
        self.keys: dict[str, int] = {}
        self.state_actions: dict[int, list[Action]] = {}
        self.outcomes: dict[tuple[int, str], Counter[int]] = defaultdict(Counter)
        self.histories: dict[tuple[int, str], dict[str, Counter[int]]] = defaultdict(
            lambda: defaultdict(Counter)
        )
        self.visits: Counter[int] = Counter()
        self.truth: dict[int, list[dict]] = defaultdict(list)
        self.observations = 0
        self._load()
        self.conn.commit()

    # ------------------------------------------------------------------ format
    def _check_format(self) -> None:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return
        if "meta" not in tables:
            raise GraphFormatError(
                f"{self.path} is a SQLite file but not a ScreenSearch graph (no meta table)"
            )
        meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT_NAME:
            raise GraphFormatError(f"{self.path}: format {meta.get('format')!r} is not {FORMAT_NAME!r}")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise GraphFormatError(
                f"{self.path}: schema version {version} is newer than this code's {SCHEMA_VERSION}; "
                "upgrade neurips26 or use another --db"
            )

    def _load(self) -> None:
        rows = self.conn.execute("SELECT id, key, tokens, minhash, visits FROM states").fetchall()
        if not rows:
            return
        self.conn.execute("DELETE FROM screen_fts")
        for state, key, tokens, blob, visits in rows:
            self.keys[key] = state
            signature = MinHash(
                num_perm=self.index.num_perm,
                seed=1,
                hashvalues=_unpack(blob),
                permutations=self.index._perm,
                scheme="affine32",
            )
            self.index.add(state, tokens.split(), signature)
            self.visits[state] = visits
        for state, sig, element, name, role, label in self.conn.execute("SELECT * FROM actions"):
            self.state_actions.setdefault(state, []).append(Action(element, name, sig, role, label))
        for src, sig, dst, history, count in self.conn.execute("SELECT * FROM transitions"):
            self.outcomes[(src, sig)][dst] += count
            self.histories[(src, sig)][history][dst] += count
        self.observations = self.conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        for key, state, tokens in self.conn.execute("SELECT key, state, tokens FROM aliases"):
            self.keys[key] = state
            self.index.add_exemplar(state, tokens.split())
        for state, truth in self.conn.execute("SELECT state, truth FROM observations WHERE truth != ''"):
            self.truth[state].append(json.loads(truth))

    # ------------------------------------------------------------------ writing
    def add_screen(self, screen: Screen, tokens: Sequence[str], worker: str = "") -> tuple[int, bool]:
        """Deduplicate ``screen`` into a state: ``(state id, is_new)``.

        Exact token-set key first; then MinHash-LSH candidates with exact Jaccard >= ``dedup_threshold``;
        otherwise a new state with its tree, tokens, actions and MinHash.
        """
        key = token_set_key(tokens)
        state = self.keys.get(key)
        is_new = False
        if state is None and self.dedup_threshold < 1.0:
            signature = self.index.minhash(tokens)
            found = self.index.near_duplicates(tokens, self.dedup_threshold, signature)
            if found:
                state = found[0][0]
                self.keys[key] = state
                self.index.add_exemplar(state, tokens, signature)
                self.conn.execute(
                    "INSERT OR IGNORE INTO aliases VALUES (?, ?, ?)", (key, state, " ".join(tokens))
                )
        if state is None:
            is_new = True
            signature = self.index.minhash(tokens)
            cursor = self.conn.execute(
                "INSERT INTO states(key, app, window, n_elements, role_counts, tree, tokens, minhash, "
                "screenshot, visits, truth) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, '[]')",
                (
                    key,
                    screen.app,
                    screen.window,
                    sum(e.visible for e in screen.elements),
                    json.dumps(screen.role_counts()),
                    json.dumps(screen.tree),
                    " ".join(tokens),
                    _pack(signature.hashvalues),
                    screen.screenshot,
                ),
            )
            state = int(cursor.lastrowid)
            self.keys[key] = state
            self.index.add(state, list(tokens), signature)
            actions = screen.actions()
            unique: dict[str, Action] = {}
            for action in actions:
                unique.setdefault(action.signature, action)
            self.state_actions[state] = list(unique.values())
            self.conn.executemany(
                "INSERT OR IGNORE INTO actions VALUES (?, ?, ?, ?, ?, ?)",
                [(state, a.signature, a.element, a.name, a.role, a.label) for a in unique.values()],
            )
        self.visits[state] += 1
        self.observations += 1
        self.conn.execute("UPDATE states SET visits = visits + 1 WHERE id = ?", (state,))
        truth = json.dumps(dict(screen.truth)) if screen.truth else ""
        self.conn.execute(
            "INSERT INTO observations(state, worker, truth) VALUES (?, ?, ?)", (state, worker, truth)
        )
        if screen.truth:
            self.truth[state].append(dict(screen.truth))
        return state, is_new

    def record(self, src: int, signature: str, dst: int, history: str = "") -> None:
        """Count one transition ``src --signature--> dst`` reached after action history ``history``."""
        self.outcomes[(src, signature)][dst] += 1
        self.histories[(src, signature)][history][dst] += 1
        self.conn.execute(
            "INSERT INTO transitions VALUES (?, ?, ?, ?, 1) ON CONFLICT(src, signature, dst, history) "
            "DO UPDATE SET count = count + 1",
            (src, signature, dst, history),
        )

    def commit(self) -> None:
        """Flush to disk (the explorer commits every few steps and at the end)."""
        self.conn.commit()

    def close(self) -> None:
        self.conn.commit()
        self.conn.close()

    # ------------------------------------------------------------------ reading
    @property
    def num_states(self) -> int:
        return len(self.state_actions)

    def actions(self, state: int) -> list[Action]:
        return self.state_actions.get(state, [])

    def tried(self, state: int, signature: str) -> int:
        return sum(self.outcomes.get((state, signature), Counter()).values())

    def untried(self, state: int) -> list[Action]:
        return [a for a in self.actions(state) if (state, a.signature) not in self.outcomes]

    def successors(self, state: int) -> dict[str, Counter[int]]:
        return {
            sig: self.outcomes[(state, sig)]
            for sig in (a.signature for a in self.actions(state))
            if (state, sig) in self.outcomes
        }

    def shortest_paths(self, root: int) -> dict[int, list[str]]:
        """BFS from ``root`` over observed transitions: state -> action signatures of a shortest path.

        An edge is used when it was seen at least once; ties keep the most frequent outcome's edge first.
        """
        paths: dict[int, list[str]] = {root: []}
        queue = deque([root])
        while queue:
            state = queue.popleft()
            for action in self.actions(state):
                counts = self.outcomes.get((state, action.signature))
                if not counts:
                    continue
                for dst, _ in counts.most_common():
                    if dst not in paths:
                        paths[dst] = [*paths[state], action.signature]
                        queue.append(dst)
        return paths

    def shortest_path(self, root: int, target: int, rng=None) -> list[str] | None:
        """One shortest known path of action signatures from ``root`` to ``target`` (None if unknown).

        With ``rng`` (a ``numpy.random.Generator``) each step back from ``target`` picks uniformly among
        the edges that lie on some shortest path, so equally short routes (say, two wizard choices leading
        to the same page) are all used; without it, the first BFS path.
        """
        if rng is None:
            return self.shortest_paths(root).get(target)
        dist: dict[int, int] = {root: 0}
        preds: dict[int, list[tuple[int, str]]] = {}
        queue = deque([root])
        while queue:
            state = queue.popleft()
            for action in self.actions(state):
                for dst in self.outcomes.get((state, action.signature), ()):
                    if dst not in dist:
                        dist[dst] = dist[state] + 1
                        queue.append(dst)
                    if dist[dst] == dist[state] + 1:
                        preds.setdefault(dst, []).append((state, action.signature))
        if target not in dist:
            return None
        path: list[str] = []
        node = target
        while node != root:
            options = preds[node]
            node, signature = options[int(rng.integers(len(options)))]
            path.append(signature)
        return path[::-1]

    # ------------------------------------------------------------------ export
    def to_networkx(self):
        """A ``networkx.MultiDiGraph``: nodes carry app, window, visits; edges signature and count."""
        import networkx as nx

        graph = nx.MultiDiGraph()
        for state in self.state_actions:
            row = self.conn.execute(
                "SELECT app, window, n_elements FROM states WHERE id = ?", (state,)
            ).fetchone()
            graph.add_node(state, app=row[0], window=row[1], n_elements=row[2], visits=self.visits[state])
        for (src, sig), counts in self.outcomes.items():
            for dst, count in counts.items():
                graph.add_edge(src, dst, signature=sig, count=count)
        return graph

    def export_graphml(self, path: str | Path) -> Path:
        import networkx as nx

        nx.write_graphml(self.to_networkx(), str(path))
        return Path(path)

    def export_jsonl(self, path: str | Path) -> Path:
        """One JSON line per state (tree, tokens, actions, out-edges): the exploration corpus."""
        path = Path(path)
        with path.open("w", encoding="utf-8") as handle:
            rows = self.conn.execute("SELECT id, app, window, tree, tokens, visits FROM states ORDER BY id")
            for state, app, window, tree, tokens, visits in rows:
                record = {
                    "state": state,
                    "app": app,
                    "window": window,
                    "visits": visits,
                    "tree": json.loads(tree),
                    "tokens": tokens.split(),
                    "actions": [a.signature for a in self.actions(state)],
                    "transitions": {s: dict(c) for s, c in self.successors(state).items()},
                }
                handle.write(json.dumps(record) + "\n")
        return path


def _pack(values) -> bytes:
    import numpy as np

    return np.asarray(values, dtype=np.uint64).tobytes()


def _unpack(blob: bytes):
    import numpy as np

    return np.frombuffer(blob, dtype=np.uint64).copy()
