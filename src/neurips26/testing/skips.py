"""Skip markers for optional dependencies."""

from __future__ import annotations

import importlib.util
from typing import Any


def requires_package(*modules: str) -> Any:
    """A ``pytest.mark.skipif`` that skips unless every module in ``modules`` is importable."""
    import pytest

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")
