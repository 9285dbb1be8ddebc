"""Configuration of the SpectralKV experiment; each default says where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_int

MODELS = ("tiny-llama", "tiny-qwen3")
PROBE_KINDS = ("kv", "passkey", "mqar")


@dataclass
class SpectralKVConfig:
    """Data, context and press conventions shared by SpectralKV and every baseline."""

    model: str = param("tiny-llama", "issue: the zoo's tiny-llama (GQA Llama); tiny-qwen3 as a second model")
    keep_ratio: float = param(0.125, "issue: keep ratios 50/25/12.5/6.25% (the grid); 12.5% alone")
    context_tokens: int = param(2048, "issue: 1k/2k contexts; 2k for text, the PG-19 analogue")
    continuation_tokens: int = param(
        64, "ours: 64 scored tokens after the compressed prefix (4 x 64 per cell)"
    )
    text_batch: int = param(4, "ours: held-out windows per cell (one batched prefill)")
    redundancy_copies: int = param(
        4, "research notes: 2-4x repeated paragraphs; 4 copies of a 512-token passage"
    )
    probe_kinds: list[str] = param(["kv", "passkey", "mqar"], "issue: key->value, passkey and MQAR")
    probe_contexts: list[int] = param([2048], "issue: 1k/2k; the default profile scores 2k only")
    probe_samples: int = param(4, "ours: probes per kind and context per cell (decoded from the cache)")
    window_size: int = param(32, "SnapKV paper: a 32-token observation window, shared by every press")
    kernel_size: int = param(5, "kvpress SnapKV default pooling kernel, shared")
    n_sink: int = param(4, "StreamingLLM paper: 4 sinks, shared by every sink-keeping press")
    gamma: float = param(1.0, "ours: layer budgets proportional to concentration")
    calibration_prompts: int = param(4, "ours: static profile from 4 train-split windows")
    calibration_tokens: int = param(
        1024, "ours: 1k-token calibration windows (shorter than the test contexts)"
    )

    def __post_init__(self) -> None:
        check_choice("model", self.model, MODELS)
        if isinstance(self.keep_ratio, bool) or not 0 < self.keep_ratio <= 1:
            raise ValueError(f"keep_ratio must be in (0, 1], got {self.keep_ratio!r}")
        for name in (
            "context_tokens",
            "continuation_tokens",
            "text_batch",
            "redundancy_copies",
            "window_size",
        ):
            check_int(name, getattr(self, name))
        for name in ("kernel_size", "calibration_prompts", "calibration_tokens"):
            check_int(name, getattr(self, name))
        check_int("probe_samples", self.probe_samples, 0)
        check_int("n_sink", self.n_sink, 0)
        for kind in self.probe_kinds:
            check_choice("probe_kinds", kind, PROBE_KINDS)
        if any(not isinstance(c, int) or c < 128 for c in self.probe_contexts):
            raise ValueError(f"probe_contexts must be integers >= 128, got {self.probe_contexts!r}")
        if self.context_tokens % self.redundancy_copies:
            raise ValueError(
                f"redundancy_copies must divide context_tokens, got {self.redundancy_copies} "
                f"and {self.context_tokens}"
            )
        if self.continuation_tokens > self.context_tokens // self.redundancy_copies:
            raise ValueError("continuation_tokens must not exceed the repeated passage (context / copies)")
        if self.context_tokens <= self.n_sink + self.window_size:
            raise ValueError("context_tokens must exceed n_sink + window_size")

    @property
    def compression_ratio(self) -> float:
        """kvpress's convention: the fraction removed."""
        return round(1.0 - self.keep_ratio, 10)
