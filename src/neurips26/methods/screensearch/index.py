"""Screen retrieval and near-duplicate detection: SQLite FTS5 BM25 + metadata filters, MinHash-LSH.

Paper says: related screens are indexed "through sparse token search and metadata filters"; states are
deduplicated. We chose SQLite's FTS5 (its built-in ``bm25()``: k1 = 1.2, b = 0.75, Robertson IDF clamped at
1e-6) over the location-aware tokens, SQL filters on app, window and element counts, and datasketch's
MinHash-LSH (verified by exact Jaccard on the candidates) for near-duplicates. Why: both ship with the
standard library / a small wheel, FTS5 lives in the same SQLite file as the state graph, and LSH keeps a
dedup query sublinear in the number of stored states.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from datasketch import MinHash, MinHashLSH

from neurips26.methods.screensearch.screen import jaccard


class ScreenIndex:
    """BM25 token search (FTS5 table ``screen_fts`` in ``conn``) plus an in-memory MinHash-LSH.

    Parameters
    ----------
    conn: an open SQLite connection (the state graph's); the FTS5 table is created if missing.
    num_perm: MinHash permutations (ours: 64; LSH recall at Jaccard >= 0.9 is ~1, see the tests).
    lsh_threshold: the LSH's Jaccard threshold for candidates (ours: 0.7, below every dedup threshold we
        use, so the exact check, not the LSH, decides).
    query_terms: BM25 queries keep the ``query_terms`` rarest tokens of a screen (ours: 16, which meets the
        20 ms target at 100k states with dedup recall 1.0; 32 took 28 ms; common tokens such as the menu bar
        carry almost no IDF and make FTS5 walk every posting list).
    """

    def __init__(
        self, conn: sqlite3.Connection, num_perm: int = 64, lsh_threshold: float = 0.7, query_terms: int = 16
    ) -> None:
        if num_perm < 8:
            raise ValueError(f"num_perm must be >= 8, got {num_perm}")
        if not 0.0 < lsh_threshold <= 1.0:
            raise ValueError(f"lsh_threshold must lie in (0, 1], got {lsh_threshold}")
        if query_terms < 1:
            raise ValueError(f"query_terms must be >= 1, got {query_terms}")
        self.conn = conn
        self.num_perm = num_perm
        self.query_terms = query_terms
        self.max_exemplars = 8  # ours: variants kept per state for near-duplicate matching
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS screen_fts USING fts5(tokens)")
        self._perm = MinHash(num_perm=num_perm, seed=1, scheme="affine32").permutations
        self.lsh = MinHashLSH(threshold=lsh_threshold, num_perm=num_perm)
        self.sets: dict[int, frozenset[str]] = {}
        self.exemplars: dict[tuple[int, int], frozenset[str]] = {}
        self._exemplar_count: Counter[int] = Counter()
        self.doc_freq: Counter[str] = Counter()

    def minhash(self, tokens: Iterable[str]) -> MinHash:
        """The MinHash of a token set (batched update)."""
        m = MinHash(num_perm=self.num_perm, seed=1, permutations=self._perm, scheme="affine32")
        m.update_batch([t.encode() for t in set(tokens)])
        return m

    def add(self, state: int, tokens: Sequence[str], signature: MinHash | None = None) -> MinHash:
        """Index ``state`` under its token multiset; returns its MinHash (to store)."""
        unique = frozenset(tokens)
        m = signature if signature is not None else self.minhash(unique)
        self.conn.execute("INSERT INTO screen_fts(rowid, tokens) VALUES (?, ?)", (state, " ".join(tokens)))
        self.lsh.insert(state, m, check_duplication=False)
        self.sets[state] = unique
        self.doc_freq.update(unique)
        return m

    def add_exemplar(self, state: int, tokens: Sequence[str], signature: MinHash | None = None) -> None:
        """Also match ``state`` by another observed variant (a screen merged into it as a near-duplicate),
        so later variants are compared with every kept variant, not only the first (at most
        ``max_exemplars`` per state)."""
        n = self._exemplar_count[state]
        if n >= self.max_exemplars:
            return
        self._exemplar_count[state] += 1
        unique = frozenset(tokens)
        m = signature if signature is not None else self.minhash(unique)
        self.lsh.insert((state, n), m, check_duplication=False)
        self.exemplars[(state, n)] = unique

    def near_duplicates(
        self, tokens: Iterable[str], threshold: float, signature: MinHash | None = None
    ) -> list[tuple[int, float]]:
        """Stored states with exact Jaccard >= ``threshold`` among the LSH candidates, best first."""
        unique = frozenset(tokens)
        m = signature if signature is not None else self.minhash(unique)
        best: dict[int, float] = {}
        for key in self.lsh.query(m):
            state, other = (key, self.sets[key]) if isinstance(key, int) else (key[0], self.exemplars[key])
            best[state] = max(best.get(state, 0.0), jaccard(unique, other))
        return sorted(((s, j) for s, j in best.items() if j >= threshold), key=lambda x: (-x[1], x[0]))

    def query_tokens(self, tokens: Iterable[str]) -> list[str]:
        """The ``query_terms`` rarest distinct tokens (ties broken by the token), the BM25 query."""
        unique = sorted(set(tokens), key=lambda t: (self.doc_freq.get(t, 0), t))
        return unique[: self.query_terms]

    def search(
        self,
        tokens: Iterable[str],
        k: int = 10,
        filters: Mapping[str, object] | None = None,
        exclude: int | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` best states by FTS5 BM25 (higher is better), optionally filtered on metadata.

        ``filters``: ``app``, ``window`` (equality), ``min_elements`` / ``max_elements`` (visible
        element count) and ``role:<role>`` (at least that many elements of the role).
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        terms = self.query_tokens(tokens)
        if not terms:
            return []
        where, args = ["screen_fts MATCH ?"], [" OR ".join(terms)]
        join = ""
        if filters:
            join = "JOIN states ON states.id = screen_fts.rowid"
            for key, value in filters.items():
                if key in ("app", "window"):
                    where.append(f"states.{key} = ?")
                elif key == "min_elements":
                    where.append("states.n_elements >= ?")
                elif key == "max_elements":
                    where.append("states.n_elements <= ?")
                elif key.startswith("role:"):
                    where.append("coalesce(json_extract(states.role_counts, ?), 0) >= ?")
                    args.append(f'$."{key[5:]}"')
                else:
                    raise ValueError(
                        f"filters key {key!r} unknown; use app, window, min_elements, max_elements, "
                        "role:<role>"
                    )
                args.append(value)
        if exclude is not None:
            where.append("screen_fts.rowid != ?")
            args.append(exclude)
        sql = (
            f"SELECT screen_fts.rowid, bm25(screen_fts) FROM screen_fts {join} WHERE {' AND '.join(where)} "
            "ORDER BY bm25(screen_fts) LIMIT ?"
        )
        rows = self.conn.execute(sql, [*args, k]).fetchall()
        return [(int(r), -float(s)) for r, s in rows]

    def similar(self, tokens: Iterable[str], k: int, min_similarity: float, exclude: int | None = None):
        """BM25 top-``k`` re-scored by exact Jaccard, keeping those >= ``min_similarity``."""
        unique = frozenset(tokens)
        hits = self.search(unique, k=k, exclude=exclude)
        scored = [(s, jaccard(unique, self.sets[s])) for s, _ in hits]
        return [(s, j) for s, j in scored if j >= min_similarity]


def exact_scan(sets: Mapping[int, frozenset[str]], tokens: Iterable[str], threshold: float) -> list[int]:
    """The linear exact-Jaccard scan LSH replaces (the benchmark's baseline)."""
    unique = frozenset(tokens)
    return [s for s, other in sets.items() if jaccard(unique, other) >= threshold]
