"""Progress bars on a terminal, silence in CI logs."""

from __future__ import annotations

import os
import sys
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
