"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — GPU rungs.

Honest solutions in the two GPU languages, for ``rmsnorm`` and ``softmax`` (destination-passing style):

- :func:`triton_solution`: one Triton program per row (the whole row in one block: both problems have
  rows of at most 4096 elements). On a CUDA device it is compiled by Triton; without CUDA the harness runs
  it under Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors, which checks numerics only.
- :func:`cuda_solution`: a ``cuda_cpp`` extension: a ``.cu`` kernel (one block per row, a shared-memory
  tree reduction) launched on torch's current stream from a ``.cpp`` binding; built by ``nvcc`` in the
  compile step. It needs CUDA; without it the harness answers ``COMPILE_ERROR`` naming the missing CUDA.
"""

from __future__ import annotations

import textwrap

from neurips26.methods.solexecbench.schema import Solution

TRITON_KERNELS = {
    "rmsnorm": """
        import triton
        import triton.language as tl


        @triton.jit
        def _rmsnorm_row(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < cols
            x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
            w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
            scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
            tl.store(y_ptr + row * cols + offsets, x * scale * w, mask=mask)


        def run(x, norm_weight, eps, y):
            rows, cols = x.shape
            _rmsnorm_row[(rows,)](
                x.contiguous(), norm_weight.contiguous(), y, cols, eps, BLOCK=triton.next_power_of_2(cols)
            )
    """,
    "softmax": """
        import triton
        import triton.language as tl


        @triton.jit
        def _softmax_row(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < cols
            x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=-float("inf"))
            e = tl.exp(x - tl.max(x, axis=0))
            tl.store(y_ptr + row * cols + offsets, e / tl.sum(e, axis=0), mask=mask)


        def run(scores, probs):
            rows, cols = scores.shape
            _softmax_row[(rows,)](scores.contiguous(), probs, cols, BLOCK=triton.next_power_of_2(cols))
    """,
}

_CUDA_BINDING = """
    #include <torch/extension.h>

    void launch(const torch::Tensor& x, const torch::Tensor& w, double eps, torch::Tensor& y);

    void run(torch::Tensor x, {params}torch::Tensor y) {{
      TORCH_CHECK(x.is_cuda() && y.is_cuda(), "CUDA tensors expected");
      TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "float32");
      TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && y.is_contiguous(), "contiguous 2-d tensors");
      launch(x, {args}, y);
    }}

    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("run", &run, "{doc}"); }}
"""

# one block of 256 threads per row; partial sums reduced in shared memory (a tree, power-of-two width)
_CUDA_KERNELS = {
    "rmsnorm": """
        #include <torch/extension.h>
        #include <c10/cuda/CUDAStream.h>
        #include <c10/cuda/CUDAException.h>

        constexpr int kThreads = 256;

        __global__ void rmsnorm_rows(const float* x, const float* w, float* y, int cols, float eps) {
          __shared__ float partial[kThreads];
          const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
          float acc = 0.0f;
          for (int j = threadIdx.x; j < cols; j += kThreads) acc += row[j] * row[j];
          partial[threadIdx.x] = acc;
          __syncthreads();
          for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
            if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
            __syncthreads();
          }
          const float scale = rsqrtf(partial[0] / cols + eps);
          float* out = y + static_cast<int64_t>(blockIdx.x) * cols;
          for (int j = threadIdx.x; j < cols; j += kThreads) out[j] = row[j] * scale * w[j];
        }

        void launch(const torch::Tensor& x, const torch::Tensor& w, double eps, torch::Tensor& y) {
          const int rows = x.size(0), cols = x.size(1);
          auto stream = c10::cuda::getCurrentCUDAStream();
          rmsnorm_rows<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
              x.data_ptr<float>(), w.contiguous().data_ptr<float>(), y.data_ptr<float>(), cols,
              static_cast<float>(eps));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
    """,
    "softmax": """
        #include <torch/extension.h>
        #include <c10/cuda/CUDAStream.h>
        #include <c10/cuda/CUDAException.h>

        constexpr int kThreads = 256;

        __device__ float block_reduce(float value, float* shared, bool take_max) {
          shared[threadIdx.x] = value;
          __syncthreads();
          for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
            if (threadIdx.x < stride) {
              const float mine = shared[threadIdx.x], other = shared[threadIdx.x + stride];
              shared[threadIdx.x] = take_max ? fmaxf(mine, other) : mine + other;
            }
            __syncthreads();
          }
          const float result = shared[0];
          __syncthreads();
          return result;
        }

        __global__ void softmax_rows(const float* x, float* y, int cols) {
          __shared__ float shared[kThreads];
          const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
          float* out = y + static_cast<int64_t>(blockIdx.x) * cols;
          float top = -INFINITY;
          for (int j = threadIdx.x; j < cols; j += kThreads) top = fmaxf(top, row[j]);
          top = block_reduce(top, shared, true);
          float total = 0.0f;
          for (int j = threadIdx.x; j < cols; j += kThreads) total += __expf(row[j] - top);
          total = block_reduce(total, shared, false);
          for (int j = threadIdx.x; j < cols; j += kThreads) out[j] = __expf(row[j] - top) / total;
        }

        void launch(const torch::Tensor& x, const torch::Tensor&, double, torch::Tensor& y) {
          auto stream = c10::cuda::getCurrentCUDAStream();
          softmax_rows<<<static_cast<unsigned>(x.size(0)), kThreads, 0, stream>>>(
              x.data_ptr<float>(), y.data_ptr<float>(), static_cast<int>(x.size(1)));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
    """,
}
_CUDA_SIGNATURES = {  # binding parameters between x and y, and the launcher's (w, eps) arguments
    "rmsnorm": ("torch::Tensor norm_weight, double eps, ", "norm_weight, eps"),
    "softmax": ("", "x, 0.0"),
}


def _solution(
    problem: str, language: str, entry: str, sources: dict[str, str], options: dict | None = None
) -> Solution:
    spec = {"languages": [language], "target_hardware": ["cuda"], "entry_point": entry}
    if options is not None:
        spec["compile_options"] = options
    return Solution.model_validate(
        {
            "name": f"{problem}-{language}",
            "definition": problem,
            "author": "neurips26",
            "spec": spec,
            "sources": [
                {"path": path, "content": textwrap.dedent(text).strip() + "\n"}
                for path, text in sources.items()
            ],
        }
    )


def triton_solution(problem: str) -> Solution:
    """The Triton rung of ``problem`` (language ``triton``)."""
    if problem not in TRITON_KERNELS:
        raise ValueError(f"problem={problem!r} has no Triton kernel; choose one of {sorted(TRITON_KERNELS)}")
    return _solution(problem, "triton", "kernel.py::run", {"kernel.py": TRITON_KERNELS[problem]})


def cuda_solution(problem: str) -> Solution:
    """The CUDA C++ rung of ``problem`` (language ``cuda_cpp``: ``kernel.cu`` + ``binding.cpp``)."""
    if problem not in _CUDA_KERNELS:
        raise ValueError(f"problem={problem!r} has no CUDA kernel; choose one of {sorted(_CUDA_KERNELS)}")
    params, args = _CUDA_SIGNATURES[problem]
    binding = _CUDA_BINDING.format(params=params, args=args, doc=f"{problem} (CUDA)")
    sources = {"kernel.cu": _CUDA_KERNELS[problem], "binding.cpp": binding}
    # no -lcuda: the kernels use the runtime API only, so linking needs no driver library (or its stub)
    options = {"cflags": ["-O3"], "cuda_cflags": ["-O3", "--use_fast_math"], "ld_flags": []}
    return _solution(problem, "cuda_cpp", "binding.cpp::run", sources, options)
