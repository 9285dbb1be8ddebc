"""SnapMLA's own config: what a user chooses for the decode pipeline; each default says where it comes from.

``SnapMLAConfig().recipe()`` is the :class:`DecodeRecipe` that ``use_latent_mla(model, recipe)`` runs. The
experiment (model, context, grid) has its own config in ``experiment.py``, which holds this one as its field
``method``: ``neurips26 run snapmla --set method.block_size=128``.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice
from neurips26.methods.snapmla.cache_format import FORMATS
from neurips26.methods.snapmla.pipeline import P_MODES, QUERY_FORMATS, SNAPMLA, DecodeRecipe

SCALE_MODES = ("float", "pow2")


@dataclass
class SnapMLAConfig:
    """The SnapMLA decode pipeline; switching one field off gives the paper's ablations."""

    kv_format: str = param(
        SNAPMLA.kv_format, "paper: RoPE-aware per-token FP8 c_KV with k_R kept in BF16 (644 B rows)"
    )
    query_format: str = param(
        SNAPMLA.query_format, "paper: Fused-Q-Quant, per-row FP8 q~ with q_R aligned into its domain"
    )
    p_mode: str = param(SNAPMLA.p_mode, "paper: block-wise dynamic FP8 P with the V scales fused")
    block_size: int = param(SNAPMLA.block_size, "paper: P is quantized per 64-token block")
    scale_mode: str = param(SNAPMLA.scale_mode, "paper: one fp32 scale per token (644 B rows)")
    fp8_enabled: bool = param(True, "ours: False makes every FP8 cast the identity (degenerate test)")

    def __post_init__(self) -> None:
        check_choice("kv_format", self.kv_format, tuple(FORMATS))
        check_choice("query_format", self.query_format, QUERY_FORMATS)
        check_choice("p_mode", self.p_mode, P_MODES)
        check_choice("scale_mode", self.scale_mode, SCALE_MODES)
        if isinstance(self.block_size, bool) or not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive integer, got {self.block_size!r}")
        if not isinstance(self.fp8_enabled, bool):
            raise TypeError(f"fp8_enabled must be a bool, got {self.fp8_enabled!r}")

    def recipe(self, name: str = "snapmla", n_tiles: int = 4) -> DecodeRecipe:
        """The decode recipe these settings describe (``n_tiles`` matters to the ``fp8_tile`` format only)."""
        return DecodeRecipe(
            name,
            self.kv_format,
            self.query_format,
            self.p_mode,  # type: ignore[arg-type]
            block_size=self.block_size,
            n_tiles=n_tiles,
            scale_mode=self.scale_mode,  # type: ignore[arg-type]
            fp8_enabled=self.fp8_enabled,
        )
