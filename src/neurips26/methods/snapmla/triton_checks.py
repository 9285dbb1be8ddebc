"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — kernel checks.

Compares the Triton decode kernel (:mod:`neurips26.methods.snapmla.triton_kernel`) with the CPU reference
(:func:`neurips26.methods.snapmla.pipeline.decode_latent_attention`) on small cases, and the kernel's
integer-arithmetic roundings with torch's FP8/BF16 casts. It is shared by the tests and the GPU script.

Run it under Triton's interpreter on CPU (numerics only; the interpreter says nothing about speed)::

    TRITON_INTERPRET=1 PYTHONPATH=src python -m neurips26.methods.snapmla.triton_checks

It prints one JSON object. On a machine with CUDA, pass ``--device cuda`` (no ``TRITON_INTERPRET``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

import torch

from neurips26.methods.snapmla.baselines import FP32, RECIPES
from neurips26.methods.snapmla.cache_format import pack_snapmla_rows, unpack_snapmla_rows
from neurips26.methods.snapmla.pipeline import SNAPMLA, decode_latent_attention
from neurips26.methods.snapmla.triton_kernel import (
    causal_decode_mask,
    grid_roundings_triton,
    merge_splits_torch,
    merge_splits_triton,
    snapmla_decode_triton,
)

__all__ = [
    "CASES",
    "KernelCase",
    "kernel_agreement",
    "merge_agreement",
    "model_agreement",
    "rounding_agreement",
]


@dataclass(frozen=True)
class KernelCase:
    """One comparison: shapes, the RoPE magnitude, KV splits and the recipe (``snapmla`` or ``bf16``)."""

    name: str
    batch: int = 1
    heads: int = 4
    n_query: int = 1
    n_tokens: int = 64
    d_c: int = 64
    d_r: int = 16
    rope_std: float = 1.0
    num_splits: int = 1
    recipe: str = "snapmla"
    zero_tokens: int = 0  # leading cached tokens set to zero (scale-1 rule of amax_scales)
    block_rows: int = 16  # query rows per program (64 is the GPU default: FP8 WGMMA tiles)


CASES = (
    KernelCase("one_block"),
    KernelCase("ragged_tail_two_queries", batch=2, n_query=2, n_tokens=150),
    KernelCase("three_splits", batch=2, n_query=2, n_tokens=150, num_splits=3),
    KernelCase("rope_256x_content", n_tokens=130, rope_std=256.0, num_splits=2),
    KernelCase("two_row_blocks", heads=10, n_query=2, n_tokens=100),
    KernelCase("zero_tokens", n_tokens=70, zero_tokens=5),
    KernelCase("dsv3_dims", heads=16, n_tokens=128, d_c=512, d_r=64, num_splits=2),
    KernelCase("block_rows_64", heads=16, n_query=4, n_tokens=100, block_rows=64),
    KernelCase("bf16_recipe", batch=2, n_query=2, n_tokens=150, recipe="bf16"),
)


def _case_tensors(case: KernelCase, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    shape_q = (case.batch, case.heads, case.n_query)
    q_content = torch.randn(*shape_q, case.d_c, generator=generator)
    q_rope = torch.randn(*shape_q, case.d_r, generator=generator)
    content = torch.randn(case.batch, case.n_tokens, case.d_c, generator=generator)
    rope = torch.randn(case.batch, case.n_tokens, case.d_r, generator=generator) * case.rope_std
    content[:, : case.zero_tokens] = 0.0
    q_rope = q_rope / case.rope_std  # keep the logits' size independent of rope_std
    return tuple(t.to(device) for t in (q_content, q_rope, content, rope))


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def kernel_agreement(
    device: str = "cpu",
    cases: tuple[KernelCase, ...] = CASES,
    emulated_casts: bool | None = None,
    seed: int = 0,
) -> list[dict]:
    """Kernel vs reference for each case: relative and max-abs error, and each one's error vs fp32.

    ``packed_rows_identical`` says whether the kernel gives the same bits when it reads the cache through
    views of packed 644-byte-style rows (:func:`unpack_snapmla_rows`).
    """
    results = []
    for index, case in enumerate(cases):
        q_content, q_rope, content, rope = _case_tensors(case, device, seed + index)
        recipe = SNAPMLA if case.recipe == "snapmla" else RECIPES[case.recipe]
        scaling = (case.d_c // 4 + case.d_r) ** -0.5
        mask = causal_decode_mask(case.n_query, case.n_tokens, device)
        encoded = recipe.encode(content, rope)
        reference = decode_latent_attention(recipe, q_content, q_rope, encoded, scaling, mask)
        exact = decode_latent_attention(FP32, q_content, q_rope, FP32.encode(content, rope), scaling, mask)
        kernel = snapmla_decode_triton(
            q_content, q_rope, encoded, scaling, recipe=recipe, num_splits=case.num_splits,
            block_rows=case.block_rows, emulated_casts=emulated_casts,
        )  # fmt: skip
        row = {
            **asdict(case),
            "rel_error_vs_reference": _relative(kernel, reference),
            "max_abs_error_vs_reference": float((kernel - reference).abs().max()),
            "kernel_rel_error_vs_fp32": _relative(kernel, exact),
            "reference_rel_error_vs_fp32": _relative(reference, exact),
            "finite": bool(torch.isfinite(kernel).all()),
        }
        if case.recipe == "snapmla":
            rows = pack_snapmla_rows(encoded)
            from_rows = unpack_snapmla_rows(rows, case.d_c, case.d_r)
            packed = snapmla_decode_triton(
                q_content,
                q_rope,
                from_rows,
                scaling,
                num_splits=case.num_splits,
                block_rows=case.block_rows,
                emulated_casts=emulated_casts,
            )
            row["packed_rows_identical"] = bool(torch.equal(packed, kernel))
        results.append(row)
    return results


def rounding_agreement(device: str = "cpu", seed: int = 0) -> dict:
    """Mismatches of the kernel's E4M3/BF16 roundings vs torch's casts on every E4M3 value, every midpoint
    between neighbours (ties), BF16 ties and random magnitudes from 1e-6 to 448."""
    codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    codes = codes[torch.isfinite(codes)].unique()
    midpoints = (codes[1:] + codes[:-1]) / 2
    generator = torch.Generator().manual_seed(seed)
    magnitudes = 10 ** (torch.rand(8192, generator=generator) * 8.45 - 6)  # 1e-6 .. ~280
    signs = torch.where(torch.rand(8192, generator=generator) < 0.5, -1.0, 1.0)
    random = (signs * magnitudes).clamp(-448, 448)
    bf16 = torch.randn(8192, generator=generator).bfloat16().float() * 100
    next_up = (bf16.view(torch.int32) + 65536).view(torch.float32)
    bf16_ties = bf16 + (next_up - bf16) / 2
    e4m3_inputs = torch.cat([codes, midpoints, random]).to(device)
    bf16_inputs = torch.cat([random, bf16_ties, torch.randn(8192, generator=generator) * 1e4]).to(device)
    e4m3_ours, _ = grid_roundings_triton(e4m3_inputs)
    _, bf16_ours = grid_roundings_triton(bf16_inputs)
    return {
        "e4m3_values": int(e4m3_inputs.numel()),
        "e4m3_mismatches": int((e4m3_ours != e4m3_inputs.to(torch.float8_e4m3fn).float()).sum()),
        "bf16_values": int(bf16_inputs.numel()),
        "bf16_mismatches": int((bf16_ours != bf16_inputs.to(torch.bfloat16).float()).sum()),
    }


def model_agreement(
    device: str = "cpu", prompt_tokens: int = 40, decode_steps: int = 3, seed: int = 0
) -> dict:
    """A tiny DeepSeek-V3 (random weights, d_c 32, d_r 16) run through ``use_latent_mla(..., SNAPMLA)``
    with ``kernel="triton"`` and with ``kernel="reference"``: prefill, then greedy decode steps on a
    :class:`LatentMLACache`. Returns the largest relative logit difference and whether the tokens agree."""
    from neurips26.methods.snapmla.integration import LatentMLACache, use_latent_mla
    from neurips26.zoo.builders import tiny_deepseek_v3

    model = tiny_deepseek_v3(seed=seed, qk_rope_head_dim=16).to(device)
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_tokens), generator=generator).to(device)
    runs = {}
    for kernel in ("reference", "triton"):
        cache = LatentMLACache(model.config, SNAPMLA)
        logits, tokens = [], prompt
        with torch.no_grad(), use_latent_mla(model, SNAPMLA, kernel=kernel):
            step = model(tokens, past_key_values=cache, use_cache=True).logits
            for _ in range(decode_steps):
                logits.append(step[:, -1])
                next_token = step[:, -1:].argmax(-1)
                tokens = torch.cat([tokens, next_token], dim=1)
                step = model(next_token, past_key_values=cache, use_cache=True).logits
        runs[kernel] = (torch.stack(logits), tokens)
    reference, triton_run = runs["reference"], runs["triton"]
    return {
        "max_rel_logit_difference": float(
            ((triton_run[0] - reference[0]).norm(dim=-1) / reference[0].norm(dim=-1)).max()
        ),
        "tokens_equal": bool(torch.equal(triton_run[1], reference[1])),
        "decode_steps": decode_steps,
    }


def merge_agreement(device: str = "cpu", seed: int = 0) -> dict:
    """The Triton split merge vs the PyTorch one on random partials, with some splits empty (lse = -inf)
    and one row with no visible token at all."""
    generator = torch.Generator().manual_seed(seed)
    outputs = torch.randn(2, 5, 24, 64, generator=generator)
    lse = torch.randn(2, 5, 24, generator=generator) * 3
    lse[:, 3] = float("-inf")
    outputs[:, 3] = 0.0  # what the decode kernel stores for a split without visible tokens
    lse[1, :, 7] = float("-inf")
    outputs[1, :, 7] = 0.0
    outputs, lse = outputs.to(device), lse.to(device)
    ours, oracle = merge_splits_triton(outputs, lse), merge_splits_torch(outputs, lse)
    return {
        "rel_error": _relative(ours, oracle),
        "finite": bool(torch.isfinite(ours).all()),
        "empty_row_zero": bool((ours[1, 7] == 0).all()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--emulated-casts", action="store_true", help="GPU: the interpreter's integer-arithmetic roundings"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    emulated = True if args.emulated_casts else None  # None: emulated iff interpreter, native on a GPU
    report = {
        "rounding": rounding_agreement(args.device),
        "cases": kernel_agreement(args.device, emulated_casts=emulated),
        "merge": merge_agreement(args.device),
        "model": model_agreement(args.device),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
