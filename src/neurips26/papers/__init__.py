"""The 19 papers' abstracts, shipped inside the package as ``<slug>.md`` (what ``neurips26 info`` prints).

Where they come from: each file is the abstract of the NeurIPS 2026 paper as handed to this project in the
brief's paper files (``papers/<slug>.md`` beside the repository), copied verbatim so that an installed
package or a clone in any folder reads them without anything outside it. A method's slug is the name of
its file here.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["abstract"]


def abstract(slug: str) -> str:
    """The abstract of method ``slug`` as shipped in the package.

    Raises ``KeyError`` naming the slug when the package holds no abstract for it.
    """
    resource = files(__name__) / f"{slug}.md"
    if not resource.is_file():
        raise KeyError(f"no abstract shipped for method {slug!r} (expected neurips26/papers/{slug}.md)")
    return resource.read_text(encoding="utf-8").strip()
