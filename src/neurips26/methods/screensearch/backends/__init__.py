"""Backends behind one protocol: ``reset``, ``observe -> Screen``, ``actions``, ``act``, ``close``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from neurips26.methods.screensearch.screen import Action, Screen


class BackendCrashed(RuntimeError):
    """The app or browser died; the explorer restarts it and the graph survives."""


class BackendUnavailable(RuntimeError):
    """A system dependency is missing (the message names the apt or pip command that installs it)."""


@runtime_checkable
class Backend(Protocol):
    """What an explorer drives: a desktop app (AT-SPI), a web app (Playwright) or a synthetic world."""

    name: str

    def reset(self) -> Screen:
        """Restart from the app's initial state (fresh HOME / new browser context) and observe."""
        ...

    def observe(self) -> Screen:
        """The current screen."""
        ...

    def actions(self, screen: Screen) -> list[Action]:
        """The actions available on ``screen``."""
        ...

    def act(self, action: Action) -> Screen:
        """Perform ``action`` and return the screen after it settles."""
        ...

    def close(self) -> None:
        """Release processes and displays."""
        ...


__all__ = ["Backend", "BackendCrashed", "BackendUnavailable"]
