"""SnapMLA Triton decode kernel compiled ahead of time for Hopper (sm_90), with no GPU needed.

Triton's wheel ships ``ptxas`` and ``cuobjdump``, so the kernel can be compiled for a target GPU on a CPU
machine. This script compiles it at DeepSeek-V3 dims (d_c 512, d_r 64) for each launch config and reports
three things read from the compiled code:

- which tensor-core instructions the two ``tl.dot`` products became (FP8 ``wgmma ... e4m3`` or
  ``mma.sync`` on upcast f16);
- whether the FP8/BF16 casts are native ``cvt`` instructions;
- registers per thread and stack bytes (spills) from ``cuobjdump --dump-resource-usage``.

This says nothing about speed. Run::

    PYTHONPATH=src python benchmarks/snapmla/snapmla_triton_sm90_compile.py [--emulated]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from neurips26.methods.snapmla import triton_kernel

CONFIGS = ((16, 4), (32, 8), (64, 4), (64, 8))  # (block_rows, num_warps)
CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def kernel_source(fp8: bool, block_rows: int, emulated: bool, d_c: int = 512, d_r: int = 64) -> ASTSource:
    """The kernel with its pointer dtypes and constexprs fixed (SnapMLA: FP8 q~/c; BF16 recipe otherwise)."""
    kernel = triton_kernel._snapmla_decode_kernel
    pointers = {
        "Q": "*fp8e4nv" if fp8 else "*bf16",
        "QR": "*bf16",
        "SQ": "*fp32",
        "C": "*fp8e4nv" if fp8 else "*bf16",
        "KR": "*bf16",
        "S": "*fp32",
        "O": "*fp32",
        "LSE": "*fp32",
    }
    constants = {
        "D_C": d_c,
        "D_R": d_r,
        "BLOCK_R": block_rows,
        "BLOCK_N": triton_kernel.BLOCK_N,
        "FP8_P": fp8,
        "ALIGN_ROPE": fp8,
        "EMULATED_CASTS": emulated,
    }
    signature = {}
    for name in kernel.arg_names:
        if name in pointers:
            signature[name] = pointers[name]
        elif name in constants:
            signature[name] = "constexpr"
        else:
            signature[name] = "fp32" if name == "scaling" else "i32"
    return ASTSource(fn=kernel, signature=signature, constexprs=constants)


def inspect(fp8: bool, block_rows: int, warps: int, emulated: bool, workdir: Path) -> dict:
    start = time.perf_counter()
    compiled = triton.compile(
        kernel_source(fp8, block_rows, emulated),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": warps},
    )
    ptx = compiled.asm["ptx"]
    cubin = workdir / f"snapmla_{fp8}_{block_rows}_{warps}_{emulated}.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    usage = subprocess.run(
        [str(CUOBJDUMP), "--dump-resource-usage", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    registers = re.search(r"REG:(\d+)", usage)
    stack = re.search(r"STACK:(\d+)", usage)
    return {
        "recipe": "snapmla" if fp8 else "bf16",
        "block_rows": block_rows,
        "num_warps": warps,
        "emulated_casts": emulated,
        "wgmma": sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\w+\.f32\.\w+\.\w+)", ptx))),
        "mma_sync": sorted(set(re.findall(r"mma\.sync\.aligned\.(\w+)\.row\.col\.f32\.(\w+)\.", ptx))),
        "native_casts": sorted(
            set(re.findall(r"cvt\.rn(?:\.satfinite)?\.(e4m3x2\.f32|bf16x2\.f32|bf16\.f32)", ptx))
        ),
        "registers": int(registers.group(1)) if registers else -1,
        "stack_bytes": int(stack.group(1)) if stack else -1,
        "compile_s": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulated", action="store_true", help="also compile the interpreter-style path")
    args = parser.parse_args()
    print(f"triton {triton.__version__}, target sm_90, d_c 512, d_r 64")
    print("| recipe | block_rows | warps | emulated casts | wgmma | mma.sync | native cvt | regs | stack B |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for fp8 in (True, False):
            for block_rows, warps in CONFIGS:
                for emulated in (False, True) if args.emulated else (False,):
                    r = inspect(fp8, block_rows, warps, emulated, Path(tmp))
                    mma = sorted({f"{shape}.{dtype}" for shape, dtype in r["mma_sync"]})
                    cells = [
                        r["recipe"],
                        block_rows,
                        warps,
                        emulated,
                        ", ".join(r["wgmma"]) or "-",
                        ", ".join(mma) or "-",
                        ", ".join(r["native_casts"]) or "-",
                        r["registers"],
                        r["stack_bytes"],
                    ]
                    print("| " + " | ".join(str(cell) for cell in cells) + " |")


if __name__ == "__main__":
    main()
