"""SOLAR on a GPU: bounds for a datasheet spec vs cold-L2 CUDA-event timings (eager, optionally compiled).

Prepared for a device session; **not run yet** (no GPU was available when it was written). It exits with a
message when CUDA is absent. Expectation (research notes §1.5): zero violations on H200, headroom >= 1.25x
for the bf16 GEMM (datasheet 989 vs ~790 TFLOP/s measured), and compiled fused kernels beating the
*unfused* bound while respecting the fused one. Usage::

    PYTHONPATH=src python benchmarks/solar/gpu_check_solar.py --hw H200 [--compile]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.methods.solar import analyze, check, load_hardware


class RMSNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],))


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class CausalAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class SwiGLU(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, h, bias=False), nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MatMul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def cases(dtype: torch.dtype) -> list[tuple[str, nn.Module, list[torch.Tensor]]]:
    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", dtype=dtype)

    return [
        ("gemm_8192", MatMul(), [r(8192, 8192), r(8192, 8192)]),
        ("rmsnorm", RMSNorm(), [r(16384, 4096)]),
        ("softmax", Softmax(), [r(16384, 4096)]),
        ("causal_attention", CausalAttention(), [r(8, 32, 4096, 128) for _ in range(3)]),
        ("swiglu", SwiGLU(4096, 11008).to("cuda", dtype), [r(4096, 4096)]),
    ]


def cold_l2_seconds(fn, l2_bytes: int, reps: int = 20) -> float:
    """Median CUDA-event time with the L2 flushed (a 2 x L2 buffer zeroed) before every call."""
    flush = torch.empty(2 * l2_bytes // 4, device="cuda")
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hw", default="H200")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd versions")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return
    spec = load_hardware(args.hw)
    with torch.no_grad():
        for name, model, inputs in cases(torch.bfloat16):
            report = analyze(model, [x.to("meta") for x in inputs], hw=spec, validate=False)
            impls = {"eager": model}
            if args.compile:
                impls["compile"] = torch.compile(model)
            for impl, fn in impls.items():
                seconds = cold_l2_seconds(lambda f=fn, x=inputs: f(*x), spec.onchip_bytes)
                audit = check(report, seconds)
                print(
                    json.dumps(
                        {
                            "program": name,
                            "impl": impl,
                            "ms": round(1e3 * seconds, 4),
                            **{
                                f"{k}_over_measured": round(report.bound(k) / seconds, 3)
                                for k in ("flop_only", "fused", "cache_aware", "unfused")
                            },
                            "violations": audit.violations,
                        }
                    )
                )


if __name__ == "__main__":
    main()
