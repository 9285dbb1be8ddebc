"""4-bit block formats SemanticDialect is compared with, as fake quantizers of (..., K) tensors.

- ``INT4Quantizer``: symmetric INT4 per group of 32 with torchao's affine primitives
  (``choose_qparams_affine`` / ``quantize_affine`` / ``dequantize_affine``); one fp16 scale per group.
- ``MXFP4Quantizer``: torchao's emulated ``MXTensor.to_mx`` cast (E2M1 elements, E8M0 scale per 32, FLOOR).
- ``NVFP4Quantizer``: torchao's emulated ``NVFP4Tensor.to_nvfp4`` (E2M1 elements, E4M3 scale per 16 and
  an fp32 per-tensor scale).
- ``block_dialect``: BlockDialect (Jang & Tambe, ICML 2025) **re-implemented**: DialectFP4 (16 dialects),
  exact per-dialect errors (brute force), no decomposition, no SeDA.

All pad the last dimension with zeros to a multiple of their block (dropped afterwards) and pass
non-finite values through unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.semantic import SemanticDialectQuantizer, TokenContext

__all__ = ["INT4Quantizer", "MXFP4Quantizer", "NVFP4Quantizer", "block_dialect"]


class _PaddedQuantizer:
    block: int = 32
    bits_per_element: float = 4.0

    def _cast(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, x: torch.Tensor, context: TokenContext | None = None) -> torch.Tensor:
        finite = torch.isfinite(x)
        source = torch.where(finite, x, torch.zeros_like(x)).float()
        rows = source.reshape(-1, x.shape[-1]).contiguous()
        pad = (-rows.shape[-1]) % self.block
        if pad:
            rows = torch.nn.functional.pad(rows, (0, pad))
        out = self._cast(rows)[:, : x.shape[-1]].reshape(x.shape).to(x.dtype)
        return torch.where(finite, out, x)


class INT4Quantizer(_PaddedQuantizer):
    """Symmetric INT4, one scale per group of 32 (torchao affine quantization primitives)."""

    bits_per_element = 4.0 + 16.0 / 32  # fp16 scale per group

    def _cast(self, rows: torch.Tensor) -> torch.Tensor:
        from torchao.quantization.quant_primitives import (
            MappingType,
            choose_qparams_affine,
            dequantize_affine,
            quantize_affine,
        )

        block = (1, self.block)
        scale, zero = choose_qparams_affine(
            rows, MappingType.SYMMETRIC, block, torch.int8, quant_min=-8, quant_max=7, eps=1e-12
        )
        q = quantize_affine(rows, block, scale, zero, torch.int8, quant_min=-8, quant_max=7)
        return dequantize_affine(q, block, scale, zero, torch.int8, quant_min=-8, quant_max=7)


class MXFP4Quantizer(_PaddedQuantizer):
    """OCP MXFP4 through torchao's emulated cast (FLOOR scale mode)."""

    bits_per_element = 4.0 + 8.0 / 32

    def _cast(self, rows: torch.Tensor) -> torch.Tensor:
        from torchao.prototype.mx_formats.mx_tensor import MXTensor

        return MXTensor.to_mx(rows, torch.float4_e2m1fn_x2, block_size=32).dequantize(torch.float32)


class NVFP4Quantizer(_PaddedQuantizer):
    """NVFP4 through torchao's emulated cast, with the two-level (per-tensor fp32) scale."""

    block = 16
    bits_per_element = 4.0 + 8.0 / 16

    def _cast(self, rows: torch.Tensor) -> torch.Tensor:
        from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

        amax = rows.abs().amax().clamp_min(1e-12)
        tensor = NVFP4Tensor.to_nvfp4(rows, block_size=16, per_tensor_scale=per_tensor_amax_to_scale(amax))
        return tensor.dequantize(torch.float32)


def block_dialect(config: SemanticDialectConfig | None = None) -> SemanticDialectQuantizer:
    """BlockDialect, re-implemented: 16 DialectFP4 dialects, brute-force selection, no SeDA/decomposition."""
    base = config or SemanticDialectConfig()
    return SemanticDialectQuantizer(
        replace(
            base, n_dialects=16, dialects=None, selection="brute_force", seda=False, decomposition_ratio=0.0
        )
    )
