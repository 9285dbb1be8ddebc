"""Offline English prose: the Python language reference's topics that ship with the interpreter.

``pydoc_data.topics.topics`` (stdlib, used by ``help("assignment")``) maps 79 topic names (CPython 3.11) to
plain-text sections of the language reference (~465k characters of English prose with code examples).
Nothing is downloaded. As in :mod:`neurips26.data.text`, the train / held-out split is a pure function of
each topic's name (a SHA-256 hash, :func:`neurips26.data.text.split_of`), so calibration and held-out text
are disjoint whole topics, the same on every machine with the same Python version.
"""

from __future__ import annotations

from neurips26.data.text import CorpusFile, TextCorpus, split_of

__all__ = ["PYDOC_PREFIX", "load_pydoc_topics"]

PYDOC_PREFIX = "pydoc_data.topics/"  # a topic's corpus path: keeps its split hash apart from stdlib files'
_SPLITS = ("train", "heldout")


def load_pydoc_topics(
    split: str = "train", *, heldout_fraction: float = 0.3, topics: dict[str, str] | None = None
) -> TextCorpus:
    """The language-reference topics of one split, sorted by name (``path`` = ``pydoc_data.topics/NAME``).

    Parameters
    ----------
    split:
        ``"train"`` or ``"heldout"``.
    heldout_fraction:
        Share of topics (by name hash) held out; default 0.3 (ours: ~24 topics, ~140k characters, enough
        disjoint held-out prose for several context sets).
    topics:
        The name -> text mapping to split (default: ``pydoc_data.topics.topics``). Tests pass a small one.
    """
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    if topics is None:
        from pydoc_data.topics import topics  # stdlib; imported late: 0.5 MB of text
    files = [
        CorpusFile(PYDOC_PREFIX + name, text)
        for name, text in sorted(topics.items())
        if text.strip() and split_of(PYDOC_PREFIX + name, heldout_fraction) == split
    ]
    if not files:
        raise ValueError(
            f"no non-empty pydoc topic falls in split {split!r} (heldout_fraction={heldout_fraction})"
        )
    return TextCorpus(split, tuple(files))
