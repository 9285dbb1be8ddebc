"""STAR's benchmarks B (semi-real, with states) and C (real, no states) from aeon's and sktime's bundled
series.

B: labelled instances concatenated into one long series whose state channel declares the class of the
instance it is in: ``basic_motions`` (6 IMU channels, activity as the state, 4 values) and
``japanese_vowels`` (12 LPC channels, speaker as the state, 9 values). Training: the TRAIN split's
instances in a seeded random order, all normal. Test: the TEST split's instances (so normal test data is
held out), with two labelled anomaly families: *state-conditional* (a segment whose declared state is
wrong: the numbers are those of one activity or speaker, the state says another; plausible values that
are wrong for the declared state) and *numeric* (our injectors: spike, level shift, variance burst,
frozen channel).

C: no states. ``kdd135`` is KDD-TSAD 135 as shipped (its training split, then the rest of the test
series with its one labelled anomaly); ``daphnet`` is Daphnet S06R02E0, whose shipped excerpt has no
labelled anomaly, so its first half is the training split and its second half carries our injected
numeric anomalies. ``mitdb`` (star's ``real`` profile only) is sktime's MIT-BIH ECG excerpt: its first
3,000 steps (about 10 beats, all normal) train, the remaining 4,500 steps with the one labelled 352-step
anomaly test; the same for every seed.

Family ids follow ``neurips26.methods.star.plant_sim.FAMILIES`` (1 numeric, 2 state-conditional).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neurips26.methods.star.aeon_bundled import (
    load_basic_motions,
    load_daphnet_s06r02e0,
    load_japanese_vowels,
    load_kdd_tsad_135,
)
from neurips26.methods.star.sktime_bundled import load_mitdb

__all__ = [
    "MITDB_TRAIN_STEPS",
    "NO_STATES",
    "REAL_ANOMALIES",
    "SEMI_REAL",
    "STATELESS",
    "BenchmarkData",
    "inject_numeric",
    "make_benchmark",
]

SEMI_REAL = ("basic_motions", "japanese_vowels")
NO_STATES = ("daphnet", "kdd135")  # C, as run by the semireal and full profiles
REAL_ANOMALIES = ("kdd135", "mitdb")  # real series with real labelled anomalies (and no states)
STATELESS = (*NO_STATES, "mitdb")  # every benchmark without a state column
# ours: the first 40% of the excerpt (10 whole beats, no labelled step) is the normal training split
MITDB_TRAIN_STEPS = 3000
NUMERIC, STATE_CONDITIONAL = 1, 2


@dataclass
class BenchmarkData:
    """A benchmark instance: ``train``/``test`` (steps, channels), numerics first, then the state column.

    ``labels`` (n_test,) int: 0 normal, else the family id; ``state_columns`` the schema (empty for C).
    """

    name: str
    train: np.ndarray
    test: np.ndarray
    labels: np.ndarray
    state_columns: dict[int, tuple[int, ...]] = field(default_factory=dict)


def _free_start(
    labels: np.ndarray,
    length: int,
    rng: np.random.Generator,
    lo: int = 0,
    hi: int | None = None,
    margin: int = 20,
) -> int | None:
    """A start in [lo, hi - length] whose segment (with ``margin`` either side) holds no label yet."""
    hi = len(labels) if hi is None else hi
    for _ in range(200):
        if hi - length < lo:
            return None
        start = int(rng.integers(lo, hi - length + 1))
        a, b = max(0, start - margin), min(len(labels), start + length + margin)
        if not labels[a:b].any():
            return start
    return None


def inject_numeric(
    series: np.ndarray,
    labels: np.ndarray,
    n_numeric: int,
    count: int,
    scale: np.ndarray,
    rng: np.random.Generator,
    max_length: int = 40,
) -> None:
    """Inject ``count`` numeric anomalies in place (cycling spike, level shift, variance burst, frozen
    channel) on random numeric channels, sized by each channel's training spread ``scale``; label them 1."""
    kinds = ("spike", "shift", "burst", "freeze")
    for i in range(count):
        kind = kinds[i % len(kinds)]
        length = int(rng.integers(1, 4)) if kind == "spike" else int(rng.integers(15, max_length + 1))
        start = _free_start(labels, length, rng)
        if start is None:
            raise ValueError(f"no room for {count} numeric anomalies in {len(labels)} steps")
        channel = int(rng.integers(0, n_numeric))
        sl = slice(start, start + length)
        sign = rng.choice((-1.0, 1.0))
        if kind == "spike":
            series[sl, channel] += sign * rng.uniform(4.0, 6.0) * scale[channel]
        elif kind == "shift":
            series[sl, channel] += sign * rng.uniform(2.0, 3.0) * scale[channel]
        elif kind == "burst":
            series[sl, channel] += rng.normal(0.0, 2.0 * scale[channel], length)
        else:
            series[sl, channel] = series[start, channel]
        labels[sl] = NUMERIC


def _concatenate(instances: tuple[np.ndarray, ...], codes: np.ndarray, order: np.ndarray) -> tuple:
    """Instances (d, L_i) in ``order`` as one (sum L, d + 1) series with the code as last column, plus
    each instance's [start, end) in it."""
    parts = [
        np.concatenate([instances[i].T, np.full((instances[i].shape[1], 1), codes[i])], 1) for i in order
    ]
    ends = np.cumsum([p.shape[0] for p in parts])
    return np.concatenate(parts), np.stack([ends - np.diff(np.r_[0, ends]), ends], 1)


def _semi_real(name: str, seed: int, per_family: int) -> BenchmarkData:
    loader = load_basic_motions if name == "basic_motions" else load_japanese_vowels
    rng = np.random.default_rng(seed)
    (train_x, train_y, classes), (test_x, test_y, _) = loader("train"), loader("test")
    code = {c: i for i, c in enumerate(classes)}
    train, _ = _concatenate(train_x, np.array([code[c] for c in train_y]), rng.permutation(len(train_x)))
    test_codes = np.array([code[c] for c in test_y])
    test, bounds = _concatenate(test_x, test_codes, rng.permutation(len(test_x)))
    n_numeric = train.shape[1] - 1
    labels = np.zeros(len(test), dtype=np.int64)
    # wrong declared state: within one instance, a segment (all of it when short) declares another class
    candidates = rng.permutation(len(bounds))
    placed = 0
    for k in candidates:
        if placed == per_family:
            break
        a, b = (int(v) for v in bounds[k])
        length = min(b - a, int(rng.integers(30, 61)))
        start = _free_start(labels, length, rng, lo=a, hi=b, margin=0)
        if start is None or labels[max(0, a - 20) : b + 20].any():
            continue
        true = int(test[a, -1])
        test[start : start + length, -1] = rng.choice([c for c in range(len(classes)) if c != true])
        labels[start : start + length] = STATE_CONDITIONAL
        placed += 1
    scale = train[:, :n_numeric].std(0)
    inject_numeric(test, labels, n_numeric, per_family, scale, rng)
    schema = {n_numeric: tuple(range(len(classes)))}
    return BenchmarkData(name, train, test, labels, schema)


def make_benchmark(name: str, seed: int = 0, anomalies_per_family: int = 6) -> BenchmarkData:
    """Build benchmark ``name`` (one of ``SEMI_REAL + STATELESS``) for ``seed``.

    The seed sets the instance order and the injected segments; ``kdd135`` and ``mitdb`` are the same for
    every seed.
    """
    if anomalies_per_family < 1:
        raise ValueError(f"anomalies_per_family must be >= 1, got {anomalies_per_family}")
    if name in SEMI_REAL:
        return _semi_real(name, seed, anomalies_per_family)
    if name == "kdd135":
        train, test, labels = load_kdd_tsad_135()
        return BenchmarkData(name, train.copy(), test[len(train) :].copy(), labels[len(train) :].copy())
    if name == "mitdb":
        values, labels = load_mitdb()
        if labels[:MITDB_TRAIN_STEPS].any():  # the split's premise; a changed file must not pass silently
            raise ValueError("mitdb: a labelled step falls in the training split")
        cut = MITDB_TRAIN_STEPS
        return BenchmarkData(name, values[:cut].copy(), values[cut:].copy(), labels[cut:].copy())
    if name == "daphnet":
        values = load_daphnet_s06r02e0()
        half = len(values) // 2
        train, test = values[:half].copy(), values[half:].copy()
        labels = np.zeros(len(test), dtype=np.int64)
        inject_numeric(
            test, labels, test.shape[1], anomalies_per_family, train.std(0), np.random.default_rng(seed)
        )
        return BenchmarkData(name, train, test, labels)
    raise ValueError(f"name must be one of {SEMI_REAL + STATELESS}, got {name!r}")
