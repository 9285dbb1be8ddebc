"""mini-SWaT: a three-tank water plant with discrete states driving numeric flows by mass balance.

Ours (STAR's benchmark A; SWaT itself needs registration and cannot be fetched). Water enters tank 1
through valve V1 at a rate set by the production mode, pump P1 moves it to tank 2, valve V2 drains tank
2 into tank 3 by gravity (flow ~ sqrt(level)), and a demand line draws from tank 3, boosted by pump P2
whenever demand is high; demand follows the hour of day and the day of week. Hysteresis controllers open
and close V1, P1 and V2 from the levels, so every state change has a level trigger.

Channels (14): numeric ``F1 L1 F2 L2 F3 L3 D PR`` (inflow, level 1, pump flow, level 2, gravity flow,
level 3, demand, booster pressure) then states ``V1 P1 V2 P2 mode dow``.

Anomaly families in the test split (``labels``: 0 normal, 1 numeric, 2 state-conditional,
3 state-inherent):

1. numeric: a spike, a drift or a variance burst on a numeric sensor;
2. state-conditional: a numeric sensor reads a value that is plausible overall but wrong for the state
   (flow through a closed valve, no pump flow while P1 runs, booster pressure with P2 off); states intact;
3. state-inherent: a reported state changes with no level trigger and no numeric effect (a pump toggling,
   a valve reported open at a full tank); numerics intact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "FAMILIES",
    "NUMERIC_CHANNELS",
    "STATE_CHANNELS",
    "STATE_VOCABULARIES",
    "PlantData",
    "PlantSimConfig",
    "mass_balance_residual",
    "simulate_plant",
]

NUMERIC_CHANNELS = ("F1", "L1", "F2", "L2", "F3", "L3", "D", "PR")
STATE_CHANNELS = ("V1", "P1", "V2", "P2", "mode", "dow")
STATE_VOCABULARIES: dict[str, tuple[int, ...]] = {
    "V1": (0, 1),
    "P1": (0, 1),
    "V2": (0, 1),
    "P2": (0, 1),
    "mode": (0, 1, 2),
    "dow": (0, 1, 2, 3, 4, 5, 6),
}
FAMILIES = {1: "numeric", 2: "state_conditional", 3: "state_inherent"}
AREAS = (4.0, 3.0, 5.0)  # tank cross-sections: level change = net flow / area per step


@dataclass(frozen=True)
class PlantSimConfig:
    """Simulator settings (ours; chosen so each state changes every few tens to hundreds of steps)."""

    n_train: int = 20_000
    n_test: int = 10_000
    steps_per_day: int = 288  # 5-minute samples
    noise: float = 0.02
    anomalies_per_family: int = 8
    min_length: int = 12
    max_length: int = 60

    def __post_init__(self) -> None:
        if self.n_train < 256 or self.n_test < 256:
            raise ValueError(f"n_train and n_test must be >= 256, got {self.n_train}, {self.n_test}")
        if not 1 <= self.min_length <= self.max_length:
            raise ValueError(f"need 1 <= min_length <= max_length, got {self.min_length}, {self.max_length}")
        if self.anomalies_per_family < 0:
            raise ValueError(f"anomalies_per_family must be >= 0, got {self.anomalies_per_family}")


@dataclass
class PlantData:
    """A simulated run. ``train``/``test`` are (steps, 14) float arrays (numerics, then state codes)."""

    train: np.ndarray
    test: np.ndarray
    labels: np.ndarray  # (n_test,) int: 0 normal, else the family id of FAMILIES
    columns: tuple[str, ...] = NUMERIC_CHANNELS + STATE_CHANNELS
    state_columns: dict[int, tuple[int, ...]] = field(default_factory=dict)
    clean_test: np.ndarray | None = None  # the test split before injection (for checks)

    @property
    def numeric_index(self) -> list[int]:
        return list(range(len(NUMERIC_CHANNELS)))


def _run_plant(n: int, steps_per_day: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Simulate n steps of the plant; returns (n, 14) with measured numerics and true states."""
    out = np.empty((n, 14))
    l1, l2, l3 = 2.0, 2.0, 2.0
    v1, p1, v2 = 1, 0, 1
    mode = 1
    mode_left = rng.integers(300, 1200)
    day0 = rng.integers(0, 7)
    inflow_by_mode = (0.25, 0.40, 0.55)
    demand_by_mode = (0.6, 1.0, 1.35)
    eps = rng.normal(0.0, noise, (n, 8))
    for t in range(n):
        mode_left -= 1
        if mode_left <= 0:
            mode = int(rng.choice([m for m in range(3) if m != mode]))
            mode_left = rng.integers(300, 1200)
        day = (day0 + t // steps_per_day) % 7
        hour = (t % steps_per_day) / steps_per_day * 24
        # controllers with hysteresis: every switch has a level trigger
        if v1 == 1 and l1 > 3.2:
            v1 = 0
        elif v1 == 0 and l1 < 1.5:
            v1 = 1
        if p1 == 0 and l2 < 1.4 and l1 > 0.8:
            p1 = 1
        elif p1 == 1 and (l2 > 3.0 or l1 < 0.5):
            p1 = 0
        if v2 == 1 and l3 > 3.4:
            v2 = 0
        elif v2 == 0 and l3 < 1.8:
            v2 = 1
        weekend = 0.7 if day >= 5 else 1.0
        demand = demand_by_mode[mode] * weekend * 0.22 * (1.0 + 0.5 * np.sin(2 * np.pi * (hour - 8) / 24))
        p2 = int(demand > 0.26)
        f1 = v1 * inflow_by_mode[mode]
        f2 = p1 * 0.6
        f3 = v2 * 0.22 * np.sqrt(max(l2, 0.0))
        demand = min(demand, l3 * AREAS[2])  # cannot draw more than tank 3 holds
        # mass balance (the levels after this step)
        l1 = max(l1 + (f1 - f2) / AREAS[0], 0.0)
        l2 = max(l2 + (f2 - f3) / AREAS[1], 0.0)
        l3 = max(l3 + (f3 - demand) / AREAS[2], 0.0)
        pressure = 1.0 + 0.3 * l3 + 1.5 * p2
        out[t, :8] = (f1, l1, f2, l2, f3, l3, demand, pressure)
        out[t, 8:] = (v1, p1, v2, p2, mode, day)
    out[:, :8] += eps
    return out


def mass_balance_residual(series: np.ndarray) -> np.ndarray:
    """Per-step residual of the three tank balances, (n - 1, 3): area * dL - (inflow - outflow).

    On normal data it is measurement noise only (zero mean, std ~ noise * sqrt(2) * area).
    """
    f1, l1, f2, l2, f3, l3, demand = (series[:, i] for i in range(7))
    return np.stack(
        [
            AREAS[0] * np.diff(l1) - (f1[1:] - f2[1:]),
            AREAS[1] * np.diff(l2) - (f2[1:] - f3[1:]),
            AREAS[2] * np.diff(l3) - (f3[1:] - demand[1:]),
        ],
        axis=1,
    )


def _free_segments(labels: np.ndarray, length: int, rng: np.random.Generator, margin: int = 40) -> int:
    """A start index whose [start - margin, start + length + margin) holds no earlier anomaly."""
    n = labels.shape[0]
    for _ in range(1000):
        start = int(rng.integers(margin, n - length - margin))
        if not labels[start - margin : start + length + margin].any():
            return start
    raise RuntimeError("could not place an anomaly: the test split is too short for anomalies_per_family")


def _inject(test: np.ndarray, config: PlantSimConfig, rng: np.random.Generator) -> np.ndarray:
    labels = np.zeros(test.shape[0], dtype=np.int64)
    num_std = test[:, :8].std(0)
    for _ in range(config.anomalies_per_family):
        # 1. numeric: spike, drift or variance on a random sensor
        length = int(rng.integers(config.min_length, config.max_length + 1))
        start = _free_segments(labels, length, rng)
        seg = slice(start, start + length)
        channel = int(rng.integers(0, 8))
        kind = rng.integers(0, 3)
        if kind == 0:
            length = int(rng.integers(1, 4))
            seg = slice(start, start + length)
            test[seg, channel] += rng.choice([-1, 1]) * rng.uniform(4, 7) * num_std[channel]
        elif kind == 1:
            test[seg, channel] += np.linspace(0, rng.uniform(2, 4) * num_std[channel], length)
        else:
            test[seg, channel] += rng.normal(0, rng.uniform(1.0, 2.0) * num_std[channel], length)
        labels[seg] = 1
    for _ in range(config.anomalies_per_family):
        # 2. state-conditional: a reading that is normal for the other state value
        for _attempt in range(200):
            length = int(rng.integers(config.min_length, config.max_length + 1))
            start = _free_segments(labels, length, rng)
            seg = slice(start, start + length)
            kind = int(rng.integers(0, 3))
            state_col, num_col, typical = [(8, 0, (0.25, 0.55)), (9, 2, None), (11, 7, (1.5, 1.9))][kind]
            # needs the state constant over the segment: closed valve, running pump, or booster off
            wanted = 0 if kind in (0, 2) else 1
            if np.all(test[seg, state_col] == wanted):
                break
        else:
            raise RuntimeError("no segment with a constant state found for a state-conditional anomaly")
        if kind == 1:  # pump running but no flow (a plausible reading: flow is zero whenever P1 is off)
            test[seg, num_col] = rng.normal(0, config.noise, length)
        elif kind == 0:  # inflow reads an open-valve rate while V1 is closed
            test[seg, num_col] = rng.uniform(*typical) + rng.normal(0, config.noise, length)
        else:  # booster pressure while P2 is off: the usual level term plus the booster's 1.5
            test[seg, num_col] = test[seg, num_col] + 1.5
        labels[seg] = 2
    for _ in range(config.anomalies_per_family):
        # 3. state-inherent: the reported state changes with no trigger and no numeric effect
        length = int(rng.integers(config.min_length, config.max_length + 1))
        start = _free_segments(labels, length, rng)
        seg = slice(start, start + length)
        kind = int(rng.integers(0, 3))
        if kind == 0:  # P1 toggling every few steps
            period = int(rng.integers(2, 5))
            test[seg, 9] = (np.arange(length) // period) % 2
        elif kind == 1:  # V1 or V2 reported flipped
            col = int(rng.choice([8, 10]))
            test[seg, col] = 1 - test[seg, col]
        else:  # mode reported as another value
            test[seg, 12] = (test[seg, 12] + rng.integers(1, 3)) % 3
        labels[seg] = 3
    return labels


def simulate_plant(config: PlantSimConfig | None = None, seed: int = 0) -> PlantData:
    """Simulate normal training data and an anomalous test split (one continuous run, split in two)."""
    config = config or PlantSimConfig()
    rng = np.random.default_rng(seed)
    series = _run_plant(config.n_train + config.n_test, config.steps_per_day, config.noise, rng)
    train = series[: config.n_train].copy()
    clean = series[config.n_train :].copy()
    test = clean.copy()
    labels = _inject(test, config, rng)
    schema = {8 + i: STATE_VOCABULARIES[name] for i, name in enumerate(STATE_CHANNELS)}
    return PlantData(train=train, test=test, labels=labels, state_columns=schema, clean_test=clean)
