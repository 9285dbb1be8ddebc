"""Tiny instances for the conformance matrix (``neurips26.testing.conformance``)."""

from __future__ import annotations

from neurips26.methods.spectralkv.integration import SpectralKVPress


def tiny_press() -> SpectralKVPress:
    """The default press (entropy budgets, spectral coreset): the kvpress press contract."""
    return SpectralKVPress(compression_ratio=0.5)
