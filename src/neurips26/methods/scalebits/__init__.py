"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs (arXiv 2602.17698)."""

from neurips26.methods.scalebits.baselines import UniformRTNConfig, quantize_random
from neurips26.methods.scalebits.config import ScaleBitsConfig, ScaleBitsExperimentConfig
from neurips26.methods.scalebits.core import BitLedger, batched_greedy, pack_bits, unpack_bits
from neurips26.methods.scalebits.explain import layer_average_bits, plot_bit_heatmaps, sensitivity_drift
from neurips26.methods.scalebits.integration import (
    QuantizationReport,
    allocate_bits,
    apply_allocation,
    calibration_statistics,
    fold_reordering,
    quantize_,
    register_quantize_handler,
    reorder_and_allocate,
)
from neurips26.methods.scalebits.packed import ScaleBitsLinear
from neurips26.methods.scalebits.sfmp import SFMPConfig
from neurips26.methods.scalebits.slim import SliMLLMConfig

__all__ = [
    "BitLedger",
    "QuantizationReport",
    "SFMPConfig",
    "ScaleBitsConfig",
    "ScaleBitsExperimentConfig",
    "ScaleBitsLinear",
    "SliMLLMConfig",
    "UniformRTNConfig",
    "allocate_bits",
    "apply_allocation",
    "batched_greedy",
    "calibration_statistics",
    "fold_reordering",
    "layer_average_bits",
    "pack_bits",
    "plot_bit_heatmaps",
    "quantize_",
    "quantize_random",
    "register_quantize_handler",
    "reorder_and_allocate",
    "sensitivity_drift",
    "unpack_bits",
]
