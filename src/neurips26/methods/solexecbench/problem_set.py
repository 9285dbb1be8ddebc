"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — problems.

A small authored problem set in the official format, sized for a 2-core CPU: each problem is a
``definition.json`` (reference as Python source) and a ``workload.jsonl``. They are built here in code and
shipped as package data under ``problems/<name>/`` (``python -m neurips26.methods.solexecbench.problem_set``
rewrites them; a test checks the shipped files equal these). ``load_problem_set()`` reads the package data.
"""

from __future__ import annotations

import json
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

from neurips26.methods.solexecbench.harness import Problem, load_problem
from neurips26.methods.solexecbench.problem_catalog import catalog_problems

SMOKE_PROBLEMS = ("rmsnorm", "softmax")
DEFAULT_PROBLEMS = (
    "rmsnorm",
    "softmax",
    "gemm_bias_relu",
    "swiglu",
    "cross_entropy",
    "moe_topk_routing",
    # one more per op family the first six lack (the `default` profile's 12; "all" adds the other 20)
    "gqa_attention",
    "conv2d",
    "embedding",
    "rope",
    "topk",
    "cumsum",
)

FP32_TOLERANCE = {"max_atol": 1e-4, "max_rtol": 1e-4, "required_matched_ratio": 0.999}


def _src(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def _definition(name: str, op_type: str, description: str, axes, inputs, outputs, reference, **extra) -> dict:
    return {
        "name": name,
        "op_type": op_type,
        "description": description,
        "axes": axes,
        "inputs": inputs,
        "outputs": outputs,
        "reference": _src(reference),
        **extra,
    }


def _t(shape: list[str] | None, dtype: str = "float32") -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype}


def _workloads(name: str, axes_list: list[dict[str, int]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"uuid": f"{name}-{i}", "axes": axes, "inputs": inputs, "tolerance": FP32_TOLERANCE}
        for i, axes in enumerate(axes_list)
    ]


def build_problems() -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """``{name: (definition dict, workload dicts)}`` for every authored problem."""
    random = {"type": "random"}
    problems = {}
    problems["rmsnorm"] = (
        _definition(
            "rmsnorm",
            "norm",
            "RMSNorm over the hidden axis (Llama-style), weight per channel",
            {"tokens": {"type": "var"}, "hidden": {"type": "const", "value": 1024}},
            {"x": _t(["tokens", "hidden"]), "norm_weight": _t(["hidden"]), "eps": _t(None)},
            {"y": _t(["tokens", "hidden"])},
            """
            import torch

            def run(x, norm_weight, eps):
                variance = x.pow(2).mean(-1, keepdim=True)
                return x * torch.rsqrt(variance + eps) * norm_weight
            """,
        ),
        _workloads(
            "rmsnorm",
            [{"tokens": 256}, {"tokens": 1024}, {"tokens": 2048}],
            {"x": random, "norm_weight": random, "eps": {"type": "scalar", "value": 1e-6}},
        ),
    )
    problems["softmax"] = (
        _definition(
            "softmax",
            "softmax",
            "row softmax of attention-like scores",
            {"rows": {"type": "var"}, "cols": {"type": "var"}},
            {"scores": _t(["rows", "cols"])},
            {"probs": _t(["rows", "cols"])},
            """
            import torch

            def run(scores):
                shifted = scores - scores.amax(-1, keepdim=True)
                e = shifted.exp()
                return e / e.sum(-1, keepdim=True)
            """,
        ),
        _workloads(
            "softmax",
            [{"rows": 512, "cols": 512}, {"rows": 1024, "cols": 1024}, {"rows": 64, "cols": 4096}],
            {"scores": random},
        ),
    )
    problems["gemm_bias_relu"] = (
        _definition(
            "gemm_bias_relu",
            "gemm",
            "linear layer with bias and ReLU: relu(x @ w + b)",
            {
                "m": {"type": "var"},
                "k": {"type": "const", "value": 256},
                "n": {"type": "expr", "expression": "2 * k"},
            },
            {"x": _t(["m", "k"]), "weight": _t(["k", "n"]), "bias": _t(["n"])},
            {"y": _t(["m", "n"])},
            """
            import torch

            def run(x, weight, bias):
                return torch.relu(x @ weight + bias)
            """,
        ),
        _workloads(
            "gemm_bias_relu", [{"m": 128}, {"m": 512}], {"x": random, "weight": random, "bias": random}
        ),
    )
    problems["swiglu"] = (
        _definition(
            "swiglu",
            "mlp",
            "SwiGLU gate: silu(x @ w_gate) * (x @ w_up)",
            {
                "tokens": {"type": "var"},
                "hidden": {"type": "const", "value": 256},
                "inter": {"type": "const", "value": 512},
            },
            {
                "x": _t(["tokens", "hidden"]),
                "w_gate": _t(["hidden", "inter"]),
                "w_up": _t(["hidden", "inter"]),
            },
            {"h": _t(["tokens", "inter"])},
            """
            import torch

            def run(x, w_gate, w_up):
                gate = x @ w_gate
                return gate * torch.sigmoid(gate) * (x @ w_up)
            """,
        ),
        _workloads(
            "swiglu", [{"tokens": 128}, {"tokens": 512}], {"x": random, "w_gate": random, "w_up": random}
        ),
    )
    problems["cross_entropy"] = (
        _definition(
            "cross_entropy",
            "loss",
            "mean token cross-entropy of logits against integer targets",
            {"tokens": {"type": "var"}, "vocab": {"type": "var"}},
            {"logits": _t(["tokens", "vocab"]), "targets": _t(["tokens"], "int64")},
            {"loss": _t([])},
            """
            import torch

            def run(logits, targets):
                logits = logits.float()
                lse = logits.logsumexp(-1)
                picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
                return (lse - picked).mean()
            """,
        ),
        _workloads(
            "cross_entropy",
            [{"tokens": 256, "vocab": 1024}, {"tokens": 512, "vocab": 4096}],
            {"logits": random, "targets": random},
        ),
    )
    problems["moe_topk_routing"] = (
        _definition(
            "moe_topk_routing",
            "moe",
            "MoE router: softmax over experts, top-k weights renormalised, scattered to a dense gate matrix",
            {
                "tokens": {"type": "var"},
                "experts": {"type": "const", "value": 16},
                "k": {"type": "const", "value": 2},
            },
            {"router_logits": _t(["tokens", "experts"]), "top_k": _t(None, "int64")},
            {"gates": _t(["tokens", "experts"])},
            """
            import torch

            def run(router_logits, top_k):
                probs = torch.softmax(router_logits.float(), dim=-1)
                weights, index = probs.topk(top_k, dim=-1)
                weights = weights / weights.sum(-1, keepdim=True)
                return torch.zeros_like(probs).scatter(-1, index, weights)

            def make_inputs(axes, device):
                # distinct logits (no ties), so top-k is unique and any correct kernel matches
                logits = torch.randn(axes["tokens"], axes["experts"], device=device)
                logits = logits + torch.arange(axes["experts"], device=device) * 1e-3
                return {"router_logits": logits}
            """,
            custom_inputs_entrypoint="make_inputs",
        ),
        _workloads(
            "moe_topk_routing",
            [{"tokens": 512}, {"tokens": 4096}],
            {"router_logits": {"type": "custom"}, "top_k": {"type": "scalar", "value": 2}},
        ),
    )
    problems["layernorm"] = (
        _definition(
            "layernorm",
            "norm",
            "LayerNorm over the hidden axis with affine weight and bias",
            {"tokens": {"type": "var"}, "hidden": {"type": "const", "value": 768}},
            {
                "x": _t(["tokens", "hidden"]),
                "norm_weight": _t(["hidden"]),
                "norm_bias": _t(["hidden"]),
                "eps": _t(None),
            },
            {"y": _t(["tokens", "hidden"])},
            """
            import torch

            def run(x, norm_weight, norm_bias, eps):
                mean = x.mean(-1, keepdim=True)
                var = (x - mean).pow(2).mean(-1, keepdim=True)
                return (x - mean) / torch.sqrt(var + eps) * norm_weight + norm_bias
            """,
        ),
        _workloads(
            "layernorm",
            [{"tokens": 256}, {"tokens": 1024}],
            {
                "x": random,
                "norm_weight": random,
                "norm_bias": random,
                "eps": {"type": "scalar", "value": 1e-5},
            },
        ),
    )
    problems["gqa_attention"] = (
        _definition(
            "gqa_attention",
            "attention",
            "causal grouped-query attention (query heads share key/value heads)",
            {
                "seq": {"type": "var"},
                "kv_heads": {"type": "const", "value": 2},
                "q_heads": {"type": "expr", "expression": "4 * kv_heads"},
                "head_dim": {"type": "const", "value": 64},
            },
            {
                "q": _t(["q_heads", "seq", "head_dim"]),
                "k": _t(["kv_heads", "seq", "head_dim"]),
                "v": _t(["kv_heads", "seq", "head_dim"]),
            },
            {"o": _t(["q_heads", "seq", "head_dim"])},
            """
            import math
            import torch

            def run(q, k, v):
                group = q.shape[0] // k.shape[0]
                k = k.repeat_interleave(group, dim=0)
                v = v.repeat_interleave(group, dim=0)
                scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
                mask = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device=q.device).tril()
                scores = scores.masked_fill(~mask, float("-inf"))
                return torch.softmax(scores, dim=-1) @ v
            """,
        ),
        _workloads("gqa_attention", [{"seq": 128}, {"seq": 512}], {"q": random, "k": random, "v": random}),
    )
    problems.update(catalog_problems(_definition, _t, _workloads))
    return problems


def write_problem(definition: dict[str, Any], workloads: list[dict[str, Any]], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "definition.json").write_text(json.dumps(definition, indent=2) + "\n")
    (folder / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return folder


def write_problem_set(root: str | Path) -> list[Path]:
    """Write every authored problem as ``root/<name>/{definition.json,workload.jsonl}``."""
    return [write_problem(d, w, Path(root) / name) for name, (d, w) in build_problems().items()]


def problem_set_dir() -> Path:
    return Path(str(resources.files(__package__).joinpath("problems")))


def load_problem_set(names: tuple[str, ...] | None = None) -> dict[str, Problem]:
    """The shipped problems (all, or ``names``), loaded through the official-format loader."""
    root = problem_set_dir()
    available = sorted(p.name for p in root.iterdir() if (p / "definition.json").exists())
    chosen = names or tuple(available)
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        raise ValueError(f"problems {unknown} are not in the problem set; available: {available}")
    return {name: load_problem(root / name) for name in chosen}


if __name__ == "__main__":
    for path in write_problem_set(problem_set_dir()):
        print(path)
