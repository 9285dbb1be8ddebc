"""The setup stage: work the cells of an experiment share, built once per key in each worker process.

Cells that share work (a loaded model, a data set rendered for a seed, a reference computed once for
every system of a seed) declare it as setup stages instead of hiding it in module-level caches::

    SETUP = (
        Setup("model", build=load_model, key=lambda config, profile, seed: config.model),
        Setup("data", build=seed_data, key=lambda config, profile, seed: (config.model, config.n, seed)),
    )
    EXPERIMENT = Experiment(..., setup=SETUP, run=run)

    def run(system, config, context, profile, seed, progress): ...  # context.model, context.data

Each stage's ``build(config, profile, seed, context)`` sees the stages declared before it
(``context.model``); ``run`` receives the context of every stage. A worker keeps one value per stage (the
last key built): when the key changes, the old value is dropped before the new one is built, so memory is
bounded by one context whatever the number of cells. The runner orders cells so that those sharing a key
run one after another (:func:`order_by_setup`), so each key is built once per worker.

A stage is seeded with the cell's seed before it is built (as the first cell that used to fill a cache
was), and the cell is seeded again afterwards: a cell's numbers never depend on whether it built the
context or reused it. Its wall time and the process's peak RSS after it are recorded in the cell beside,
not inside, the cell's own ``wall_s``.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from neurips26.core.measure import measured
from neurips26.core.seeding import seed_everything

if TYPE_CHECKING:
    from neurips26.bench.experiment import Experiment, Profile

SetupBuild = Callable[[Any, "Profile", int, "SetupContext"], Any]
SetupKey = Callable[[Any, "Profile", int], Hashable]


@dataclass(frozen=True)
class Setup:
    """One stage of shared work.

    ``name``: how ``run`` and later stages read it (``context.<name>``).
    ``build(config, profile, seed, context) -> value``: the work; ``context`` holds the earlier stages.
    ``key(config, profile, seed) -> hashable``: everything the value depends on. Cells with equal keys
    share one value, so the key must name every config field ``build`` reads (leave the seed out for a
    per-worker value such as a model); it is called in the driver to order the cells, so keep it cheap.
    ``release(value)``: optional; frees a value that holds a resource (a process, a file) when the worker
    drops it (a new key, another experiment, or the worker's exit).
    """

    name: str
    build: SetupBuild
    key: SetupKey
    release: Callable[[Any], None] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"Setup.name must be a public identifier (an attribute), got {self.name!r}")
        for hook in ("build", "key"):
            if not callable(getattr(self, hook)):
                raise TypeError(f"Setup {self.name!r}: {hook} must be callable")
        if self.release is not None and not callable(self.release):
            raise TypeError(f"Setup {self.name!r}: release must be callable or None")


class SetupError(RuntimeError):
    """A setup stage failed: every cell that needs its key records this error."""


class SetupContext(Mapping[str, Any]):
    """The built stages, read as attributes (``context.model``) or items (``context["model"]``)."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values = dict(values or {})

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"setup context has no stage {name!r}; stages: {list(values)}")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"SetupContext({list(self._values)})"

    def with_stage(self, name: str, value: Any) -> SetupContext:
        return SetupContext({**self._values, name: value})


def setup_stages(setup: Setup | Sequence[Setup] | None) -> tuple[Setup, ...]:
    """The experiment's stages as a tuple (none, one, or several), with unique names checked."""
    if setup is None:
        return ()
    stages = (setup,) if isinstance(setup, Setup) else tuple(setup)
    for stage in stages:
        if not isinstance(stage, Setup):
            raise TypeError(f"setup must be a Setup or a sequence of Setup, got {type(stage).__name__}")
    names = [stage.name for stage in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"setup stage names must be unique, got {names}")
    return stages


@dataclass
class _Entry:
    key: Hashable
    value: Any = None
    error: str | None = None
    release: Callable[[Any], None] | None = None

    def drop(self) -> None:
        """Free the value's resources (a value that failed to build has none)."""
        if self.release is not None and self.error is None:
            self.release(self.value)


class SetupStore:
    """The values one worker process holds: per stage, the last key built (and its value or error)."""

    def __init__(self) -> None:
        self._owner: str | None = None
        self._entries: dict[str, _Entry] = {}
        self.builds = 0  # how many stage values this store has built (tests read it)

    def clear(self) -> None:
        """Drop every value (freeing those with a ``release`` hook), later stages first."""
        while self._entries:
            _, entry = self._entries.popitem()
            entry.drop()
        self._owner = None

    def context_for(
        self, experiment: Experiment, config: Any, profile: Profile, seed: int
    ) -> tuple[SetupContext, dict[str, dict[str, Any]]]:
        """Every stage's value for this cell (built or reused) and a record of what each stage cost.

        Raises ``SetupError`` naming the stage when one fails (also for later cells with the same key).
        """
        if self._owner != experiment.slug:  # another experiment's values are never needed again
            self.clear()
            self._owner = experiment.slug
        context = SetupContext()
        record: dict[str, dict[str, Any]] = {}
        for stage in setup_stages(experiment.setup):
            key = _stage_key(stage, config, profile, seed)
            entry = self._entries.get(stage.name)
            reused = entry is not None and entry.key == key
            if not reused:
                if entry is not None:  # drop the old value before building the new one
                    del self._entries[stage.name]
                    entry.drop()
                entry, record[stage.name] = self._build(stage, key, config, profile, seed, context)
            else:
                record[stage.name] = {"reused": True, "wall_s": 0.0, "peak_rss_mb": None}
            assert entry is not None
            if entry.error is not None:
                raise SetupError(entry.error)
            context = context.with_stage(stage.name, entry.value)
        return context, record

    def _build(
        self, stage: Setup, key: Hashable, config: Any, profile: Profile, seed: int, context: SetupContext
    ) -> tuple[_Entry, dict[str, Any]]:
        entry = _Entry(key, release=stage.release)
        with measured() as cost:
            seed_everything(seed)  # as the first cell that filled a module cache seeded it
            try:
                entry.value = stage.build(config, profile, seed, context)
            except Exception as exc:  # recorded once, raised for every cell of this key
                entry.error = f"setup stage {stage.name!r} failed: {type(exc).__name__}: {exc}"
        self.builds += 1
        self._entries[stage.name] = entry
        return entry, {"reused": False, "wall_s": cost.seconds, "peak_rss_mb": cost.peak_rss_mb}


def _stage_key(stage: Setup, config: Any, profile: Profile, seed: int) -> Hashable:
    key = stage.key(config, profile, seed)
    try:
        hash(key)
    except TypeError:
        raise TypeError(
            f"setup stage {stage.name!r}: key must be hashable, got {type(key).__name__} {key!r}"
        ) from None
    return key


# One store per worker process (the driver's for jobs=1, each pool or Ray worker's own otherwise); its
# values are released when the process exits.
WORKER_STORE = SetupStore()
atexit.register(WORKER_STORE.clear)


def cell_setup(
    store: SetupStore, experiment: Experiment, config: Any, profile: Profile, seed: int, cell: dict
) -> SetupContext | None:
    """The setup context of a cell from ``store`` (None without setup); what it cost goes in ``cell``:
    ``setup_s`` (0 when every stage was reused), ``setup_reused`` and per stage ``setup[name]``."""
    if experiment.setup is None:
        return None
    cell["setup_s"], cell["setup_reused"] = 0.0, False
    context, stages = store.context_for(experiment, config, profile, seed)
    cell["setup"] = stages
    cell["setup_s"] = sum(stage["wall_s"] for stage in stages.values())
    cell["setup_reused"] = all(stage["reused"] for stage in stages.values())
    return context


def build_context(experiment: Experiment, config: Any, profile: Profile, seed: int) -> SetupContext:
    """The setup context of one cell, built afresh (for tests and scripts that call ``run`` directly)."""
    context, _ = SetupStore().context_for(experiment, config, profile, seed)
    return context


def setup_keys(experiment: Experiment, config: Any, profile: Profile, seed: int) -> tuple[Hashable, ...]:
    """The key of every stage for one cell."""
    return tuple(_stage_key(stage, config, profile, seed) for stage in setup_stages(experiment.setup))


def order_by_setup(tasks: Sequence[Any], keys_of: Callable[[Any], tuple[Hashable, ...]]) -> list[Any]:
    """The tasks regrouped so that cells sharing setup keys run one after another.

    Stable: cells are sorted by the first appearance of their first stage's key, then of their second
    stage's key, ..., and keep their planned order within a group, so a worker holding one value per stage
    builds each key once.
    """
    first_seen: list[dict[Hashable, int]] = []
    order: list[tuple[int, ...]] = []
    for task in tasks:
        keys = keys_of(task)
        while len(first_seen) < len(keys):
            first_seen.append({})
        order.append(
            tuple(seen.setdefault(key, len(seen)) for seen, key in zip(first_seen, keys, strict=False))
        )
    ranked = sorted(range(len(tasks)), key=lambda i: (order[i], i))
    return [tasks[i] for i in ranked]


def order_cells_by_setup(experiment: Experiment, tasks: Sequence[Any]) -> list[Any]:
    """The runner's cell tasks regrouped by their setup keys (unchanged for an experiment without setup)."""
    if experiment.setup is None:
        return list(tasks)

    def keys_of(task: Any) -> tuple[Hashable, ...]:
        config = experiment.config_for(task.profile, task.point, task.overrides)
        return setup_keys(experiment, config, task.profile, task.seed)

    return order_by_setup(tasks, keys_of)


__all__ = [
    "WORKER_STORE",
    "Setup",
    "SetupContext",
    "SetupError",
    "SetupStore",
    "build_context",
    "cell_setup",
    "order_by_setup",
    "order_cells_by_setup",
    "setup_keys",
    "setup_stages",
]
