"""STParOpt's own config: what a user passes to :func:`analyze` / :func:`translate`.

Only the abstract is public; every default below is ours unless it says "paper". The experiment's
config (data sizes, baselines) holds this one as its field ``method``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_int, check_positive

FRONTENDS = ("tree-sitter", "pycparser")


@dataclass
class STParOptConfig:
    """Settings of the static branch, the execution profiler, the fusion gate and the CUDA generator."""

    hidden: int = param(48, "ours: node/site embedding width; 48 trains in seconds on one core")
    layers: int = param(3, "ours: 3 message-passing rounds reach a subscript's array, index and loop var")
    heads: int = param(4, "ours: cross-attention heads (static nodes query access-site tokens)")
    tau: float = param(
        0.35,
        "ours: entropy threshold (nats, max ln 2 = 0.69); profile only when H_s > tau "
        "(paper: 'up-weights dynamic evidence when the static entropy is high')",
    )
    alpha: float = param(12.0, "ours: gate slope; g = sigmoid(alpha (H_s - tau)) (paper: entropy-guided)")
    epochs: int = param(30, "ours: enough for the static loss to plateau on ~1k loops")
    lr: float = param(3e-3, "ours: Adam rate that trains every learned system stably")
    batch_size: int = param(64, "ours")
    profile_trip: int = param(
        512, "ours: iterations of each profiling run (inputs disjoint from labelling inputs)"
    )
    profile_runs: int = param(2, "ours: profiling runs on fresh inputs per loop")
    reservoir: int = param(32, "ours: reservoir size per access site (memory independent of trip count)")
    shadow_capacity: int = param(
        4096, "ours: sampled shadow-memory slots; the sampling rate halves when it fills"
    )
    block_size: int = param(128, "ours: CUDA threads per block of generated kernels")
    frontend: str = param("tree-sitter", "issue: tree-sitter-c; pycparser after gcc -E as second frontend")

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "epochs", "batch_size", "profile_trip", "profile_runs"):
            check_int(name, getattr(self, name))
        check_int("reservoir", self.reservoir, minimum=2)
        check_int("shadow_capacity", self.shadow_capacity, minimum=64)
        check_int("block_size", self.block_size, minimum=1)
        if self.block_size & (self.block_size - 1):
            raise ValueError(f"block_size must be a power of two (tree reduction), got {self.block_size}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} must be divisible by heads={self.heads}")
        if math.isnan(self.tau):
            raise ValueError("tau must be a number (use float('inf') to shut the gate), got nan")
        check_positive("alpha", self.alpha)
        check_positive("lr", self.lr)
        check_choice("frontend", self.frontend, FRONTENDS)
