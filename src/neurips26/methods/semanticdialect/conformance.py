"""Tiny instances for the conformance matrix (``neurips26.testing.conformance``)."""

from __future__ import annotations

import torch

from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.integration import fake_quantize_dit_
from neurips26.testing.conformance.quantizer import QuantizerCase


def _tiny_dit() -> torch.nn.Module:
    from neurips26.methods.semanticdialect.tiny_vdit import TinyVDiT, TinyVDiTConfig

    torch.manual_seed(0)
    return TinyVDiT(TinyVDiTConfig(frames=2, size=16, patch=4, dim=64, heads=2, blocks=1))


def tiny_quantizer() -> QuantizerCase:
    """SemanticDialect through its own in-place verb: its layers share a model-wide token state."""
    generator = torch.Generator().manual_seed(1)
    inputs = (torch.randn(2, 2, 16, 16, generator=generator), torch.full((2,), 700.0), torch.tensor([3, 17]))
    return QuantizerCase(
        build_model=_tiny_dit,
        config=SemanticDialectConfig(tokens_per_frame=16),
        inputs=inputs,
        verb=fake_quantize_dit_,
    )
