"""SemanticDialect speed targets (issue #26), on one CPU thread.

1. Dialect selection + quantization of a 4096 x 1024 activation for |F| = 16/32/64/128: LUT selection
   (histogram @ LUT_err, argmin, gather) vs brute force (exact error of every dialect). Target: LUT flat
   in |F| and >= 4x faster at |F| = 64.
2. The online fake-quant step (ours, fused, 16 dialects; also with SeDA's sub-books) vs torchao's
   emulated MXFP4 cast (``MXTensor.to_mx`` + ``dequantize``) on the same tensor. Target: <= 2x.

Run: ``OMP_NUM_THREADS=1 python benchmarks/semanticdialect/bench_semanticdialect.py --out FILE``; the \
    README figures come
from ``--out results/semanticdialect/benchmarks/speed.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from neurips26.methods.semanticdialect import Formatbook, SemanticDialectConfig, SemanticDialectQuantizer
from neurips26.methods.semanticdialect.codec import fake_quantize_blocks
from neurips26.methods.semanticdialect.semantic import TokenContext, patch_clusters


def best_of(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 1024, generator=gen) * torch.exp(torch.randn(4096, 1, generator=gen))
    result: dict = {
        "shape": list(x.shape),
        "threads": 1,
        "torch": torch.__version__,
        "cpu": platform.processor(),
    }
    rows = []
    for size in (16, 32, 64, 128):
        book = Formatbook.extended(size)
        lut = best_of(lambda b=book: fake_quantize_blocks(x, b, selection="lut"), args.repeats)
        brute = best_of(lambda b=book: fake_quantize_blocks(x, b, selection="brute_force"), 1)
        rows.append({"dialects": size, "lut_s": lut, "brute_force_s": brute, "speedup": brute / lut})
        print(
            f"|F|={size:4d}  LUT {lut * 1e3:8.1f} ms  brute force {brute * 1e3:8.1f} ms  x{brute / lut:.1f}"
        )
    result["selection"] = rows
    ours = SemanticDialectQuantizer(SemanticDialectConfig(n_dialects=16, seda=False, decomposition_ratio=0.0))
    seda = SemanticDialectQuantizer(SemanticDialectConfig(n_dialects=16, seda_k=4, decomposition_ratio=0.0))
    ids, n = patch_clusters(8, 512, 64)
    context = TokenContext(ids, n)
    result["fake_quant_ours_s"] = best_of(lambda: ours(x), args.repeats)
    result["fake_quant_ours_seda_s"] = best_of(lambda: seda(x, context), args.repeats)
    try:
        from torchao.prototype.mx_formats.mx_tensor import MXTensor

        def mx() -> torch.Tensor:
            return MXTensor.to_mx(x, torch.float4_e2m1fn_x2, block_size=32).dequantize(torch.float32)

        result["fake_quant_torchao_mxfp4_s"] = best_of(mx, args.repeats)
        result["ratio_ours_to_mxfp4"] = result["fake_quant_ours_s"] / result["fake_quant_torchao_mxfp4_s"]
        result["ratio_ours_seda_to_mxfp4"] = (
            result["fake_quant_ours_seda_s"] / result["fake_quant_torchao_mxfp4_s"]
        )
    except ImportError:
        result["fake_quant_torchao_mxfp4_s"] = None
    print(json.dumps({k: v for k, v in result.items() if k != "selection"}, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
