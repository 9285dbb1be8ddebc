"""``neurips26 new SLUG``: write the skeleton of a new method and register it.

The skeleton is the template of ``src/neurips26/methods/README.md`` in files: the package (public API,
config, algorithm, ecosystem glue, baselines, a tiny working experiment, conformance factories), its README
with the sections the conventions require, its abstract, and ``tests/methods/<slug>/test_<slug>.py``. The
experiment runs from the first minute (the contract matrix's smoke run passes), but the generated tests
FAIL until the author declares the central ideas, the conformance families, the paper's effect and
replaces every ``TODO(neurips26 new)`` marker: a stub can never pass as a finished method.

Registration: ``registry.METHODS`` stays a hand-written tuple of import strings (``neurips26 list`` must
list 20 methods without importing one, and the title, family and claim are data only a person can
write), so ``new`` inserts the method's ``MethodSpec`` line before the tuple's end instead of the registry
discovering folders.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from pathlib import Path
from string import Template

__all__ = ["TODO", "add_arguments", "main", "write_method"]

TODO = "TODO(neurips26 new)"
SMOKE_BUDGET_S = 10
DEFAULT_BUDGET_S = 30
_SLUG = re.compile(r"[a-z][a-z0-9]*")
_REGISTRY_END = "\n)\ndel _M\n"


def _class_name(slug: str) -> str:
    return slug[:1].upper() + slug[1:]


_INIT = '''"""$Name: $TODO one line on what the method does (the paper's title, then its idea)."""

from neurips26.methods.$slug.config import ${Name}Config
from neurips26.methods.$slug.core import estimate_location

# Central ideas (issue 42, conventions §5 (4)): idea -> the test that fails when it is switched off,
# "tests/methods/$slug/test_$slug.py::test_name". tests/test_ideas.py and the README read this literal.
IDEAS: dict[str, str] = {}

# Ecosystem conformance (CONFORMANCE_PROTOCOL): (family, "module:factory") pairs, factories in conformance.py;
# or () with CONFORMANCE_REASON saying in one sentence why no ecosystem family fits.
CONFORMANCE: tuple[tuple[str, str], ...] = ()
CONFORMANCE_REASON: str = "$TODO"

__all__ = ["CONFORMANCE", "CONFORMANCE_REASON", "IDEAS", "${Name}Config", "estimate_location"]
'''

_CONFIG = '''"""${Name}Config: the method's own settings; every default says where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param


@dataclass
class ${Name}Config:
    """Settings of $slug's public API ($TODO replace the placeholder knob by the paper's)."""

    trim_quantile: float = param(0.2, "$TODO: paper, Sec. ? or 'ours: why'")

    def __post_init__(self) -> None:
        if not 0.0 <= self.trim_quantile < 0.5:
            raise ValueError(f"trim_quantile must lie in [0, 0.5), got {self.trim_quantile!r}")
'''

_CORE = '''"""The algorithm on plain arrays, equation comments beside the lines ($TODO the paper's)."""

from __future__ import annotations

import numpy as np


def estimate_location(samples: np.ndarray, trim_quantile: float) -> float:
    """Placeholder algorithm: a trimmed mean. $TODO replace it by the method.

    Parameters
    ----------
    samples:
        1-D array of observations, shape ``(n,)``.
    trim_quantile:
        Share cut from each tail, in [0, 0.5).
    """
    samples = np.asarray(samples, dtype=float)
    if samples.ndim != 1 or samples.size == 0:
        raise ValueError(f"samples must be a non-empty 1-D array, got shape {samples.shape}")
    low, high = np.quantile(samples, [trim_quantile, 1 - trim_quantile])
    return float(samples[(samples >= low) & (samples <= high)].mean())
'''

_INTEGRATION = '''"""The ecosystem glue (a press, an Optimizer, a Strategy, an Env, a quantize_ handler ...).

$TODO: wrap core.py in the ecosystem's native API; never a generic fit/predict class.
"""
'''

_BASELINES = '''"""Baselines: library adapters; one re-implemented here says so in its docstring."""

from __future__ import annotations

import numpy as np


def sample_mean(samples: np.ndarray) -> float:
    """The plain mean (numpy), a placeholder. $TODO the paper's baselines."""
    return float(np.mean(samples))
'''

_CONFORMANCE = '''"""Tiny instances for the conformance matrix (CPU, < 1 s), named in ``CONFORMANCE``.

Example: ``CONFORMANCE = (("module", "neurips26.methods.$slug.conformance:tiny_module"),)`` with
``def tiny_module() -> torch.nn.Module: ...`` here.
"""
'''

_EXPERIMENT = '''"""The $slug experiment: $TODO data, systems (ours + every baseline), metric, claim."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile, Progress
from neurips26.core.config import nested, param
from neurips26.methods.$slug.baselines import sample_mean
from neurips26.methods.$slug.config import ${Name}Config
from neurips26.methods.$slug.core import estimate_location


@dataclass
class ${Name}ExperimentConfig:
    """The method's own config, nested, plus the data fields."""

    method: ${Name}Config = nested(${Name}Config, "the method's own defaults (config.py)")
    n_samples: int = param(200, "ours: placeholder data size")
    outlier_fraction: float = param(0.1, "ours: placeholder contamination")


def _samples(config: ${Name}ExperimentConfig, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n_out = int(config.n_samples * config.outlier_fraction)
    return np.concatenate([rng.normal(0.0, 1.0, config.n_samples - n_out), rng.normal(8.0, 1.0, n_out)])


def run(
    system: Any, config: ${Name}ExperimentConfig, profile: Profile, seed: int, progress: Progress
) -> dict[str, float]:
    """One cell: the system's absolute error on the seed's data (quality and cost metrics in one dict)."""
    return {"abs_error": abs(system(_samples(config, seed)))}


EXPERIMENT = Experiment(
    slug="$slug",
    config_cls=${Name}ExperimentConfig,
    claims=(
        Claim(
            "$TODO: the paper's claim, as a test that can fail",
            "abs_error",
            "$slug",
            ("mean",),
            controls=("zero",),
            paper_effect=None,
            paper_effect_source="",
        ),
    ),
    metrics=(Metric("abs_error", "min", description="|estimate - true location|"),),
    systems={
        "$slug": lambda c: lambda x: estimate_location(x, c.method.trim_quantile),
        "mean": lambda c: sample_mean,
        "zero": lambda c: lambda x: 0.0,
    },
    profiles={
        "smoke": Profile("smoke", budget_s=$smoke_budget, seeds=2),
        "default": Profile("default", budget_s=$default_budget, seeds=5),
        "full": Profile("full", budget_s=$default_budget, seeds=20),
    },
    run=run,
    ours="$slug",
)
'''

_README = """# $slug — $TODO the paper's title

*$TODO the paper's title* (authors, NeurIPS 2026; arXiv id).

$TODO one paragraph on what the method does, and what this package gives a user.

## Usage

```python
import numpy as np

from neurips26.methods.$slug import ${Name}Config, estimate_location

print(estimate_location(np.arange(10.0), ${Name}Config().trim_quantile))
```

## Paper → code

| paper | code |
|---|---|
| $TODO Eq. (1) | `core.py: estimate_location` |

## Central ideas, and the test that switches each off

| idea | switched off by | test that then fails |
|---|---|---|
| $TODO | $TODO | $TODO |

Degenerate equivalences: $TODO (with its novelty switched off the method equals which baseline).

## The paper says / we chose / why

| question | the paper says | we chose | why |
|---|---|---|---|
| $TODO | | | |

## Baselines and control

$TODO each baseline with its provenance (library adapter or re-implemented), its trivial floor, and the
negative control that must not pass the claim.

## Experiment

$TODO data, metric, expected direction, the paper's reported effect and the smallest effect the design
detects.

## Results

<!-- results:start -->
<!-- results:end -->
"""

_PAPER = "$TODO paste the paper's abstract here (verbatim).\n"

_TEST = '''"""$slug: the tests every method owes (conventions §5), written by `neurips26 new`.

Each test below FAILS until the method is filled in (ideas declared with their guarding tests, conformance
declared, the claim stating the paper's effect, every TODO marker replaced): a skeleton never passes as
done. Replace the two placeholders at the end by the method's idea-off and degenerate-equivalence tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from neurips26.registry import get_spec
from neurips26.testing import check_experiment_contract

SLUG = "$slug"
ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "src" / "neurips26" / "methods" / SLUG
MARKER = "TODO" + "(neurips26 new)"  # split so this file itself does not hold the marker


def _declared(name: str) -> object:
    """The literal ``name = ...`` of the method's ``__init__.py`` (parsed, not imported)."""
    for node in ast.parse((PACKAGE / "__init__.py").read_text()).body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    return None


def test_smoke_run_meets_the_contract() -> None:
    spec = get_spec(SLUG)
    check_experiment_contract(spec.load_experiment(), spec.experiment)


def test_central_ideas_are_declared_with_a_test_that_exists() -> None:
    ideas = _declared("IDEAS")
    assert ideas, f"declare {SLUG}'s central ideas in IDEAS: idea -> the test that fails when it is off"
    for idea, node in ideas.items():
        path, _, name = node.partition("::")
        assert (ROOT / path).is_file(), f"idea {idea!r}: no test file {path}"
        assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), f"idea {idea!r}: no test {name}"


def test_conformance_is_declared() -> None:
    pairs, reason = _declared("CONFORMANCE"), _declared("CONFORMANCE_REASON")
    assert pairs or (reason and MARKER not in reason), (
        "declare CONFORMANCE (family, 'module:factory') pairs, or CONFORMANCE_REASON (why no family fits)"
    )


def test_claims_state_the_paper_effect_and_a_control() -> None:
    for claim in get_spec(SLUG).load_experiment().claims:
        assert claim.paper_effect is not None and claim.paper_effect_source, f"{claim.text!r}: paper_effect"
        assert claim.controls or claim.contrast, f"{claim.text!r}: a negative control or a contrast"


def test_nothing_is_left_to_fill_in() -> None:
    files = [*sorted(PACKAGE.rglob("*.py")), *sorted(PACKAGE.glob("*.md"))]
    files.append(ROOT / "src" / "neurips26" / "papers" / f"{SLUG}.md")
    left = [str(f.relative_to(ROOT)) for f in files if MARKER in f.read_text()]
    assert not left, f"{MARKER} markers left in {left}"


def test_the_central_idea_switched_off_fails() -> None:
    pytest.fail("placeholder: switch each central idea off (flag or monkeypatch) and show a result change")


def test_with_its_novelty_off_the_method_equals_a_known_baseline() -> None:
    pytest.fail("placeholder: the degenerate equivalence (e.g. rho=0 equals the base optimizer)")
'''

_REGISTRY_ENTRY = """    _M(
        "$slug",
        "$TODO the paper's title",
        "$TODO family",
        "$TODO native API",
        "$TODO the paper's claim in one sentence.",
        extras=(),
        experiment="neurips26.methods.$slug.experiment:EXPERIMENT",
        default_budget_s=$default_budget,
    ),
"""


def _files(slug: str) -> dict[str, str]:
    """Repository-relative path -> text of every file the skeleton writes."""
    values = {
        "slug": slug,
        "Name": _class_name(slug),
        "TODO": TODO,
        "smoke_budget": SMOKE_BUDGET_S,
        "default_budget": DEFAULT_BUDGET_S,
    }
    package = f"src/neurips26/methods/{slug}"
    templates = {
        f"{package}/__init__.py": _INIT,
        f"{package}/config.py": _CONFIG,
        f"{package}/core.py": _CORE,
        f"{package}/integration.py": _INTEGRATION,
        f"{package}/baselines.py": _BASELINES,
        f"{package}/conformance.py": _CONFORMANCE,
        f"{package}/experiment.py": _EXPERIMENT,
        f"{package}/README.md": _README,
        f"src/neurips26/papers/{slug}.md": _PAPER,
        f"tests/methods/{slug}/__init__.py": "",
        f"tests/methods/{slug}/test_{slug}.py": _TEST,
    }
    return {path: Template(text).substitute(values) for path, text in templates.items()}


def check_slug(slug: str, root: Path) -> None:
    """A new slug is a lowercase identifier that names no method yet (folder or registry line)."""
    if not _SLUG.fullmatch(slug) or keyword.iskeyword(slug):
        raise ValueError(f"slug must be lowercase letters and digits, starting with a letter; got {slug!r}")
    if (root / "src" / "neurips26" / "methods" / slug).exists():
        raise ValueError(f"slug {slug!r} exists: src/neurips26/methods/{slug}/ is already there")
    if f'_M(\n        "{slug}",' in (root / "src" / "neurips26" / "registry.py").read_text():
        raise ValueError(f"slug {slug!r} is already registered in src/neurips26/registry.py")


def register(slug: str, root: Path) -> None:
    """Insert the method's ``MethodSpec`` line as the last entry of ``registry.METHODS``."""
    registry = root / "src" / "neurips26" / "registry.py"
    text = registry.read_text()
    if text.count(_REGISTRY_END) != 1:
        raise ValueError(
            f"{registry}: cannot find the end of METHODS (expected one '){_REGISTRY_END[2:]!r}')"
        )
    entry = Template(_REGISTRY_ENTRY).substitute(slug=slug, TODO=TODO, default_budget=DEFAULT_BUDGET_S)
    registry.write_text(text.replace(_REGISTRY_END, "\n" + entry.rstrip("\n") + _REGISTRY_END))


def write_method(slug: str, root: Path) -> list[Path]:
    """Write the skeleton of method ``slug`` into the source checkout at ``root`` and register it.

    Returns the written files. Raises ``ValueError`` (naming the slug) when the slug is malformed or taken,
    and ``FileNotFoundError`` when ``root`` is not a source checkout.
    """
    root = Path(root)
    if not (root / "src" / "neurips26" / "registry.py").is_file():
        raise FileNotFoundError(
            f"root {str(root)!r} holds no src/neurips26/registry.py: not a source checkout"
        )
    check_slug(slug, root)
    written = []
    for relative, text in _files(slug).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    register(slug, root)
    return written


def _default_root() -> Path:
    """The checkout this package runs from (an editable install): ``<root>/src/neurips26``."""
    return Path(__file__).resolve().parents[2]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("slug", help="the new method's folder name (lowercase letters and digits)")
    parser.add_argument(
        "--root", type=Path, default=None, help="the source checkout to write into (default: this package's)"
    )


def main(args: argparse.Namespace) -> int:
    root = args.root if args.root is not None else _default_root()
    try:
        written = write_method(args.slug, root)
    except (ValueError, FileNotFoundError) as exc:
        print(f"neurips26 new: error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path.relative_to(root))
    print(
        f"registered {args.slug!r} in src/neurips26/registry.py. Next: fill in every {TODO} marker, declare "
        f"IDEAS and CONFORMANCE, then `pytest tests/methods/{args.slug}` (it fails until you have)."
    )
    return 0
