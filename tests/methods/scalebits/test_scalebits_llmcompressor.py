"""ScaleBITS' GPTQ against llm-compressor's ``quantize_weight`` on one layer (skipped without the library).

llm-compressor cannot be installed next to the project's pinned transformers; these run in the side venv of
``benchmarks/scalebits/scalebits_gptq_crosscheck.py`` (see its docstring) and take a few seconds.
"""

import pytest
import torch

pytest.importorskip("llmcompressor")

from compressed_tensors.quantization import QuantizationArgs
from compressed_tensors.quantization.utils import calculate_qparams
from llmcompressor.modifiers.gptq.gptq_quantize import quantize_weight

from neurips26.methods.scalebits.gptq import dequantize_partial_groups, gptq_quantize

ROWS, COLS, GROUP = 32, 128, 64


def problem(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random weight and the Hessian ``2 X^T X / n`` of correlated inputs."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(ROWS, COLS, generator=generator)
    mixing = torch.randn(COLS, COLS, generator=generator) / COLS**0.5 + torch.eye(COLS)
    inputs = torch.randn(4 * COLS, COLS, generator=generator) @ mixing
    return weight, 2 * inputs.T @ inputs / len(inputs)


def library_gptq(weight: torch.Tensor, hessian: torch.Tensor, bits: int) -> torch.Tensor:
    """llm-compressor: min/max qparams of the original groups (float16 scales), then its GPTQ loop."""
    args = QuantizationArgs(
        num_bits=bits,
        type="int",
        symmetric=False,
        strategy="group",
        group_size=GROUP,
        scale_dtype=torch.float16,
        actorder=None,
    )
    groups = weight.reshape(ROWS, COLS // GROUP, GROUP)
    scale, zero = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
    quantized, _, _ = quantize_weight(
        weight[None].clone(), hessian[None].clone(), scale[None], zero[None], None, args, 128, 0.01
    )
    return quantized[0]


def our_gptq(weight: torch.Tensor, hessian: torch.Tensor, bits: int, static: bool) -> torch.Tensor:
    bit_map = torch.full((ROWS, COLS // GROUP), bits)
    codes = gptq_quantize(weight, hessian, bit_map, GROUP, 128, 0.01, static_groups=static)
    return dequantize_partial_groups(*codes, GROUP)


def output_error(weight: torch.Tensor, quantized: torch.Tensor, hessian: torch.Tensor) -> float:
    error = weight - quantized
    return float(torch.trace(error @ hessian @ error.T))


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_static_groups_equal_llmcompressor(bits: int) -> None:
    weight, hessian = problem(bits)
    ours, theirs = our_gptq(weight, hessian, bits, static=True), library_gptq(weight, hessian, bits)
    assert (ours != theirs).float().mean() <= 1e-3  # float32 vs float64 Cholesky: a rare tie may differ
    assert torch.allclose(ours, theirs, atol=1e-4)


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_identity_hessian_gives_the_same_rounding(bits: int) -> None:
    weight, _ = problem(10 + bits)
    identity = torch.eye(COLS)
    assert torch.equal(our_gptq(weight, identity, bits, static=False), library_gptq(weight, identity, bits))


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_default_groups_are_close_to_the_library_and_beat_rtn(bits: int) -> None:
    weight, hessian = problem(20 + bits)
    rtn = output_error(weight, our_gptq(weight, torch.eye(COLS), bits, static=False), hessian)
    ours = output_error(weight, our_gptq(weight, hessian, bits, static=False), hessian)
    theirs = output_error(weight, library_gptq(weight, hessian, bits), hessian)
    assert max(ours, theirs) < 0.8 * rtn
    assert ours < 1.25 * theirs  # on Gaussian weights at 2 bits dynamic groups lose up to ~16% (measured)
