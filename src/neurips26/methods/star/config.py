"""STAR's configuration: what a user passes to ``inject_star`` (and ``STARDetector``)."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param

__all__ = ["FINE_TUNING", "FineTuningDefaults", "STARConfig"]


@dataclass(frozen=True)
class STARConfig:
    """State-aware adapter settings (arXiv 2510.16014; the abstract names the modules, sizes are ours).

    The three modules can be switched off one at a time (the paper's ablations): ``use_memory`` (the
    Identity-guided State Encoder's memory read), ``use_conditioning`` (the adapter's state-dependent
    gate; off, it is a static low-rank adapter), ``use_matching`` (the Numeral-State Matching head and
    its NLL term).
    """

    target_modules: tuple[str, ...] = param(
        ("q", "v", "fc2"), "ours: LoRA's usual q/v plus the MLP output; keeps trainables < 10% of tiny-tsfm"
    )
    rank: int = param(4, "ours: LoRA-style small rank; the issue caps trainables at 10% of the backbone")
    alpha: float = param(8.0, "ours: LoRA's alpha = 2 x rank convention (scale alpha / rank)")
    state_dim: int = param(16, "ours: width of the identity/value embeddings and memory slots")
    memory_slots: int = param(16, "ours: M slots of the learnable state memory")
    context_dim: int = param(32, "ours: width of the per-patch state context c")
    beta: float = param(
        1.0, "ours: weight of the normalised state NLL in the score (both terms scaled alike)"
    )
    matching_weight: float = param(1.0, "ours: weight of the NLL loss next to the reconstruction loss")
    use_memory: bool = param(True, "paper: Identity-guided State Encoder reads a learnable state memory")
    use_conditioning: bool = param(True, "paper: Conditional Bottleneck Adapter (state-dependent low rank)")
    use_matching: bool = param(True, "paper: Numeral-State Matching for state-inherent anomalies")

    def __post_init__(self) -> None:
        if isinstance(self.target_modules, str) or not self.target_modules:
            raise ValueError(
                f"target_modules must be a non-empty tuple of linear names, got {self.target_modules!r}"
            )
        object.__setattr__(self, "target_modules", tuple(self.target_modules))
        for name in ("rank", "state_dim", "memory_slots", "context_dim"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"STARConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("alpha", "beta", "matching_weight"):
            if not float(getattr(self, name)) >= 0:
                raise ValueError(f"STARConfig.{name} must be >= 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class FineTuningDefaults:
    """Windowing and fine-tuning shared by STAR and every backbone baseline: one home for each default.

    ``STARDetector``, ``BackboneDetector``, ``PerStateDetector`` and the experiment all default to these,
    so the public API and the published experiment cannot disagree.
    """

    window: int = param(64, "ours: 8 patches of tiny-tsfm")
    n_steps: int = param(250, "ours: fine-tuning optimizer steps (about 15 s on one core)")
    batch_size: int = param(16, "ours: windows per step")
    lr: float = param(1e-2, "ours: adapter learning rate (AdamW); 3e-3 left the matching head undertrained")
    mask_ratio: float = param(0.3, "MOMENT: 30% of patches masked in (pre)training")
    mask_groups: int = param(4, "ours: masked reconstructions averaged per window at scoring")
    stride: int = param(16, "ours: training/scoring window stride (a quarter window)")


FINE_TUNING = FineTuningDefaults()
