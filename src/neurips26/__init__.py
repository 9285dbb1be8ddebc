"""neurips26: 19 NeurIPS 2026 papers as reusable software, each with its baselines and experiment.

This module stays lean (no torch import) so ``neurips26 list`` is instant. Importing it installs the
filters of known third-party noise (``neurips26.core.noise``) before any method imports torchao or
transformers, in every process that runs our code (the CLI, spawned workers, tests, a user's script).
"""

from __future__ import annotations

from typing import Any

from neurips26.core.noise import silence_third_party_noise

__version__ = "0.1.0"
__all__ = ["__version__", "get_method", "list_methods"]

silence_third_party_noise()


def list_methods() -> list[dict[str, str]]:
    """One row per method: slug, title, family, native API and status."""
    from neurips26.registry import METHODS

    return [
        {"slug": m.slug, "title": m.title, "family": m.family, "api": m.api, "status": m.status_text()}
        for m in METHODS
    ]


def get_method(slug: str) -> Any:
    """The ``Experiment`` of a ready method (imports its dependencies)."""
    from neurips26.registry import get_spec

    return get_spec(slug).load_experiment()
