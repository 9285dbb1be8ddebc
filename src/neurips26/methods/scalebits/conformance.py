"""Tiny instances for the conformance matrix (``neurips26.testing.conformance``)."""

from __future__ import annotations

import torch

from neurips26.methods.scalebits.config import ScaleBitsConfig
from neurips26.methods.scalebits.integration import QuantizationReport, quantize_and_report
from neurips26.testing.conformance.quantizer import QuantizerCase


def _tiny_model() -> torch.nn.Module:
    from neurips26.zoo.builders import tiny_llama

    return tiny_llama(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1)


def tiny_quantizer() -> QuantizerCase:
    """ScaleBITS through its own verb: the allocation is global over layers, so no torchao handler fits."""
    calibration = torch.randint(0, 256, (4, 16), generator=torch.Generator().manual_seed(0))
    return QuantizerCase(
        build_model=_tiny_model,
        config=ScaleBitsConfig(avg_bits=3.0, tile=(16, 32), group_size=32),
        inputs=(calibration,),
        verb=quantize_and_report,
        verb_kwargs={"calibration": calibration},
        returns=QuantizationReport,
        filter_in_config=True,
    )


def tiny_rtn_torchao() -> QuantizerCase:
    """The uniform RTN baseline through torchao's own ``quantize_`` (a per-module handler fits it)."""
    from neurips26.methods.scalebits.baselines import UniformRTNConfig

    tokens = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    return QuantizerCase(_tiny_model, UniformRTNConfig(bits=3, tile=(16, 32), group_size=32), (tokens,))
