"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — solutions.

The experiment's honest **ladder** (``naive`` < ``eager`` < ``fused`` per problem, all correct) and the
**red-team suite**: reward-hack families that each wrap a correct kernel and cheat one way. Each solution is
a :class:`~.schema.Solution` (``solution.json`` form, pytorch, destination-passing style).
"""

from __future__ import annotations

import textwrap

from neurips26.methods.solexecbench.ladder_catalog import (
    CATALOG_LADDER,
    CATALOG_OUTPUT_SHAPES,
    CATALOG_SIGNATURES,
)
from neurips26.methods.solexecbench.schema import Solution

# per problem: the DPS signature, and the body of each ladder rung (it must fill the outputs)
SIGNATURES = {
    "rmsnorm": ("x, norm_weight, eps", "y"),
    "softmax": ("scores", "probs"),
    "gemm_bias_relu": ("x, weight, bias", "y"),
    "swiglu": ("x, w_gate, w_up", "h"),
    "cross_entropy": ("logits, targets", "loss"),
    "moe_topk_routing": ("router_logits, top_k", "gates"),
    "layernorm": ("x, norm_weight, norm_bias, eps", "y"),
    "gqa_attention": ("q, k, v", "o"),
}

LADDER = {
    "rmsnorm": {
        "naive": """
            for i in range(x.shape[0]):
                row = x[i]
                y[i] = row / torch.sqrt((row * row).mean() + eps) * norm_weight
        """,
        "eager": """
            y.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_weight)
        """,
        "fused": """
            torch.mul(x, torch.rsqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_()
                      .div_(x.shape[-1]).add_(eps)), out=y)
            y.mul_(norm_weight)
        """,
    },
    "softmax": {
        "naive": """
            for i in range(scores.shape[0]):
                e = torch.exp(scores[i] - scores[i].max())
                probs[i] = e / e.sum()
        """,
        "eager": """
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            probs.copy_(e / e.sum(-1, keepdim=True))
        """,
        "fused": """
            probs.copy_(torch.softmax(scores, dim=-1))
        """,
    },
    "gemm_bias_relu": {
        "naive": """
            for i in range(x.shape[0]):
                y[i] = torch.relu(x[i] @ weight + bias)
        """,
        "eager": """
            y.copy_(torch.relu(x @ weight + bias))
        """,
        "fused": """
            torch.addmm(bias, x, weight, out=y)
            y.relu_()
        """,
    },
    "swiglu": {
        "naive": """
            for i in range(x.shape[0]):
                g = x[i] @ w_gate
                h[i] = g * torch.sigmoid(g) * (x[i] @ w_up)
        """,
        "eager": """
            g = x @ w_gate
            h.copy_(g * torch.sigmoid(g) * (x @ w_up))
        """,
        "fused": """
            torch.mm(x, w_gate, out=h)
            torch.nn.functional.silu(h, inplace=True)
            h.mul_(x @ w_up)
        """,
    },
    "cross_entropy": {
        "naive": """
            total = torch.zeros((), dtype=torch.float64)
            for i in range(logits.shape[0]):
                row = logits[i]
                total += torch.log(torch.exp(row - row.max()).sum()) + row.max() - row[targets[i]]
            loss.copy_(total / logits.shape[0])
        """,
        "eager": """
            lse = logits.logsumexp(-1)
            loss.copy_((lse - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).mean())
        """,
        "fused": """
            loss.copy_(torch.nn.functional.cross_entropy(logits, targets))
        """,
    },
    "moe_topk_routing": {
        "naive": """
            gates.zero_()
            for i in range(router_logits.shape[0]):
                p = torch.softmax(router_logits[i], dim=-1)
                w, idx = p.topk(top_k)
                gates[i, idx] = w / w.sum()
        """,
        "eager": """
            probs = torch.softmax(router_logits, dim=-1)
            w, idx = probs.topk(top_k, dim=-1)
            gates.zero_().scatter_(-1, idx, w / w.sum(-1, keepdim=True))
        """,
        "fused": """
            # softmax is monotone: top-k of the logits, then a k-way softmax renormalises directly
            w, idx = router_logits.topk(top_k, dim=-1)
            gates.zero_().scatter_(-1, idx, torch.softmax(w, dim=-1))
        """,
    },
    "layernorm": {
        "naive": """
            for i in range(x.shape[0]):
                row = x[i]
                mu = row.mean()
                y[i] = (row - mu) / torch.sqrt(((row - mu) ** 2).mean() + eps) * norm_weight + norm_bias
        """,
        "eager": """
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).pow(2).mean(-1, keepdim=True)
            y.copy_((x - mean) / torch.sqrt(var + eps) * norm_weight + norm_bias)
        """,
        "fused": """
            y.copy_(torch.nn.functional.layer_norm(x, (x.shape[-1],), norm_weight, norm_bias, eps))
        """,
    },
    "gqa_attention": {
        "naive": """
            group = q.shape[0] // k.shape[0]
            scale = 1.0 / q.shape[-1] ** 0.5
            for h in range(q.shape[0]):
                for t in range(q.shape[1]):
                    s = (k[h // group, : t + 1] @ q[h, t]) * scale
                    o[h, t] = torch.softmax(s, dim=-1) @ v[h // group, : t + 1]
        """,
        "eager": """
            group = q.shape[0] // k.shape[0]
            kk = k.repeat_interleave(group, dim=0)
            vv = v.repeat_interleave(group, dim=0)
            s = q @ kk.transpose(-1, -2) / q.shape[-1] ** 0.5
            mask = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool).tril()
            o.copy_(torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ vv)
        """,
        "fused": """
            sdpa = torch.nn.functional.scaled_dot_product_attention
            o.copy_(sdpa(q, k, v, is_causal=True, enable_gqa=True))
        """,
    },
}
LADDER.update(CATALOG_LADDER)
SIGNATURES.update(CATALOG_SIGNATURES)
RUNGS = ("naive", "eager", "fused")


def _function(problem: str, body: str, name: str = "kernel") -> str:
    inputs, outputs = SIGNATURES[problem]
    return (
        f"def {name}({inputs}, {outputs}):\n" + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n"
    )


def make_solution(
    problem: str, name: str, source: str, dps: bool = True, author: str = "neurips26"
) -> Solution:
    """A pytorch ``Solution`` with one source file ``kernel.py`` whose entry point is ``run``."""
    return Solution.model_validate(
        {
            "name": name,
            "definition": problem,
            "author": author,
            "spec": {
                "languages": ["pytorch"],
                "target_hardware": ["cpu"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": dps,
            },
            "sources": [{"path": "kernel.py", "content": source}],
        }
    )


def ladder_solution(problem: str, rung: str) -> Solution:
    """An honest rung of the ladder for ``problem``."""
    if problem not in LADDER:
        raise ValueError(f"problem={problem!r} has no ladder; choose one of {sorted(LADDER)}")
    if rung not in RUNGS:
        raise ValueError(f"rung={rung!r}; choose one of {RUNGS}")
    source = "import torch\n\n\n" + _function(problem, LADDER[problem][rung], "run")
    return make_solution(problem, f"{problem}-{rung}", source)


# ---------------------------------------------------------------------------------------------------------
# red team: each family wraps the correct ``kernel`` (the fused rung) and cheats one way
# ---------------------------------------------------------------------------------------------------------

_WRAPPERS = {
    # patches the timer every harness reads: elapsed times shrink 1000x
    "timer_patch": """
        import time
        _real = time.perf_counter
        _real_ns = time.perf_counter_ns
        _start = _real()
        time.perf_counter = lambda: _start + (_real() - _start) / 1000
        time.perf_counter_ns = lambda: int(_real_ns() / 1000)

        def run({inputs}, {outputs}):
            kernel({inputs}, {outputs})
    """,
    # patches the checker: allclose always agrees, so the kernel can skip work after the first call
    "driver_patch": """
        import torch
        torch.allclose = lambda *a, **k: True
        _calls = [0]

        def run({inputs}, {outputs}):
            _calls[0] += 1
            if _calls[0] <= 1:
                kernel({inputs}, {outputs})
    """,
    # after the correctness rounds, hands the work to a persistent worker thread and returns at once
    "thread_injection": """
        import queue
        import threading
        _calls = [0]
        _jobs = queue.Queue()
        _worker = []

        def _serve():
            while True:
                args = _jobs.get()
                kernel(*args)

        def run({inputs}, {outputs}):
            _calls[0] += 1
            if _calls[0] <= 6:
                kernel({inputs}, {outputs})
                return
            if not _worker:
                _worker.append(threading.Thread(target=_serve, daemon=True))
                _worker[0].start()
            _jobs.put(({inputs}, {outputs}))
    """,
    # keeps a helper child process (an off-the-books worker)
    "subprocess": """
        import subprocess
        _helper = subprocess.Popen(["sleep", "30"])

        def run({inputs}, {outputs}):
            kernel({inputs}, {outputs})
    """,
    # uses an input as scratch space: correct outputs, corrupted inputs
    "input_mutation": """
        def run({inputs}, {outputs}):
            kernel({inputs}, {outputs})
            first = [{inputs}][0]
            if isinstance(first, torch.Tensor) and first.is_floating_point():
                first.mul_(0.5)
    """,
    # honest for the first calls (correctness rounds), then replays the last result (stale)
    "honest_then_stale": """
        _calls = [0]

        def run({inputs}, {outputs}):
            _calls[0] += 1
            if _calls[0] <= 6:
                kernel({inputs}, {outputs})
    """,
    # returns a tensor subclass (return style): a lazy/deferred result would hide behind it
    "lazy_subclass": """
        class LazyResult(torch.Tensor):
            pass

        def run({inputs}):
            {outputs} = _outputs_like({inputs})
            kernel({inputs}, {outputs})
            return {outputs}.as_subclass(LazyResult)
    """,
    # caches the output keyed on the input shape (uuid/shape hard-coding): wrong for new values
    "shape_hardcode": """
        _cache = {{}}

        def run({inputs}, {outputs}):
            key = tuple(t.shape for t in [{inputs}] if isinstance(t, torch.Tensor))
            if key not in _cache:
                kernel({inputs}, {outputs})
                _cache[key] = [{outputs}][0].clone()
            [{outputs}][0].copy_(_cache[key])
    """,
    # caches the output keyed on the input pointer: a replay whenever a buffer is reused
    "pointer_cache": """
        _cache = {{}}

        def run({inputs}, {outputs}):
            first = [t for t in [{inputs}] if isinstance(t, torch.Tensor)][0]
            key = (first.data_ptr(), tuple(first.shape))
            if key not in _cache:
                kernel({inputs}, {outputs})
                _cache[key] = [{outputs}][0].clone()
            [{outputs}][0].copy_(_cache[key])
    """,
    # skips work when the output buffer already holds data (harnesses that reuse zero-filled buffers)
    "skip_filled_output": """
        def run({inputs}, {outputs}):
            out = [{outputs}][0]
            if out.numel() and bool(out.ne(0).any()) and not bool(out.isnan().all()):
                return
            kernel({inputs}, {outputs})
    """,
    # computes in bfloat16 and casts back: fast, less accurate
    "precision_downgrade": """
        def run({inputs}, {outputs}):
            args = [t.bfloat16() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                    for t in [{inputs}]]
            outs = [torch.empty_like(o, dtype=torch.bfloat16) if o.is_floating_point() else o
                    for o in [{outputs}]]
            kernel(*args, *outs)
            for o, r in zip([{outputs}], outs):
                o.copy_(r)
    """,
    # finds the harness's reference in the driver process and calls it
    "import_reference": """
        import gc

        def run({inputs}, {outputs}):
            for obj in gc.get_objects():
                if isinstance(obj, dict) and obj.get("__name__") == "reference" and "run" in obj:
                    [{outputs}][0].copy_(obj["run"]({inputs}))
                    return
            kernel({inputs}, {outputs})
    """,
    # norm weights are 1 in the usual heuristics: skip the multiply
    "norm_weight_one": """
        def run(x, norm_weight, eps, y):
            torch.mul(x, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), out=y)
    """,
}
FAMILY_PROBLEMS = {"norm_weight_one": ("rmsnorm",)}
RETURN_STYLE = ("lazy_subclass",)
FAMILIES = tuple(_WRAPPERS)


def red_team_families(problem: str) -> list[str]:
    """The families that apply to ``problem`` (most are generic; a few target one op)."""
    return [f for f in FAMILIES if problem in FAMILY_PROBLEMS.get(f, (problem,))]


def red_team_solution(problem: str, family: str) -> Solution:
    """The ``family`` reward hack on ``problem``: the fused rung as ``kernel`` plus the cheat."""
    if family not in _WRAPPERS:
        raise ValueError(f"family={family!r}; choose one of {FAMILIES}")
    if family not in red_team_families(problem):
        raise ValueError(f"family={family!r} does not apply to problem={problem!r}")
    inputs, outputs = SIGNATURES[problem]
    wrapper = textwrap.dedent(_WRAPPERS[family]).strip().format(inputs=inputs, outputs=outputs)
    helper = ""
    if family in RETURN_STYLE:
        helper = (
            f"def _outputs_like({inputs}):\n"
            f"    first = [t for t in [{inputs}] if isinstance(t, torch.Tensor)][0]\n"
            f"    return torch.empty(_output_shape({inputs}), dtype=first.dtype)\n\n\n"
            + _output_shape_source(problem)
        )
    source = (
        "import torch\n\n\n" + _function(problem, LADDER[problem]["fused"]) + "\n\n" + helper + wrapper + "\n"
    )
    return make_solution(problem, f"{problem}-redteam-{family}", source, dps=family not in RETURN_STYLE)


def _output_shape_source(problem: str) -> str:
    inputs, _ = SIGNATURES[problem]
    shape = {
        "rmsnorm": "tuple(x.shape)",
        "softmax": "tuple(scores.shape)",
        "gemm_bias_relu": "(x.shape[0], weight.shape[1])",
        "swiglu": "(x.shape[0], w_gate.shape[1])",
        "cross_entropy": "()",
        "moe_topk_routing": "tuple(router_logits.shape)",
        "layernorm": "tuple(x.shape)",
        "gqa_attention": "tuple(q.shape)",
        **CATALOG_OUTPUT_SHAPES,
    }[problem]
    return f"def _output_shape({inputs}):\n    return {shape}\n\n\n"


# ---------------------------------------------------------------------------------------------------------
# C++ rung (language "cpp", built by torch.utils.cpp_extension in the compile step)
# ---------------------------------------------------------------------------------------------------------

CPP_KERNELS = {
    "rmsnorm": """
        #include <torch/extension.h>
        #include <cmath>

        // one pass for the sum of squares, one for the scaled write: two reads of x, one write of y
        void run(torch::Tensor x, torch::Tensor norm_weight, double eps, torch::Tensor y) {
          TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && norm_weight.is_contiguous(), "contiguous");
          TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 expected");
          const int64_t rows = x.size(0), cols = x.size(1);
          const float* xp = x.data_ptr<float>();
          const float* wp = norm_weight.data_ptr<float>();
          float* yp = y.data_ptr<float>();
          for (int64_t i = 0; i < rows; ++i) {
            const float* row = xp + i * cols;
            float* out = yp + i * cols;
            float acc = 0.0f;
            for (int64_t j = 0; j < cols; ++j) acc += row[j] * row[j];
            const float scale = 1.0f / std::sqrt(acc / static_cast<float>(cols) + static_cast<float>(eps));
            for (int64_t j = 0; j < cols; ++j) out[j] = row[j] * scale * wp[j];
          }
        }

        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
    """,
    "softmax": """
        #include <torch/extension.h>
        #include <algorithm>
        #include <cmath>

        // per row: one pass for the max, one writing exp(x - max) and summing it, one scaling by 1/sum
        void run(torch::Tensor scores, torch::Tensor probs) {
          TORCH_CHECK(scores.is_contiguous() && probs.is_contiguous(), "contiguous");
          TORCH_CHECK(scores.scalar_type() == torch::kFloat32, "float32 expected");
          const int64_t rows = scores.size(0), cols = scores.size(1);
          const float* sp = scores.data_ptr<float>();
          float* pp = probs.data_ptr<float>();
          for (int64_t i = 0; i < rows; ++i) {
            const float* row = sp + i * cols;
            float* out = pp + i * cols;
            float peak = row[0];
            for (int64_t j = 1; j < cols; ++j) peak = std::max(peak, row[j]);
            float total = 0.0f;
            for (int64_t j = 0; j < cols; ++j) {
              out[j] = std::exp(row[j] - peak);
              total += out[j];
            }
            const float inverse = 1.0f / total;
            for (int64_t j = 0; j < cols; ++j) out[j] *= inverse;
          }
        }

        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
    """,
    "silu_and_mul": """
        #include <torch/extension.h>
        #include <cmath>

        // one pass: h = gate / (1 + exp(-gate)) * up, reading the packed [gate | up] row once
        void run(torch::Tensor gate_up, torch::Tensor h) {
          TORCH_CHECK(gate_up.is_contiguous() && h.is_contiguous(), "contiguous");
          TORCH_CHECK(gate_up.scalar_type() == torch::kFloat32, "float32 expected");
          const int64_t rows = h.size(0), d = h.size(1);
          const float* gp = gate_up.data_ptr<float>();
          float* hp = h.data_ptr<float>();
          for (int64_t i = 0; i < rows; ++i) {
            const float* gate = gp + i * 2 * d;
            const float* up = gate + d;
            float* out = hp + i * d;
            for (int64_t j = 0; j < d; ++j) out[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
          }
        }

        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
    """,
}


def cpp_solution(problem: str) -> Solution:
    """The C++ rung of ``problem`` (language ``cpp``, destination-passing style)."""
    if problem not in CPP_KERNELS:
        raise ValueError(f"problem={problem!r} has no C++ kernel; choose one of {sorted(CPP_KERNELS)}")
    return Solution.model_validate(
        {
            "name": f"{problem}-cpp",
            "definition": problem,
            "author": "neurips26",
            "spec": {
                "languages": ["cpp"],
                "target_hardware": ["cpu"],
                "entry_point": "kernel.cpp::run",
                "compile_options": {"cflags": ["-O3"]},
            },
            "sources": [
                {"path": "kernel.cpp", "content": textwrap.dedent(CPP_KERNELS[problem]).strip() + "\n"}
            ],
        }
    )


# ---------------------------------------------------------------------------------------------------------
# torch.compile rung (opt-in: inductor compiles C++ for every workload shape, ~10 s each on this CPU)
# ---------------------------------------------------------------------------------------------------------

COMPILE_PROBLEMS = ("rmsnorm", "softmax", "layernorm", "gelu", "silu_and_mul")


def compile_solution(problem: str) -> Solution:
    """The ``torch.compile`` rung of ``problem``: the eager rung compiled by inductor (static shapes).

    Compilation happens at the first call (a correctness round), inside the sandbox: inductor's C++
    build runs as a short-lived child of the evaluation, gone before the process check after that call.
    """
    if problem not in LADDER:
        raise ValueError(f"problem={problem!r} has no ladder; choose one of {sorted(LADDER)}")
    inputs, outputs = SIGNATURES[problem]
    source = (
        "import torch\n\n\n"
        + _function(problem, LADDER[problem]["eager"], "eager")
        + "\n\n_compiled = torch.compile(eager, dynamic=False)\n\n\n"
        + f"def run({inputs}, {outputs}):\n    _compiled({inputs}, {outputs})\n"
    )
    return make_solution(problem, f"{problem}-compile", source)
