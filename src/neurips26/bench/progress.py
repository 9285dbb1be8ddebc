"""Progress bars on a terminal, silence in CI logs."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any


def progress_enabled() -> bool:
    """Bars only on an interactive terminal and never under CI."""
    return sys.stderr.isatty() and not os.environ.get("CI")


class TqdmProgress:
    """The ``Progress`` a run function receives: inner loops get transient (``leave=False``) bars."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = progress_enabled() if enabled is None else enabled

    def loop(self, iterable: Any, total: int | None = None, desc: str = "") -> Any:
        if not self.enabled:
            return iterable
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)


class Heartbeat:
    """A line every ``every_s`` seconds (cells done/total, ETA) for logs that have no terminal.

    ``make run | tee log`` and CI see no progress bar; without this a long method prints nothing for
    minutes. The ETA scales the profile's measured budget by the share of cells still to run.
    """

    def __init__(self, label: str, total: int, budget_s: float, every_s: float | None) -> None:
        self.label, self.total, self.budget_s, self.every_s = label, total, budget_s, every_s
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._start = 0.0

    def __enter__(self) -> Heartbeat:
        self._start = time.perf_counter()
        if self.every_s and self.total:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)

    def line(self) -> str:
        """``label: done/total cells, elapsed Xs, ETA Ys``."""
        elapsed = time.perf_counter() - self._start
        if self.done:
            eta = elapsed / self.done * (self.total - self.done)
        else:
            eta = max(self.budget_s - elapsed, 0.0)
        return f"{self.label}: {self.done}/{self.total} cells, elapsed {elapsed:.0f}s, ETA {eta:.0f}s"

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            print(self.line(), flush=True)
