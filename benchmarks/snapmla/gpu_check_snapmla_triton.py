"""SnapMLA Triton decode kernel on a GPU: correctness vs the reference, then decode timings.

Prepared for a device session and **not run yet**: no GPU was available when it was written. The kernel's
numerics were checked only under Triton's interpreter on CPU
(``tests/methods/snapmla/test_snapmla_triton.py``).
The script exits with a message when CUDA is absent. Usage::

    PYTHONPATH=src python benchmarks/snapmla/gpu_check_snapmla_triton.py [--tokens 4096 8192 16384 32768]
        [--batch 1] [--heads 128] [--out snapmla_gpu.json]

1. Correctness: ``triton_checks`` on CUDA with native casts (``--emulated``: also with the emulated casts,
   which take minutes to compile). This covers every E4M3/BF16 rounding vs torch's casts and kernel vs
   reference on the small cases. A DeepSeek-V3-shaped case at 4096 tokens then compares the kernel with
   the PyTorch reference (and with the emulated casts).
2. Timings at DeepSeek-V3 MLA dims (d_c 512, d_r 64, one new token per sequence), median of CUDA-event
   timings, and the bandwidth each one implies from the bytes of its cache:

   - ``snapmla_triton``: this kernel on the 644-byte SnapMLA cache;
   - ``bf16_triton``: the same kernel on a BF16 cache, BF16 P (apples-to-apples);
   - ``flashmla_format``: FlashMLA's FP8 layout (per-128 scales) dequantized to BF16 by torch and then
     run by ``bf16_triton``, timed together. This is how a kernel without fused FP8 reads that format;
     it is not FlashMLA's own kernel, which is not installed here;
   - ``bf16_sdpa``: ``F.scaled_dot_product_attention`` on q=[q~; q_R], k=[c; k_R], v=c with GQA
     broadcasting (the backend torch picks);
   - ``reference_torch``: the PyTorch reference pipeline on CUDA tensors (many small kernels).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

from neurips26.methods.snapmla.baselines import BF16, FLASHMLA_FP8
from neurips26.methods.snapmla.cache_format import bytes_per_token, decode_latent
from neurips26.methods.snapmla.pipeline import SNAPMLA, decode_latent_attention
from neurips26.methods.snapmla.triton_checks import kernel_agreement, rounding_agreement
from neurips26.methods.snapmla.triton_kernel import snapmla_decode_triton

D_C, D_R = 512, 64  # DeepSeek-V3 kv_lora_rank, qk_rope_head_dim
SCALING = (128 + 64) ** -0.5  # 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)
LAUNCH_CONFIGS = ((16, 4), (32, 8), (64, 8))  # (block_rows, num_warps) tried on the longest cache


def cuda_time_ms(fn, repeats: int = 30, warmup: int = 5) -> float:
    """Median time of ``fn`` in ms, CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def splits_for(batch: int, heads: int, block_rows: int, n_tokens: int) -> int:
    """Enough KV splits to give every SM two programs, never more than the 64-token blocks."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = batch * math.ceil(heads / block_rows)
    return max(1, min(math.ceil(n_tokens / 64), math.ceil(2 * sms / programs)))


def correctness(heads: int, emulated: bool) -> dict:
    """Kernel vs reference on CUDA; ``emulated`` also runs the interpreter-style cast path (slow to compile:
    on a loaded 2-core CPU each emulated variant took 1-3 minutes to compile for sm_90)."""
    report = {
        "rounding": rounding_agreement("cuda"),
        "cases_native": kernel_agreement("cuda", emulated_casts=False),
    }
    if emulated:
        report["cases_emulated"] = kernel_agreement("cuda", emulated_casts=True)
    generator = torch.Generator(device="cuda").manual_seed(0)
    q_content = torch.randn(2, heads, 1, D_C, device="cuda", generator=generator)
    q_rope = torch.randn(2, heads, 1, D_R, device="cuda", generator=generator)
    content = torch.randn(2, 4096, D_C, device="cuda", generator=generator)
    rope = torch.randn(2, 4096, D_R, device="cuda", generator=generator) * 30
    encoded = SNAPMLA.encode(content, rope)
    reference = decode_latent_attention(SNAPMLA, q_content, q_rope, encoded, SCALING)
    native = snapmla_decode_triton(q_content, q_rope, encoded, SCALING, num_splits=16, emulated_casts=False)
    report["dsv3_4096"] = {"native_vs_reference_rel": float((native - reference).norm() / reference.norm())}
    if emulated:
        slow = snapmla_decode_triton(q_content, q_rope, encoded, SCALING, num_splits=16, emulated_casts=True)
        report["dsv3_4096"]["native_vs_emulated_max_abs"] = float((native - slow).abs().max())
        report["dsv3_4096"]["emulated_vs_reference_rel"] = float((slow - reference).norm() / reference.norm())
    return report


def make_inputs(batch: int, heads: int, n_tokens: int, seed: int = 0) -> dict:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q_content = torch.randn(batch, heads, 1, D_C, device="cuda", generator=generator)
    q_rope = torch.randn(batch, heads, 1, D_R, device="cuda", generator=generator)
    content = torch.randn(batch, n_tokens, D_C, device="cuda", generator=generator)
    rope = torch.randn(batch, n_tokens, D_R, device="cuda", generator=generator)
    bf16_cache = BF16.encode(content, rope)
    return {
        "q_content": q_content,
        "q_rope": q_rope,
        "snapmla": SNAPMLA.encode(content, rope),
        "bf16": bf16_cache,
        "flashmla": FLASHMLA_FP8.encode(content, rope),
        "q_sdpa": torch.cat([q_content, q_rope], dim=-1).bfloat16(),
        "k_sdpa": torch.cat([bf16_cache.content, bf16_cache.rope], dim=-1).unsqueeze(1),
        "v_sdpa": bf16_cache.content.unsqueeze(1),
    }


def pick_launch(inputs: dict, batch: int, heads: int, n_tokens: int) -> tuple[int, int]:
    """The fastest (block_rows, num_warps) of LAUNCH_CONFIGS for the SnapMLA kernel."""
    tried = {}
    for block_rows, warps in LAUNCH_CONFIGS:
        splits = splits_for(batch, heads, block_rows, n_tokens)

        def run(b: int = block_rows, w: int = warps, s: int = splits) -> torch.Tensor:
            return snapmla_decode_triton(
                inputs["q_content"], inputs["q_rope"], inputs["snapmla"], SCALING, num_splits=s, block_rows=b,
                num_warps=w,
            )  # fmt: skip

        try:
            tried[(block_rows, warps)] = cuda_time_ms(run)
        except Exception as error:  # a config that does not compile is reported, not fatal
            print(f"config {block_rows}x{warps} failed: {error}", file=sys.stderr)
    if not tried:
        raise RuntimeError("no launch config of the SnapMLA kernel compiled")
    print("launch configs (ms):", {f"{k[0]}x{k[1]}": round(v, 4) for k, v in tried.items()})
    return min(tried, key=tried.get)


def systems_for(inputs: dict, splits: int, block_rows: int, warps: int) -> dict:
    """name -> (callable, cache bytes per token) for one cache length."""
    q_c, q_r = inputs["q_content"], inputs["q_rope"]
    launch = {"num_splits": splits, "block_rows": block_rows, "num_warps": warps}

    def snapmla_triton() -> torch.Tensor:
        return snapmla_decode_triton(q_c, q_r, inputs["snapmla"], SCALING, **launch)

    def bf16_triton() -> torch.Tensor:
        return snapmla_decode_triton(q_c, q_r, inputs["bf16"], SCALING, recipe=BF16, **launch)

    def flashmla_format() -> torch.Tensor:
        content16, rope16 = decode_latent(inputs["flashmla"])
        return snapmla_decode_triton(q_c, q_r, BF16.encode(content16, rope16), SCALING, recipe=BF16, **launch)

    def bf16_sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(
            inputs["q_sdpa"], inputs["k_sdpa"], inputs["v_sdpa"], scale=SCALING, enable_gqa=True
        )

    def reference_torch() -> torch.Tensor:
        return decode_latent_attention(SNAPMLA, q_c, q_r, inputs["snapmla"], SCALING)

    return {
        "snapmla_triton": (snapmla_triton, bytes_per_token("fp8_token", D_C, D_R)),
        "bf16_triton": (bf16_triton, bytes_per_token("bf16", D_C, D_R)),
        "flashmla_format": (flashmla_format, bytes_per_token("fp8_tile", D_C, D_R)),
        "bf16_sdpa": (bf16_sdpa, bytes_per_token("bf16", D_C, D_R)),
        "reference_torch": (reference_torch, bytes_per_token("fp8_token", D_C, D_R)),
    }


def timings(batch: int, heads: int, tokens_list: list[int]) -> list[dict]:
    rows = []
    launch = None
    for n_tokens in sorted(tokens_list, reverse=True):
        inputs = make_inputs(batch, heads, n_tokens)
        if launch is None:  # picked once, on the longest cache
            launch = pick_launch(inputs, batch, heads, n_tokens)
        block_rows, warps = launch
        splits = splits_for(batch, heads, block_rows, n_tokens)
        for name, (fn, row_bytes) in systems_for(inputs, splits, block_rows, warps).items():
            try:
                ms = cuda_time_ms(fn, repeats=10 if name == "reference_torch" else 30)
                status = "ok"
            except Exception as error:  # e.g. out of memory in the reference at 32k tokens
                ms, status = float("nan"), f"error: {type(error).__name__}: {str(error)[:200]}"
            bandwidth = batch * n_tokens * row_bytes / (ms * 1e-3) / 1e9
            rows.append(
                {
                    "system": name,
                    "batch": batch,
                    "heads": heads,
                    "tokens": n_tokens,
                    "ms": ms,
                    "cache_GB_per_s": bandwidth,
                    "splits": splits,
                    "block_rows": block_rows,
                    "num_warps": warps,
                    "status": status,
                }
            )
            print(f"{n_tokens:6d} {name:16s} {ms:9.4f} ms  {bandwidth:8.1f} GB/s  {status}")
        inputs.clear()
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=128)
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument(
        "--emulated",
        action="store_true",
        help="also cross-check the emulated-cast path (minutes of compiling)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("CUDA is not available; this script needs a GPU (the CPU checks are in the tests).")
        sys.exit(0)
    import triton

    report = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "correctness": correctness(args.heads, args.emulated),
    }
    print(json.dumps(report["correctness"]["rounding"]), json.dumps(report["correctness"]["dsv3_4096"]))
    worst = max(r["rel_error_vs_reference"] for r in report["correctness"]["cases_native"])
    print(f"worst small-case kernel vs reference (native casts): {worst:.3e}")
    if not args.skip_timing:
        report["timings"] = timings(args.batch, args.heads, args.tokens)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
