"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs -- transformers quantizer.

Registers ``quant_method="scalebits"`` with transformers (on import of :mod:`neurips26.methods.scalebits`),
so that ``AutoModelForCausalLM.from_pretrained(folder)`` of a folder written by
:func:`~neurips26.methods.scalebits.persistence.save_quantized` swaps the saved packed layers in before the
weights load. Without this import transformers only warns that it does not know the method and loads a
stock model with random weights in the quantized layers: load such folders with ``load_quantized``.
"""

from __future__ import annotations

from typing import Any

from transformers.quantizers import HfQuantizer, register_quantization_config, register_quantizer
from transformers.quantizers.auto import AUTO_QUANTIZATION_CONFIG_MAPPING, AUTO_QUANTIZER_MAPPING
from transformers.utils.quantization_config import QuantizationConfigMixin

from neurips26.methods.scalebits.persistence import (
    FORMAT_VERSION,
    QUANT_METHOD,
    install_packed_layers,
    layer_specs,
)

__all__ = ["ScaleBitsHfQuantizer", "ScaleBitsQuantizationConfig"]


class ScaleBitsQuantizationConfig(QuantizationConfigMixin):
    """The ``quantization_config`` of a saved ScaleBITS model: the packed layers' specs (no values)."""

    def __init__(
        self, layers: dict[str, dict[str, Any]], format_version: int = FORMAT_VERSION, **_: Any
    ) -> None:
        self.quant_method = QUANT_METHOD
        self.format_version = format_version
        self.layers = layers
        layer_specs(self.to_dict())  # checks the method and the format version


class ScaleBitsHfQuantizer(HfQuantizer):
    """Loads pre-quantized ScaleBITS checkpoints (quantizing inside ``from_pretrained`` is not offered:
    ScaleBITS needs calibration data, use ``quantize_and_report``)."""

    requires_calibration = True

    def _process_model_before_weight_loading(self, model: Any, **kwargs: Any) -> None:
        install_packed_layers(model, layer_specs(self.quantization_config.to_dict()))

    def _process_model_after_weight_loading(self, model: Any, **kwargs: Any) -> Any:
        return model

    def is_serializable(self, safe_serialization: Any = None) -> bool:
        return True

    @property
    def is_trainable(self) -> bool:
        return False


# registering twice (a reloaded module) would raise in transformers
if QUANT_METHOD not in AUTO_QUANTIZATION_CONFIG_MAPPING:
    register_quantization_config(QUANT_METHOD)(ScaleBitsQuantizationConfig)
if QUANT_METHOD not in AUTO_QUANTIZER_MAPPING:
    register_quantizer(QUANT_METHOD)(ScaleBitsHfQuantizer)
