"""The method's own config: what a user passes to ``SAMHybrid``; each default says where it comes from.

The experiment (data, model sizes, baselines' knobs) has its own config in ``experiment.py``, which holds
this one as its field ``method``: ``neurips26 run samhybrid --set method.rho=0.5``.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_positive

ASCENTS = ("gradient", "random")


@dataclass
class SAMHybridConfig:
    """Settings of ``SAMHybrid`` (``SAMHybrid.from_config(params, base_optimizer, config, lr=...)``)."""

    rho: float = param(
        0.2,
        "ours: lowest validation MSE over {0.05,0.1,0.2,0.5}, benchmarks/samhybrid/samhybrid_select_rho.py",
    )
    rho_physics: float = param(0.0, "paper (as we read 'adapt SAM to hybrids'): the physics is not perturbed")
    adaptive: bool = param(False, "SAM (Foret et al. 2021); True gives ASAM (Kwon et al. 2021)")
    ascent: str = param(
        "gradient",
        "SAM: e = rho g/||g||; 'random' (a random direction of the same radius) is the negative control",
    )
    perturb_eps: float = param(1e-12, "SAM reference code: guards ||g|| = 0")

    def __post_init__(self) -> None:
        check_positive("rho", self.rho, allow_zero=True)
        check_positive("rho_physics", self.rho_physics, allow_zero=True)
        check_positive("perturb_eps", self.perturb_eps)
        check_choice("ascent", self.ascent, ASCENTS)
        if not isinstance(self.adaptive, bool):
            raise TypeError(f"adaptive must be a bool, got {self.adaptive!r}")
