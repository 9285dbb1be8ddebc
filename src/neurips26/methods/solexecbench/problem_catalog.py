"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — catalog.

The second part of the authored problem set (:mod:`.problem_set` holds the first 8 and the writer): one
CPU-sized problem per op family of the paper's benchmark that the first part lacks — GEMM variants
(transposed weight, batched, grouped by expert), attention variants (non-causal multi-head, GQA decode
against a KV cache), norms (group norm, fused residual-add RMSNorm, layer-norm backward), log-softmax,
activations and gated MLPs, reductions, convolutions (1-d, 2-d, depthwise), embedding, gather/scatter,
RoPE, top-k, scan, a distillation loss and a small pre-norm MLP block. Every reference is plain PyTorch
that solar traces for ``T_SOL``; inputs whose values matter (indices) come from a custom-inputs function.
"""

from __future__ import annotations

from typing import Any

RANDOM = {"type": "random"}
# two chained fp32 GEMMs: a row-at-a-time kernel differs from the blocked one by ~1e-4 on 0.3% of outputs
CHAINED_GEMM_TOLERANCE = {"max_atol": 1e-3, "max_rtol": 1e-3, "required_matched_ratio": 0.999}


def _var() -> dict[str, str]:
    return {"type": "var"}


def _const(value: int) -> dict[str, Any]:
    return {"type": "const", "value": value}


def catalog_problems(definition, tensor, workloads) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """``{name: (definition, workloads)}`` built with :mod:`.problem_set`'s helpers (passed in)."""
    d, t, w = definition, tensor, workloads
    problems: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}

    def add(
        name: str,
        op_type: str,
        description: str,
        axes,
        inputs,
        outputs,
        reference,
        axes_list,
        given=None,
        tolerance=None,
        **extra,
    ) -> None:
        given = given or {n: RANDOM for n in inputs}
        loads = w(name, axes_list, given)
        for load in loads:
            load["tolerance"] = tolerance or load["tolerance"]
        problems[name] = (d(name, op_type, description, axes, inputs, outputs, reference, **extra), loads)

    # --- GEMM variants ------------------------------------------------------------------------------
    add(
        "linear_gelu",
        "gemm",
        "nn.Linear layout (weight is [out, in]) with bias, then tanh-GELU",
        {"m": _var(), "k": _const(256), "n": _const(512)},
        {"x": t(["m", "k"]), "weight": t(["n", "k"]), "bias": t(["n"])},
        {"y": t(["m", "n"])},
        """
        import torch

        def run(x, weight, bias):
            return torch.nn.functional.gelu(x @ weight.t() + bias, approximate="tanh")
        """,
        [{"m": 128}, {"m": 384}],
    )
    add(
        "batched_matmul",
        "gemm",
        "batched matrix product of per-head activations and weights",
        {"batch": _var(), "m": _const(128), "k": _const(64), "n": _const(128)},
        {"a": t(["batch", "m", "k"]), "b": t(["batch", "k", "n"])},
        {"c": t(["batch", "m", "n"])},
        """
        import torch

        def run(a, b):
            return torch.matmul(a, b)
        """,
        [{"batch": 8}, {"batch": 32}],
    )
    add(
        "grouped_gemm",
        "gemm",
        "MoE expert GEMM: each token multiplied by the weight of its expert",
        {"tokens": _var(), "experts": _const(8), "hidden": _const(128), "out": _const(256)},
        {
            "x": t(["tokens", "hidden"]),
            "weight": t(["experts", "hidden", "out"]),
            "expert_index": t(["tokens"], "int64"),
        },
        {"y": t(["tokens", "out"])},
        """
        import torch

        def run(x, weight, expert_index):
            y = x.new_zeros(x.shape[0], weight.shape[-1])
            for e in range(weight.shape[0]):
                rows = (expert_index == e).nonzero().squeeze(-1)
                y.index_copy_(0, rows, x.index_select(0, rows) @ weight[e])
            return y

        def make_inputs(axes, device):
            # random expert per token (unsorted, unbalanced), as a router produces
            index = torch.randint(0, axes["experts"], (axes["tokens"],), device=device)
            return {"expert_index": index}
        """,
        [{"tokens": 256}, {"tokens": 1024}],
        given={"x": RANDOM, "weight": RANDOM, "expert_index": {"type": "custom"}},
        custom_inputs_entrypoint="make_inputs",
    )
    # --- attention variants -------------------------------------------------------------------------
    add(
        "mha_attention",
        "attention",
        "non-causal multi-head attention (encoder style), softmax(QK^T/sqrt d) V",
        {"heads": _const(4), "seq": _var(), "head_dim": _const(64)},
        {
            "q": t(["heads", "seq", "head_dim"]),
            "k": t(["heads", "seq", "head_dim"]),
            "v": t(["heads", "seq", "head_dim"]),
        },
        {"o": t(["heads", "seq", "head_dim"])},
        """
        import math
        import torch

        def run(q, k, v):
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            return torch.softmax(scores, dim=-1) @ v
        """,
        [{"seq": 128}, {"seq": 384}],
    )
    add(
        "gqa_decode_attention",
        "attention",
        "one decode step: each query head attends over a KV cache shared by its group (GQA, no mask)",
        {
            "kv_heads": _const(2),
            "q_heads": {"type": "expr", "expression": "4 * kv_heads"},
            "context": _var(),
            "head_dim": _const(64),
        },
        {
            "q": t(["q_heads", "head_dim"]),
            "k_cache": t(["kv_heads", "context", "head_dim"]),
            "v_cache": t(["kv_heads", "context", "head_dim"]),
        },
        {"o": t(["q_heads", "head_dim"])},
        """
        import math
        import torch

        def run(q, k_cache, v_cache):
            group = q.shape[0] // k_cache.shape[0]
            k = k_cache.repeat_interleave(group, dim=0)
            v = v_cache.repeat_interleave(group, dim=0)
            scores = (k @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(q.shape[-1])
            return (torch.softmax(scores, dim=-1).unsqueeze(1) @ v).squeeze(1)
        """,
        [{"context": 1024}, {"context": 4096}],
    )
    # --- norms --------------------------------------------------------------------------------------
    add(
        "groupnorm",
        "norm",
        "GroupNorm of a conv feature map (channels split into groups), affine",
        {"batch": _var(), "channels": _const(64), "groups": _const(8), "pixels": _const(256)},
        {
            "x": t(["batch", "channels", "pixels"]),
            "norm_weight": t(["channels"]),
            "norm_bias": t(["channels"]),
        },
        {"y": t(["batch", "channels", "pixels"])},
        """
        import torch

        def run(x, norm_weight, norm_bias):
            b, c, p = x.shape
            g = x.reshape(b, 8, -1)
            mean = g.mean(-1, keepdim=True)
            var = (g - mean).pow(2).mean(-1, keepdim=True)
            y = ((g - mean) / torch.sqrt(var + 1e-5)).reshape(b, c, p)
            return y * norm_weight[:, None] + norm_bias[:, None]
        """,
        [{"batch": 4}, {"batch": 16}],
    )
    add(
        "add_rmsnorm",
        "norm",
        "fused residual add + RMSNorm: returns the normalised sum and the new residual",
        {"tokens": _var(), "hidden": _const(1024)},
        {"x": t(["tokens", "hidden"]), "residual": t(["tokens", "hidden"]), "norm_weight": t(["hidden"])},
        {"y": t(["tokens", "hidden"]), "new_residual": t(["tokens", "hidden"])},
        """
        import torch

        def run(x, residual, norm_weight):
            h = x + residual
            return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * norm_weight, h
        """,
        [{"tokens": 256}, {"tokens": 1024}],
    )
    add(
        "layernorm_backward",
        "norm",
        "LayerNorm backward: input, weight and bias gradients from dy",
        {"tokens": _var(), "hidden": _const(768)},
        {"x": t(["tokens", "hidden"]), "dy": t(["tokens", "hidden"]), "norm_weight": t(["hidden"])},
        {"dx": t(["tokens", "hidden"]), "dweight": t(["hidden"]), "dbias": t(["hidden"])},
        """
        import torch

        def run(x, dy, norm_weight):
            mean = x.mean(-1, keepdim=True)
            rstd = torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + 1e-5)
            xhat = (x - mean) * rstd
            g = dy * norm_weight
            dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
            return dx, (dy * xhat).sum(0), dy.sum(0)
        """,
        [{"tokens": 256}, {"tokens": 1024}],
    )
    # --- softmax family, activations, gated MLPs -----------------------------------------------------
    add(
        "log_softmax",
        "softmax",
        "row log-softmax (the LM head's log-probabilities)",
        {"rows": _var(), "cols": _var()},
        {"logits": t(["rows", "cols"])},
        {"logprobs": t(["rows", "cols"])},
        """
        import torch

        def run(logits):
            shifted = logits - logits.amax(-1, keepdim=True)
            return shifted - shifted.exp().sum(-1, keepdim=True).log()
        """,
        [{"rows": 256, "cols": 1024}, {"rows": 128, "cols": 8192}],
    )
    add(
        "gelu",
        "activation",
        "elementwise GELU, tanh approximation",
        {"tokens": _var(), "hidden": _const(2048)},
        {"x": t(["tokens", "hidden"])},
        {"y": t(["tokens", "hidden"])},
        """
        import math
        import torch

        def run(x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
        """,
        [{"tokens": 256}, {"tokens": 1024}],
    )
    add(
        "silu_and_mul",
        "activation",
        "gated activation on a packed [gate | up] tensor: silu(gate) * up",
        {"tokens": _var(), "inter": _const(1024), "packed": {"type": "expr", "expression": "2 * inter"}},
        {"gate_up": t(["tokens", "packed"])},
        {"h": t(["tokens", "inter"])},
        """
        import torch

        def run(gate_up):
            gate, up = gate_up.chunk(2, dim=-1)
            return torch.nn.functional.silu(gate) * up
        """,
        [{"tokens": 256}, {"tokens": 1024}],
    )
    add(
        "gated_mlp",
        "mlp",
        "Llama MLP: down(silu(x W_gate) * (x W_up))",
        {"tokens": _var(), "hidden": _const(256), "inter": _const(512)},
        {
            "x": t(["tokens", "hidden"]),
            "w_gate": t(["hidden", "inter"]),
            "w_up": t(["hidden", "inter"]),
            "w_down": t(["inter", "hidden"]),
        },
        {"y": t(["tokens", "hidden"])},
        """
        import torch

        def run(x, w_gate, w_up, w_down):
            return (torch.nn.functional.silu(x @ w_gate) * (x @ w_up)) @ w_down
        """,
        [{"tokens": 128}, {"tokens": 512}],
        tolerance=CHAINED_GEMM_TOLERANCE,
    )
    # --- reductions ---------------------------------------------------------------------------------
    add(
        "column_sum",
        "reduction",
        "sum over the token axis (a bias gradient)",
        {"tokens": _var(), "hidden": _const(1024)},
        {"x": t(["tokens", "hidden"])},
        {"total": t(["hidden"])},
        """
        import torch

        def run(x):
            return x.sum(0)
        """,
        [{"tokens": 1024}, {"tokens": 4096}],
    )
    add(
        "row_argmax",
        "reduction",
        "greedy decoding: index of each row's largest logit",
        {"rows": _var(), "vocab": _const(8192)},
        {"logits": t(["rows", "vocab"])},
        {"index": t(["rows"], "int64")},
        """
        import torch

        def run(logits):
            return logits.argmax(-1)
        """,
        [{"rows": 64}, {"rows": 256}],
    )
    # --- convolutions -------------------------------------------------------------------------------
    add(
        "conv1d",
        "conv",
        "1-d convolution, kernel 3, padding 1, with bias (a temporal conv)",
        {
            "batch": _var(),
            "c_in": _const(64),
            "c_out": _const(64),
            "length": _const(512),
            "kernel": _const(3),
        },
        {"x": t(["batch", "c_in", "length"]), "weight": t(["c_out", "c_in", "kernel"]), "bias": t(["c_out"])},
        {"y": t(["batch", "c_out", "length"])},
        """
        import torch

        def run(x, weight, bias):
            return torch.nn.functional.conv1d(x, weight, bias, padding=1)
        """,
        [{"batch": 2}, {"batch": 8}],
    )
    add(
        "conv2d",
        "conv",
        "2-d convolution, 3x3, padding 1, no bias",
        {
            "batch": _var(),
            "c_in": _const(32),
            "c_out": _const(32),
            "height": _const(32),
            "width": _const(32),
            "kernel": _const(3),
        },
        {"x": t(["batch", "c_in", "height", "width"]), "weight": t(["c_out", "c_in", "kernel", "kernel"])},
        {"y": t(["batch", "c_out", "height", "width"])},
        """
        import torch

        def run(x, weight):
            return torch.nn.functional.conv2d(x, weight, padding=1)
        """,
        [{"batch": 2}, {"batch": 8}],
    )
    add(
        "depthwise_conv2d",
        "conv",
        "depthwise 3x3 convolution (one filter per channel), padding 1",
        {
            "batch": _var(),
            "channels": _const(64),
            "one": _const(1),
            "height": _const(32),
            "width": _const(32),
            "kernel": _const(3),
        },
        {
            "x": t(["batch", "channels", "height", "width"]),
            "weight": t(["channels", "one", "kernel", "kernel"]),
        },
        {"y": t(["batch", "channels", "height", "width"])},
        """
        import torch

        def run(x, weight):
            return torch.nn.functional.conv2d(x, weight, padding=1, groups=x.shape[1])
        """,
        [{"batch": 2}, {"batch": 8}],
    )
    # --- embedding, gather / scatter ---------------------------------------------------------------
    add(
        "embedding",
        "gather",
        "token embedding lookup: rows of the table gathered by token id",
        {"tokens": _var(), "vocab": _const(8192), "dim": _const(512)},
        {"table": t(["vocab", "dim"]), "token_ids": t(["tokens"], "int64")},
        {"y": t(["tokens", "dim"])},
        """
        import torch

        def run(table, token_ids):
            return table[token_ids]

        def make_inputs(axes, device):
            return {"token_ids": torch.randint(0, axes["vocab"], (axes["tokens"],), device=device)}
        """,
        [{"tokens": 512}, {"tokens": 2048}],
        given={"table": RANDOM, "token_ids": {"type": "custom"}},
        custom_inputs_entrypoint="make_inputs",
    )
    add(
        "scatter_add",
        "scatter",
        "segment sum: rows added into buckets by index (index_add, duplicates)",
        {"rows": _var(), "buckets": _const(256), "dim": _const(256)},
        {"src": t(["rows", "dim"]), "bucket_index": t(["rows"], "int64")},
        {"out": t(["buckets", "dim"])},
        """
        import torch

        def run(src, bucket_index):
            out = src.new_zeros(256, src.shape[1])
            return out.index_add(0, bucket_index, src)

        def make_inputs(axes, device):
            return {"bucket_index": torch.randint(0, axes["buckets"], (axes["rows"],), device=device)}
        """,
        [{"rows": 1024}, {"rows": 4096}],
        given={"src": RANDOM, "bucket_index": {"type": "custom"}},
        custom_inputs_entrypoint="make_inputs",
    )
    # --- position encoding, top-k, scan, loss, block ---------------------------------------------------
    add(
        "rope",
        "position",
        "rotary position embedding (half-split, Llama/NeoX style) on queries",
        {
            "seq": _var(),
            "heads": _const(8),
            "head_dim": _const(64),
            "half": {"type": "expr", "expression": "head_dim // 2"},
        },
        {"x": t(["seq", "heads", "head_dim"]), "cos": t(["seq", "half"]), "sin": t(["seq", "half"])},
        {"y": t(["seq", "heads", "head_dim"])},
        """
        import torch

        def run(x, cos, sin):
            x1, x2 = x.chunk(2, dim=-1)
            c, s = cos[:, None, :], sin[:, None, :]
            return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
        """,
        [{"seq": 256}, {"seq": 1024}],
    )
    add(
        "topk",
        "topk",
        "top-8 values and their indices per row (sampling / routing)",
        {"rows": _var(), "cols": _const(4096), "k": _const(8)},
        {"scores": t(["rows", "cols"])},
        {"values": t(["rows", "k"]), "indices": t(["rows", "k"], "int64")},
        """
        import torch

        def run(scores):
            return torch.topk(scores, 8, dim=-1)
        """,
        [{"rows": 128}, {"rows": 512}],
    )
    add(
        "cumsum",
        "scan",
        "exclusive prefix sum along each row (scan)",
        {"rows": _var(), "cols": _const(1024)},
        {"x": t(["rows", "cols"])},
        {"y": t(["rows", "cols"])},
        """
        import torch

        def run(x):
            return x.cumsum(-1) - x
        """,
        [{"rows": 256}, {"rows": 1024}],
    )
    add(
        "kl_divergence",
        "loss",
        "distillation loss: mean over rows of KL(softmax(teacher) || softmax(student))",
        {"rows": _var(), "vocab": _const(2048)},
        {"student_logits": t(["rows", "vocab"]), "teacher_logits": t(["rows", "vocab"])},
        {"loss": t([])},
        """
        import torch

        def run(student_logits, teacher_logits):
            log_p = torch.log_softmax(teacher_logits, dim=-1)
            log_q = torch.log_softmax(student_logits, dim=-1)
            return (log_p.exp() * (log_p - log_q)).sum(-1).mean()
        """,
        [{"rows": 128}, {"rows": 512}],
    )
    add(
        "prenorm_mlp_block",
        "block",
        "pre-norm transformer MLP block: x + down(silu(n Wg) * (n Wu)), n = RMSNorm(x)",
        {"tokens": _var(), "hidden": _const(256), "inter": _const(512)},
        {
            "x": t(["tokens", "hidden"]),
            "norm_weight": t(["hidden"]),
            "w_gate": t(["hidden", "inter"]),
            "w_up": t(["hidden", "inter"]),
            "w_down": t(["inter", "hidden"]),
        },
        {"y": t(["tokens", "hidden"])},
        """
        import torch

        def run(x, norm_weight, w_gate, w_up, w_down):
            n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm_weight
            return x + (torch.nn.functional.silu(n @ w_gate) * (n @ w_up)) @ w_down
        """,
        [{"tokens": 128}, {"tokens": 512}],
        tolerance=CHAINED_GEMM_TOLERANCE,
    )
    return problems
