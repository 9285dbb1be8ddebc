"""The presses SpectralKV is compared with: kvpress's own implementations, with shared conventions.

Every baseline is a library adapter (nothing re-implemented): kvpress 0.5.5's ``StreamingLLMPress``,
``ObservedAttentionPress`` (H2O), ``SnapKVPress``, ``PyramidKVPress``, ``AdaKVPress(SnapKVPress)``
(Ada-SnapKV), ``KeyDiffPress``, ``LeverageScorePress``, ``CURPress``, ``TOVAPress`` and ``RandomPress``.

Shared conventions: every window-based press observes the same ``window_size`` last prompt tokens with the
same pooling kernel, every sink-based press keeps the same ``n_sink`` first tokens, and every press receives
the same ``compression_ratio``, which the budget ledger turns into the same nominal token budget.
H2O needs the attention matrix, so its model runs with eager attention (``attention``); AdaKV needs a
non-eager kernel (kvpress masks evicted keys inside the attention function).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neurips26.methods.spectralkv.config import SpectralKVPressConfig
from neurips26.methods.spectralkv.ledger import BudgetProfile

__all__ = ["BASELINES", "PressRecipe", "make_baseline"]


@dataclass(frozen=True)
class PressRecipe:
    """How one system builds its press for a compression ratio (None: the full cache)."""

    name: str
    build: Callable[[float, int, BudgetProfile | None], Any]  # (ratio, seed, profile) -> press | None
    attention: str = "sdpa"  # transformers attention implementation the press needs
    description: str = ""
    needs_profile: bool = False

    def press(self, compression_ratio: float, seed: int = 0, profile: BudgetProfile | None = None) -> Any:
        """A fresh press for one prefill setting (``profile`` only for the static variant)."""
        return self.build(compression_ratio, seed, profile)


def _kvpress() -> Any:
    import kvpress

    return kvpress


def _baseline_builders(
    window_size: int, kernel_size: int, n_sink: int
) -> dict[str, tuple[Callable, str, str]]:
    kv = _kvpress

    def snapkv(r: float, s: int) -> Any:
        return kv().SnapKVPress(compression_ratio=r, window_size=window_size, kernel_size=kernel_size)

    return {
        "full-cache": (lambda r, s: None, "sdpa", "no compression (the ceiling)"),
        "streamingllm": (
            lambda r, s: kv().StreamingLLMPress(compression_ratio=r, n_sink=n_sink),
            "sdpa",
            "StreamingLLM (Xiao et al. 2024): sinks + recent tokens",
        ),
        "h2o": (
            lambda r, s: kv().ObservedAttentionPress(compression_ratio=r),
            "eager",
            "H2O (Zhang et al. 2023): accumulated observed attention (kvpress ObservedAttentionPress)",
        ),
        "snapkv": (snapkv, "sdpa", "SnapKV (Li et al. 2024): uniform budgets, window attention top-k"),
        "pyramidkv": (
            lambda r, s: kv().PyramidKVPress(
                compression_ratio=r, window_size=window_size, kernel_size=kernel_size
            ),
            "sdpa",
            "PyramidKV (Cai et al. 2024): linearly decreasing layer budgets, SnapKV scores",
        ),
        "adakv": (
            lambda r, s: kv().AdaKVPress(snapkv(r, s)),
            "sdpa",
            "Ada-SnapKV (Feng et al. 2024): head-wise budgets over SnapKV scores",
        ),
        "keydiff": (
            lambda r, s: kv().KeyDiffPress(compression_ratio=r),
            "sdpa",
            "KeyDiff (Park et al. 2025): key diversity (distance from the mean key)",
        ),
        "leverage": (
            lambda r, s: kv().LeverageScorePress(compression_ratio=r),
            "sdpa",
            "leverage scores of the keys (kvpress LeverageScorePress)",
        ),
        "cur": (
            lambda r, s: kv().CURPress(compression_ratio=r, num_sinks=n_sink),
            "sdpa",
            "CUR decomposition scores of keys and values (kvpress CURPress)",
        ),
        "tova": (
            lambda r, s: kv().TOVAPress(compression_ratio=r),
            "sdpa",
            "TOVA (Oren et al. 2024): last-token attention",
        ),
        "random": (
            lambda r, s: kv().RandomPress(compression_ratio=r, seed=s),
            "sdpa",
            "uniformly random eviction",
        ),
    }


BASELINES = (
    "full-cache",
    "streamingllm",
    "h2o",
    "snapkv",
    "pyramidkv",
    "adakv",
    "keydiff",
    "leverage",
    "cur",
    "tova",
    "random",
)


def make_baseline(name: str, conventions: SpectralKVPressConfig | None = None) -> PressRecipe:
    """The recipe of baseline ``name`` (one of :data:`BASELINES`) under the shared conventions.

    ``conventions`` supplies the window, pooling kernel and sinks every press shares with SpectralKV
    (``window_size``, ``kernel_size``, ``n_sink``); ``None`` takes SpectralKV's defaults.
    """
    c = SpectralKVPressConfig() if conventions is None else conventions
    builders = _baseline_builders(c.window_size, c.kernel_size, c.n_sink)
    if name not in builders:
        raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    build, attention, description = builders[name]
    return PressRecipe(name, lambda r, s, p: build(r, s), attention, description)
