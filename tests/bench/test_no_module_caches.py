"""Shared work of an experiment is a setup stage, never a module-level cache (issue 42)."""

from pathlib import Path

import pytest

import neurips26.methods
from neurips26.testing.caches import module_caches

METHODS_DIR = Path(neurips26.methods.__file__).parent
EXPERIMENTS = sorted(METHODS_DIR.glob("*/experiment.py"))


def test_every_method_folder_is_scanned() -> None:
    folders = {p.parent for p in METHODS_DIR.glob("*/__init__.py")}
    assert EXPERIMENTS and {p.parent for p in EXPERIMENTS} == folders


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda path: path.parent.name)
def test_experiment_has_no_module_level_cache(path: Path) -> None:
    found = module_caches(path)
    assert not found, "move this shared work into Experiment(setup=...): " + "; ".join(found)


# Module-level state a method's other modules may keep, each with why it is not shared per-seed work: pure
# memos of small values (same result whatever the order of the cells), registries filled at import, and
# state of processes that are not the experiment's workers. Anything else found there fails.
ALLOWED = {
    "dacs/core.py": {"_ratio_problem()": "a compiled cvxpy problem per matrix shape (pure, 32 shapes)"},
    "scalebits/integration.py": {"_HANDLERS": "the quantize_and_report handler registry, filled at import"},
    "semanticdialect/codec.py": {"_lut_cached()": "a small decode table per dialect set (pure)"},
    "solar/hardware.py": {
        "_PROCESS_SPECS": "this process's calibration of the machine (peaks only rise; issue #50)",
        "_LAST_REFRESH": "when this process last re-calibrated a spec (rate limit of re-calibration)",
        "_SUPERSEDED": "a calibration this process replaced -> its replacement (same machine, same process)",
    },
    "solar/bounds.py": {"search_tiling()": "the tile search per (m, n, k, capacity): pure, bounded (4096)"},
    "solar/rules.py": {"_RULES": "the rule registry, filled at import"},
    "solexecbench/driver.py": {
        "_GC_ATTEMPTS": "state of the sandbox's driver process, not of a worker",
        "_NETWORK_ATTEMPTS": "state of the sandbox's driver process, not of a worker",
    },
    "solexecbench/harness.py": {"_SOL_CACHE": "T_SOL of a workload, a pure analysis of its definition"},
    "solexecbench/solutions.py": {
        "SIGNATURES": "the solution table, filled at import",
        "LADDER": "the solution ladder, filled at import",
    },
    "spcacw/engine.py": {"_CONTRASTS": "a constant contrast matrix per (batch, groups) (pure)"},
    "spcacw/flower_app.py": {"federation()": "the Flower app's data in its own process, not the experiment"},
    "spectralkv/duplicates.py": {"_fixed_directions()": "fixed seed-0 random directions per shape (pure)"},
    "spectralkv/integration.py": {"_future_mask()": "a constant causal mask per (window, device) (pure, 8)"},
    "spectralkv/real_tasks.py": {
        "prose_lines()": "the interpreter's own help-topic text, read once (immutable, pure)",
        "code_lines()": "the interpreter's own standard-library source lines, read once (immutable, pure)",
    },
    "stparopt/frontend.py": {"_parser()": "the tree-sitter parser object"},
    "stparopt/profiler.py": {"_parsed()": "a parsed C function per source (pure, bounded)"},
    "styleroute/data.py": {
        "_raw_content()": "a decoded bundled image (pure, a few files)",
        "_style_cached()": "a decoded bundled style image per size (pure, a few files)",
        "_painting_cached()": "a decoded painting from Debian's opencv-doc per size (read-only file)",
    },
    "poes/wordnet_tasks.py": {
        "read_synsets()": "WordNet's data files parsed per (pos, folder) (read-only files)",
        "familiar_first_senses()": "WordNet's index files parsed per (pos, folder) (read-only files)",
    },
    # a candidate for the setup stage: the real profile times both prompt lengths of a model on one load
    "solar/real_lm.py": {"real_model()": "one real LM's weights (1.1 or 2.5 GB), maxsize 1"},
    "styleroute/metrics.py": {"_EVAL_BANK": "the fixed seeded evaluation conv bank (built once)"},
    "styleroute/router.py": {"_STYLE_TILE_CACHE": "a style image's Lab tiles (pure, one per style)"},
    # Loaders and generators moved here from data/ and zoo/ (issue 42 item 6), where this scan did not look:
    # memos of files read from the machine or of pure functions of their arguments, unchanged by the move.
    "samhybrid/dynamics.py": {"make_splits()": "ODE trajectory splits, a pure function of its arguments"},
    "sast/clip_targets.py": {"_photos()": "three bundled scikit-image photos, decoded once (read-only)"},
    "sast/glyph_world.py": {
        "train_fonts()": "the installed DejaVu faces (a directory listing)",
        "_font()": "a PIL font object per (face, size) (read-only files)",
    },
    "sast/miniclip.py": {"_TEXT_ENCODERS": "the frozen committed text encoder per checkpoint path (weights)"},
    "semanticdialect/moving_digits.py": {"digit_bank()": "sklearn's bundled digits, upscaled (read-only)"},
    "semfas/fas_sensors.py": {"lfw_albedo()": "scikit-image's bundled LFW crops, resized (read-only)"},
    "spcacw/fashion_mnist.py": {"load_fashion_mnist()": "the Debian idx files per (root, split) (read-only)"},
    "spcacw/shakespeare.py": {"play_speeches()": "the fetched Gutenberg plays, parsed (read-only file)"},
    "star/aeon_bundled.py": {
        "_classification()": "aeon's bundled series per (name, split) (read-only files)",
        "load_kdd_tsad_135()": "aeon's bundled KDD-TSAD 135 (read-only file)",
        "load_daphnet_s06r02e0()": "aeon's bundled Daphnet excerpt (read-only file)",
    },
    "star/sktime_bundled.py": {"load_mitdb()": "sktime's bundled MIT-BIH excerpt (read-only file)"},
}


def _cache_name(finding: str) -> str:
    what = finding.split(": ", 1)[1]
    return what.split(" on ")[1] if what.startswith("@") else what.split()[1]


def test_other_method_modules_keep_only_caches_listed_with_a_reason() -> None:
    unexplained = []
    for path in sorted(METHODS_DIR.rglob("*.py")):
        relative = path.relative_to(METHODS_DIR).as_posix()
        if path.name == "experiment.py":
            continue
        allowed = ALLOWED.get(relative, {})
        unexplained += [f"{relative}: {f}" for f in module_caches(path) if _cache_name(f) not in allowed]
    assert not unexplained, "a setup stage or a listed reason for: " + "; ".join(unexplained)


def test_every_allowed_cache_still_exists() -> None:
    stale = [
        f"{relative}: {name}"
        for relative, names in ALLOWED.items()
        for name in names
        if name not in {_cache_name(f) for f in module_caches(METHODS_DIR / relative)}
    ]
    assert not stale, f"remove from ALLOWED: {stale}"


def test_the_scanner_finds_decorated_and_mutated_caches_and_spares_constants(tmp_path) -> None:
    source = tmp_path / "experiment.py"
    source.write_text(
        "import functools\n"
        "from functools import cache, lru_cache\n"
        "TABLE = {'a': 1}\n"  # a constant: never mutated
        "_RESULTS: dict[str, int] = {}\n"
        "_SEEN = []\n"
        "_PAIRS = dict()\n"
        "@functools.lru_cache(maxsize=2)\n"
        "def model(name): return name\n"
        "@cache\n"
        "def data(seed): return seed\n"
        "@lru_cache\n"
        "def other(seed): return seed\n"
        "_SHARED = {}\n"
        "class Bench:\n"
        "    def __init__(self):\n"
        "        self.cache = _SHARED\n"
        "def run(key):\n"
        "    _SEEN.append(key)\n"
        "    _PAIRS.setdefault(key, 0)\n"
        "    if key not in _RESULTS:\n"
        "        _RESULTS[key] = TABLE['a']\n"
        "    return _RESULTS[key]\n"
    )
    found = module_caches(source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "module-level _RESULTS is mutated (a cache)",
        "module-level _SEEN is mutated (a cache)",
        "module-level _PAIRS is mutated (a cache)",
        "@lru_cache on model()",
        "@cache on data()",
        "@lru_cache on other()",
        "module-level _SHARED is aliased in a function (a cache)",
    ]
