"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs (arXiv 2602.17698)."""

import contextlib

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
    quantize_and_report,
    register_quantize_handler,
    reorder_and_allocate,
)
from neurips26.methods.scalebits.packed import ScaleBitsLinear
from neurips26.methods.scalebits.persistence import check_no_packed_weights, load_quantized, save_quantized
from neurips26.methods.scalebits.sfmp import SFMPConfig
from neurips26.methods.scalebits.slim import SliMLLMConfig

#: Ecosystem families the public API conforms to (``neurips26.testing.conformance``): ScaleBITS through its
#: model-level verb quantize_and_report (a global allocation no torchao handler sees), and the uniform RTN
#: baseline through torchao's own quantize_ (a registered per-module handler).
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("quantizer", "neurips26.methods.scalebits.conformance:tiny_quantizer"),
    ("quantizer", "neurips26.methods.scalebits.conformance:tiny_rtn_torchao"),
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" section says how each is switched off.
IDEAS: dict[str, str] = {
    "sensitivity is measured on the current quantized model": (
        "tests/methods/scalebits/test_scalebits_ideas.py::test_idea_dynamic_sensitivity_is_measured_on_the_quantized_model"
    ),
    "the greedy lowers the least sensitive tiles first": (
        "tests/methods/scalebits/test_scalebits_ideas.py::test_idea_greedy_lowers_the_least_sensitive_tiles_first"
    ),
    "channels are scored from both sides of a fold": (
        "tests/methods/scalebits/test_scalebits_ideas.py::test_idea_bidirectional_reordering_gathers_the_consumer_side"
    ),
    "the quantizer folds the reordering into the model": (
        "tests/methods/scalebits/test_scalebits_ideas.py::test_idea_quantizer_folds_the_reordering"
    ),
}

__all__ = [
    "CONFORMANCE",
    "IDEAS",
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
    "check_no_packed_weights",
    "fold_reordering",
    "layer_average_bits",
    "load_quantized",
    "pack_bits",
    "plot_bit_heatmaps",
    "quantize_",
    "quantize_and_report",
    "quantize_random",
    "register_quantize_handler",
    "reorder_and_allocate",
    "save_quantized",
    "sensitivity_drift",
    "unpack_bits",
]

# the quant extra: lets transformers' from_pretrained restore saved packed layers (quant_method "scalebits");
# without transformers there is no from_pretrained to serve
with contextlib.suppress(ImportError):
    import neurips26.methods.scalebits.hf_quantizer  # noqa: F401
