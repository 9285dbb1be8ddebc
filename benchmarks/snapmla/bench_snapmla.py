"""SnapMLA benchmark: per-layer content/RoPE heterogeneity, error ablation, CPU decode time, bytes model.

Run: ``PYTHONPATH=src python benchmarks/snapmla/bench_snapmla.py [--context 1024] [--model tiny-mla|random]``.
Prints Markdown tables. CPU times are the PyTorch emulation's, not a GPU kernel's; the throughput table is
an analytic memory-bound MODEL.
"""

from __future__ import annotations

import argparse
import time

import torch

from neurips26.methods.snapmla.analysis import (
    attention_kernel_error,
    decode_step_seconds,
    layer_ranges,
    memory_bound_attention_speedup,
)
from neurips26.methods.snapmla.baselines import RECIPES
from neurips26.methods.snapmla.cache_format import bytes_per_token, decode_latent, encode_latent
from neurips26.methods.snapmla.core import project_latent_output
from neurips26.methods.snapmla.experiment import _window, load_model
from neurips26.methods.snapmla.integration import capture_latents
from neurips26.methods.snapmla.pipeline import SNAPMLA

ABLATION = {
    "SnapMLA cache only (BF16 Q, BF16 P)": SNAPMLA.with_options(query_format="bf16", p_mode="bf16"),
    "+ FP8 Q (aligned RoPE), BF16 P": SNAPMLA.with_options(p_mode="bf16"),
    "+ block-64 FP8 P = SnapMLA": SNAPMLA,
    "SnapMLA with pow2 scales": SNAPMLA.with_options(scale_mode="pow2"),
}


def heterogeneity_table(layers: list[dict]) -> list[str]:
    rows = [
        "| layer | max abs c | max abs k_R | FP8 rel. MSE c (own scale) | FP8 rel. MSE k_R (own scale) "
        "| FP8 rel. MSE c (scale shared with k_R) |",
        "|---|---|---|---|---|---|",
    ]
    for index, layer in enumerate(layers):
        r = layer_ranges(layer["content"], layer["rope"])
        rows.append(
            f"| {index} | {r.content_amax:.3g} | {r.rope_amax:.3g} | {r.content_fp8_rel_mse:.2e} "
            f"| {r.rope_fp8_rel_mse:.2e} | {r.joint_content_fp8_rel_mse:.2e} |"
        )
    return rows


def error_table(layers: list[dict], n_query: int) -> list[str]:
    recipes = {name: RECIPES[name] for name in ("bf16", "naive_fp8", "per_token_fp8_rope", "flashmla_fp8")}
    recipes.update(ABLATION)
    rows = ["| recipe | attn. output rel. error (mean over layers) | attention KL |", "|---|---|---|"]
    for name, recipe in recipes.items():
        errors = [attention_kernel_error(recipe, layer, n_query) for layer in layers]
        rel = sum(e.relative_error for e in errors) / len(errors)
        kl = sum(e.kl for e in errors) / len(errors)
        rows.append(f"| {name} | {rel:.3e} | {kl:.2e} |")
    return rows


def value_key_split_table(layers: list[dict], n_query: int) -> list[str]:
    """Output error when only K or only V (= c_KV) is rounded, own per-token scale vs scale shared with
    k_R (float64 softmax, all else exact)."""
    rows = ["| layer | c scale | K only | V only | K and V |", "|---|---|---|---|---|"]
    for index, layer in enumerate(layers):
        c, r = layer["content"].double(), layer["rope"].double()
        total = c.shape[1]
        query_pos = torch.arange(total - n_query, total)[:, None]
        mask = torch.zeros(n_query, total, dtype=torch.float64)
        mask = mask.masked_fill(~(torch.arange(total)[None] <= query_pos), float("-inf"))
        q_c = layer["q_content"][:, :, -n_query:].double()
        q_r = layer["q_rope"][:, :, -n_query:].double()

        def output(k_c, k_r, v, q_c=q_c, q_r=q_r, mask=mask, layer=layer):
            logits = (q_c @ k_c.unsqueeze(1).mT + q_r @ k_r.unsqueeze(1).mT) * layer["scaling"] + mask
            return project_latent_output(logits.softmax(-1) @ v.unsqueeze(1), layer["w_uv"].double())

        reference = output(c, r, c)
        for label, fmt in (("own", "fp8_token"), ("shared with k_R", "fp8_token_joint")):
            q_content, q_rope = (t.double() for t in decode_latent(encode_latent(c, r, fmt)))
            errors = [
                float((output(*operands) - reference).norm() / reference.norm())
                for operands in ((q_content, q_rope, c), (c, r, q_content), (q_content, q_rope, q_content))
            ]
            rows.append(f"| {index} | {label} | " + " | ".join(f"{e:.2e}" for e in errors) + " |")
    return rows


def hf_decode_seconds(model: torch.nn.Module, ids: torch.Tensor, reps: int = 3) -> float:
    """One decode step of the whole transformers model (eager attention, DynamicCache of expanded K/V)."""
    from transformers import DynamicCache

    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(ids[:, :-1], past_key_values=cache, use_cache=True)
        times = []
        for _ in range(reps):
            trial = DynamicCache(config=model.config)
            for layer_idx, layer in enumerate(cache.layers):
                trial.update(layer.keys.clone(), layer.values.clone(), layer_idx)
            start = time.perf_counter()
            model(ids[:, -1:], past_key_values=trial, use_cache=True)
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--model", default="tiny-mla", choices=["tiny-mla", "random"])
    parser.add_argument("--n-query", type=int, default=32)
    parser.add_argument("--rope-gain", type=float, default=1.0, help="function-preserving k_R x gain")
    parser.add_argument("--split-only", action="store_true", help="print only the K/V error split")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer, trained = load_model(args.model, args.rope_gain)
    print(
        f"model: {'zoo tiny-mla (trained)' if trained else 'random-weight DeepseekV3 fallback'}, "
        f"context {args.context} tokens, rope_gain {args.rope_gain}\n"
    )
    ids = _window(model, tokenizer, args.context, seed=0)
    layers = capture_latents(model, ids)
    print("\n".join(value_key_split_table(layers, args.n_query)) + "\n")
    if args.split_only:
        return
    print("\n".join(heterogeneity_table(layers)) + "\n")
    print("\n".join(error_table(layers, args.n_query)) + "\n")

    print("| cached tokens | recipe | CPU attention decode step, all layers (ms) |\n|---|---|---|")
    for tokens in (512, 1024, 2048, 4096):
        long_ids = _window(model, tokenizer, tokens, seed=1)
        captured = capture_latents(model, long_ids)
        for name in ("bf16", "flashmla_fp8", "snapmla"):
            ms = 1e3 * decode_step_seconds(RECIPES[name], captured, reps=3)
            print(f"| {tokens} | {name} | {ms:.2f} |")
        hf_ms = 1e3 * hf_decode_seconds(model, long_ids)
        print(f"| {tokens} | transformers eager, whole model step | {hf_ms:.2f} |")
    print()
    print(
        "| cached tokens | format | bytes/token/layer (DSV3) | MODEL memory-bound attention speedup vs BF16 |"
    )
    print("|---|---|---|---|")
    for tokens in (4096, 32768):
        for name in ("bf16", "naive_fp8", "flashmla_fp8", "snapmla"):
            fmt = RECIPES[name].kv_format
            speedup = memory_bound_attention_speedup(fmt, tokens)
            print(f"| {tokens} | {name} | {bytes_per_token(fmt, 512, 64)} | {speedup:.2f}x |")


if __name__ == "__main__":
    main()
