"""The method's own config: what a user passes to ``fake_quantize_dit_(model, SemanticDialectConfig())``."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_in_range, check_int

SELECTIONS = ("lut", "brute_force", "random")
CLUSTERINGS = ("patch", "kmeans", "random")
SALIENCY = ("attention", "random")


@dataclass
class SemanticDialectConfig:
    """Settings of SemanticDialect's W4A4 fake quantization (see ``fake_quantize_dit_``)."""

    n_dialects: int = param(
        64, "paper: the LUTs let the book grow; DialectFP4's 16 + 48 of ours (Formatbook.extended)"
    )
    dialects: tuple | None = param(None, "issue: user-defined books allowed; None uses n_dialects")
    block_size: int = param(32, "BlockDialect / MX: blocks of 32 with one shared exponent")
    intermediate_bits: int = param(5, "research note §4.1: 5-bit quarter units (delta = 0.25)")
    selection: str = param("lut", "paper: LUT selection; 'brute_force' = BlockDialect-style exact errors")
    decomposition_ratio: float = param(0.1, "ours: top 10% of tokens by attention mass received")
    salient_selection: str = param("attention", "paper: attention-guided; 'random' is a negative control")
    seda: bool = param(True, "paper: semantic-aware dialect assignment")
    seda_k: int = param(8, "ours: 8-dialect sub-books of the 64, 3-bit ids per block")
    seda_clustering: str = param("patch", "issue: one patch across frames ('kmeans' on block inputs)")
    seda_clusters: int = param(8, "ours: k-means clusters per video (seda_clustering='kmeans')")
    tokens_per_frame: int = param(64, "tiny-vdit: (32/4)^2 patches per frame (patch clustering, report)")
    quantize_weights: bool = param(True, "issue: W4")
    quantize_activations: bool = param(True, "issue: A4, online in every linear layer")
    quantize_attention: bool = param(True, "issue: both attention products (QK^T and PV)")
    seed: int = param(0, "ours: k-means and the random controls")

    def __post_init__(self) -> None:
        check_int("n_dialects", self.n_dialects)
        check_int("block_size", self.block_size)
        check_int("seda_k", self.seda_k)
        check_int("seda_clusters", self.seda_clusters)
        check_int("tokens_per_frame", self.tokens_per_frame)
        check_int("intermediate_bits", self.intermediate_bits, minimum=5)
        check_in_range("decomposition_ratio", self.decomposition_ratio, 0.0, 1.0)
        check_choice("selection", self.selection, SELECTIONS)
        check_choice("seda_clustering", self.seda_clustering, CLUSTERINGS)
        check_choice("salient_selection", self.salient_selection, SALIENCY)
        size = len(self.dialects) if self.dialects is not None else self.n_dialects
        if self.seda and self.seda_k > size:
            raise ValueError(f"seda_k={self.seda_k} must be <= the formatbook size |F|={size}")

    def formatbook(self):  # -> Formatbook (import kept local: config stays light)
        """The formatbook these settings describe."""
        from neurips26.methods.semanticdialect.formatbook import Formatbook

        if self.dialects is not None:
            return Formatbook(tuple(tuple(d) for d in self.dialects))
        return Formatbook.extended(self.n_dialects)
