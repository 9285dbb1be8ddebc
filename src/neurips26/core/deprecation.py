"""Deprecated names kept as aliases: one warning format for every renamed public function."""

from __future__ import annotations

import warnings


def warn_renamed(old: str, new: str, reason: str) -> None:
    """Emit a ``DeprecationWarning`` pointing the caller of ``old`` at ``new``.

    ``stacklevel=3``: the warning names the line that called the deprecated alias, not the alias itself.
    """
    warnings.warn(f"{old} is deprecated; use {new} ({reason})", DeprecationWarning, stacklevel=3)
