import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from neurips26.methods.snapmla import (
    E4M3_MAX,
    FP32,
    NAIVE_FP8,
    RECIPES,
    SNAPMLA,
    DecodeRecipe,
    KeyOperands,
    LatentMLACache,
    QueryOperands,
    SnapMLAConfig,
    align_rope_to_quant_domain,
    amax_scales,
    bytes_per_token,
    capture_latents,
    decode_latent,
    decode_latent_attention,
    encode_latent,
    flashmla_to_snapmla,
    key_operands,
    latent_attention_reference,
    online_latent_attention,
    pack_flashmla_rows,
    pack_snapmla_rows,
    prepare_query,
    quantize_e4m3,
    quantize_p_block,
    snapmla_to_flashmla,
    unpack_flashmla_rows,
    unpack_snapmla_rows,
    use_latent_mla,
)
from neurips26.methods.snapmla.analysis import memory_bound_attention_speedup
from neurips26.methods.snapmla.experiment import (
    EXPERIMENT,
    STRESS_GAIN,
    SnapMLAExperimentConfig,
    load_model,
)
from neurips26.methods.snapmla.integration import rescale_rope_projection
from neurips26.testing import check_experiment_contract
from neurips26.zoo.builders import tiny_deepseek_v3

# ---- helpers -----------------------------------------------------------------------------------------


def _latents(batch=1, tokens=100, d_c=32, d_r=8, heads=2, n_query=3, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "q_content": torch.randn(batch, heads, n_query, d_c, generator=g, dtype=dtype),
        "q_rope": torch.randn(batch, heads, n_query, d_r, generator=g, dtype=dtype),
        "content": torch.randn(batch, tokens, d_c, generator=g, dtype=dtype),
        "rope": 3 * torch.randn(batch, tokens, d_r, generator=g, dtype=dtype),
    }


def _ones(shape, dtype=torch.float32):
    return torch.ones(shape, dtype=dtype)


def _e4m3_bound(y: torch.Tensor) -> torch.Tensor:
    """Round-to-nearest E4M3 error bound in the scaled domain: half an ulp, 2^-4 relative for normals
    (3 mantissa bits), 2^-10 absolute in the subnormal range (spacing 2^-9)."""
    return torch.maximum(y.abs() * 2.0**-4, torch.full_like(y, 2.0**-10))


# ---- equivalence with transformers -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs", [{"rope_interleave": True}, {"rope_interleave": False}, {"q_lora_rank": 16}]
)
def test_absorbed_fp32_decode_equals_hf_deepseek_v3_attention(kwargs) -> None:
    model = tiny_deepseek_v3(**kwargs)
    ids = torch.randint(0, 128, (2, 70))
    with torch.no_grad():
        reference = model(ids).logits
        with use_latent_mla(model, FP32):
            ours = model(ids, use_cache=False).logits
    torch.testing.assert_close(ours, reference, atol=2e-5, rtol=1e-5)


def test_context_manager_restores_the_original_forward() -> None:
    model = tiny_deepseek_v3()
    ids = torch.randint(0, 128, (1, 12))
    with torch.no_grad():
        before = model(ids).logits
        with use_latent_mla(model, SNAPMLA):
            quantized = model(ids, use_cache=False).logits
        after = model(ids).logits
    assert torch.equal(before, after)
    assert not torch.equal(before, quantized)
    assert all("forward" not in m.__dict__ for m in model.modules())


@pytest.mark.parametrize("recipe", [FP32, SNAPMLA, RECIPES["per_token_fp8_rope"], RECIPES["flashmla_fp8"]])
def test_decode_with_latent_cache_equals_full_recompute(recipe) -> None:
    model = tiny_deepseek_v3()
    ids = torch.randint(0, 128, (2, 40))
    with torch.no_grad(), use_latent_mla(model, recipe):
        full = model(ids, use_cache=False).logits
        cache = LatentMLACache(model.config, recipe)
        steps = [model(ids[:, :30], past_key_values=cache, use_cache=True).logits]
        for t in range(30, 40):
            steps.append(model(ids[:, t : t + 1], past_key_values=cache, use_cache=True).logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.get_seq_length() == 40


def test_generate_with_fp32_latent_cache_matches_hf_generate() -> None:
    model = tiny_deepseek_v3()
    prompt = torch.randint(0, 128, (1, 16))
    kwargs = {
        "max_new_tokens": 8,
        "do_sample": False,
        "pad_token_id": 0,
        "attention_mask": torch.ones_like(prompt),
    }
    with torch.no_grad():
        reference = model.generate(prompt, **kwargs)
        with use_latent_mla(model, FP32):
            ours = model.generate(prompt, past_key_values=LatentMLACache(model.config, FP32), **kwargs)
            shadowed = model.generate(prompt, **kwargs)  # transformers' own DynamicCache, shadowed
    assert torch.equal(ours, reference)
    assert torch.equal(shadowed, reference)


# ---- the quantized pipeline --------------------------------------------------------------------------


def test_online_kernel_without_quantization_equals_one_softmax() -> None:
    x = _latents(dtype=torch.float64, n_query=4)
    mask = torch.zeros(4, 100, dtype=torch.float64)
    mask[:, 90:] = float("-inf")
    reference = latent_attention_reference(x["q_content"], x["q_rope"], x["content"], x["rope"], 0.2, mask)
    query = QueryOperands(x["q_content"], x["q_rope"], _ones((1, 2, 4), torch.float64))
    keys = KeyOperands(x["content"], x["rope"], _ones((1, 100), torch.float64))
    ours = online_latent_attention(query, keys, 0.2, mask, block_size=16, p_mode="exact")
    torch.testing.assert_close(ours, reference, atol=1e-12, rtol=1e-12)


def _scaled_operands(x, q_scale, k_scale):
    query = QueryOperands(x["q_content"] / q_scale[..., None], x["q_rope"] / q_scale[..., None], q_scale)
    keys = KeyOperands(x["content"] / k_scale[..., None], x["rope"] / k_scale[..., None], k_scale)
    return query, keys


def test_scale_fused_pipeline_with_quantization_disabled_is_exactly_the_unquantized_result() -> None:
    x = _latents(n_query=2)
    q_scale = amax_scales(x["q_content"].abs().amax(-1), "pow2")
    k_scale = amax_scales(x["content"].abs().amax(-1), "pow2")
    query, keys = _scaled_operands(x, q_scale, k_scale)
    fused = online_latent_attention(
        query, keys, 0.3, p_mode="fp8_block", scale_mode="pow2", fp8_enabled=False, block_size=64
    )
    plain_query = QueryOperands(x["q_content"], x["q_rope"], _ones((1, 2, 2)))
    plain_keys = KeyOperands(x["content"], x["rope"], _ones((1, 100)))
    plain = online_latent_attention(plain_query, plain_keys, 0.3, p_mode="exact", block_size=64)
    assert torch.equal(fused, plain)


def test_scale_fused_pipeline_with_float_scales_equals_reference_in_float64() -> None:
    x = _latents(dtype=torch.float64)
    q_scale = amax_scales(x["q_content"].abs().amax(-1))
    k_scale = amax_scales(x["content"].abs().amax(-1))
    query, keys = _scaled_operands(x, q_scale, k_scale)
    fused = online_latent_attention(query, keys, 0.3, p_mode="fp8_block", fp8_enabled=False)
    reference = latent_attention_reference(x["q_content"], x["q_rope"], x["content"], x["rope"], 0.3)
    torch.testing.assert_close(fused, reference, atol=1e-12, rtol=1e-12)


def test_domain_alignment_gives_the_two_accumulator_logits() -> None:
    x = _latents(dtype=torch.float64)
    s_q = amax_scales(x["q_content"].abs().amax(-1))
    s_k = amax_scales(x["content"].abs().amax(-1))
    q_r = align_rope_to_quant_domain(x["q_rope"], s_q, round_bf16=False)
    k_r = align_rope_to_quant_domain(x["rope"], s_k, round_bf16=False)
    content_acc = (x["q_content"] / s_q[..., None]) @ (x["content"] / s_k[..., None]).unsqueeze(1).mT
    one_accumulator = (content_acc + q_r @ k_r.unsqueeze(1).mT) * s_q[..., None] * s_k[:, None, None, :]
    two_accumulators = x["q_content"] @ x["content"].unsqueeze(1).mT + x["q_rope"] @ x["rope"].unsqueeze(1).mT
    torch.testing.assert_close(one_accumulator, two_accumulators, atol=1e-10, rtol=1e-10)


def _naive_pipeline_oracle(query, keys, scaling, block):
    """Per-row, per-token loops of the quantized pipeline (the vectorised kernel's oracle)."""
    batch, heads, n_query, d_c = query.content.shape
    out = torch.zeros(batch, heads, n_query, d_c)
    for b in range(batch):
        for h in range(heads):
            for i in range(n_query):
                m, denom, acc = -math.inf, 0.0, torch.zeros(d_c)
                for start in range(0, keys.content.shape[1], block):
                    stop = min(start + block, keys.content.shape[1])
                    logits = []
                    for t in range(start, stop):
                        dot = float(query.content[b, h, i] @ keys.content[b, t])
                        dot += float(query.rope[b, h, i] @ keys.rope[b, t])
                        logits.append(dot * float(query.scale[b, h, i]) * float(keys.scale[b, t]) * scaling)
                    new_m = max(m, max(logits))
                    corr = math.exp(m - new_m) if m > -math.inf else 0.0
                    probs = [math.exp(v - new_m) for v in logits]
                    denom = denom * corr + sum(probs)
                    scaled = [
                        p * float(keys.scale[b, t]) for p, t in zip(probs, range(start, stop), strict=True)
                    ]
                    s_p = max(scaled) / E4M3_MAX
                    block_acc = torch.zeros(d_c)
                    for p, t in zip(scaled, range(start, stop), strict=True):
                        p8 = float(torch.tensor(p / s_p).to(torch.float8_e4m3fn).float())
                        block_acc += p8 * keys.content[b, t]
                    acc = acc * corr + block_acc * s_p
                    m = new_m
                out[b, h, i] = acc / denom
    return out


def test_vectorised_kernel_matches_per_token_loop_oracle() -> None:
    x = _latents(tokens=70, d_c=8, d_r=4, heads=2, n_query=2)
    keys = key_operands(SNAPMLA.encode(x["content"], x["rope"]))
    q = prepare_query(SNAPMLA, x["q_content"], x["q_rope"])
    ours = online_latent_attention(q, keys, 0.25, block_size=32, p_mode="fp8_block")
    oracle = _naive_pipeline_oracle(q, keys, 0.25, 32)
    torch.testing.assert_close(ours, oracle, atol=1e-5, rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 40),
    st.floats(-6, 6),
    st.integers(0, 2**31 - 1),
)
def test_per_token_quantize_dequantize_error_within_e4m3_bound(tokens, width, log_magnitude, seed) -> None:
    g = torch.Generator().manual_seed(seed)
    content = torch.randn(1, tokens, width, generator=g) * 10.0**log_magnitude
    rope = torch.randn(1, tokens, 4, generator=g)
    encoded = encode_latent(content, rope, "fp8_token")
    restored, rope_back = decode_latent(encoded)
    scale = encoded.scale.unsqueeze(-1)
    bound = _e4m3_bound(content / scale) * scale
    assert bool(((restored - content).abs() <= bound * (1 + 1e-6)).all())
    assert encoded.overflow == 0
    assert torch.equal(rope_back, rope.to(torch.bfloat16).float())  # RoPE stays BF16


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.floats(-8, 3), st.integers(0, 2**31 - 1))
def test_block_p_quantization_error_bound(block, log_scale, seed) -> None:
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(3, block, generator=g) * torch.exp2(torch.rand(1, block, generator=g) * 8 + log_scale)
    codes, s_p = quantize_p_block(p, "fp8_block", None, "float", True)
    assert bool((codes.abs() <= E4M3_MAX).all())
    error = (codes * s_p - p).abs()
    assert bool((error <= _e4m3_bound(p / s_p) * s_p * (1 + 1e-6)).all())
    # the row maximum maps to 448 exactly: the block scale is tight
    torch.testing.assert_close(codes.amax(-1), torch.full((3,), E4M3_MAX))


def test_overflow_is_clamped_and_counted_never_nan() -> None:
    codes, overflow = quantize_e4m3(torch.tensor([1.0, 500.0, -900.0]), torch.tensor(1.0))
    assert overflow == 2
    assert codes.tolist() == [1.0, 448.0, -448.0]
    model = tiny_deepseek_v3()
    ids = torch.randint(0, 128, (1, 20))
    cache = LatentMLACache(model.config, NAIVE_FP8)
    with torch.no_grad(), use_latent_mla(model, NAIVE_FP8):
        model(ids[:, :4], past_key_values=cache, use_cache=True)  # the static scale is calibrated here
        for layer in cache.layers:
            layer.encoded.scale = layer.encoded.scale / 8  # a calibration that is too tight
        logits = model(ids[:, 4:], past_key_values=cache, use_cache=True).logits
    assert cache.overflow > 0
    assert torch.isfinite(logits).all()


# ---- packed rows and the FlashMLA converter ----------------------------------------------------------


def test_bytes_per_token_match_the_documented_layouts() -> None:
    dims = (512, 64)
    assert bytes_per_token("bf16", *dims) == 1152
    assert bytes_per_token("fp8_tensor_joint", *dims) == 576
    assert bytes_per_token("fp8_token_joint", *dims) == 580
    assert bytes_per_token("fp8_tile", *dims) == 656  # FlashMLA "FP8 with scale"
    assert bytes_per_token("fp8_token", *dims) == 644
    assert memory_bound_attention_speedup("fp8_token", 4096) == pytest.approx(1152 / 644)


def test_packed_rows_round_trip_bit_exactly() -> None:
    x = _latents(batch=2, tokens=5, d_c=512, d_r=64)
    encoded = encode_latent(x["content"], x["rope"], "fp8_token")
    rows = pack_snapmla_rows(encoded)
    assert rows.dtype == torch.uint8 and rows.shape == (2, 5, 644)
    back = unpack_snapmla_rows(rows, 512, 64)
    for name in ("content", "rope", "scale"):
        assert torch.equal(getattr(back, name).view(torch.uint8), getattr(encoded, name).view(torch.uint8))
    assert torch.equal(rows[0, 0, 512:516].view(torch.float32), encoded.scale[0, :1])
    tile = encode_latent(x["content"], x["rope"], "fp8_tile")
    flash_rows = pack_flashmla_rows(tile)
    assert flash_rows.shape == (2, 5, 656)
    flash_back = unpack_flashmla_rows(flash_rows, 512, 64)
    assert torch.equal(decode_latent(flash_back)[0], decode_latent(tile)[0])


def test_flashmla_converter_is_lossless_one_way_and_bounded_the_other() -> None:
    x = _latents(tokens=9, d_c=64, d_r=16)
    snap = encode_latent(x["content"], x["rope"], "fp8_token")
    flash = snapmla_to_flashmla(snap)
    assert torch.equal(decode_latent(flash)[0], decode_latent(snap)[0])
    again, changed = flashmla_to_snapmla(flash)
    assert changed == 0 and torch.equal(again.content.view(torch.uint8), snap.content.view(torch.uint8))
    tiles = encode_latent(
        x["content"] * torch.tensor([1.0, 4.0, 0.5, 2.0]).repeat_interleave(16), x["rope"], "fp8_tile"
    )
    converted, changed = flashmla_to_snapmla(tiles)
    assert changed > 0  # differing tile scales: some codes are re-rounded
    original, restored = decode_latent(tiles)[0], decode_latent(converted)[0]
    scale = converted.scale.unsqueeze(-1)
    assert bool(((restored - original).abs() <= _e4m3_bound(original / scale) * scale * 1.001).all())


# ---- bad input ---------------------------------------------------------------------------------------


def test_non_mla_model_is_rejected() -> None:
    config = LlamaConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    with pytest.raises(TypeError, match="MLA"), use_latent_mla(LlamaForCausalLM(config), SNAPMLA):
        pass
    with pytest.raises(TypeError, match="kv_lora_rank"):
        LatentMLACache(config, SNAPMLA)


def test_head_dims_that_do_not_match_the_cache_layout_are_rejected() -> None:
    model = tiny_deepseek_v3()
    cache = LatentMLACache(model.config, SNAPMLA)
    with pytest.raises(ValueError, match="kv_lora_rank"):
        cache.append(0, torch.zeros(1, 2, 16), torch.zeros(1, 2, 8))
    x = _latents(d_c=32, d_r=8)
    encoded = SNAPMLA.encode(x["content"], x["rope"])
    with pytest.raises(ValueError, match="cache layout"):
        decode_latent_attention(SNAPMLA, x["q_content"][..., :16], x["q_rope"], encoded, 0.1)
    with pytest.raises(ValueError, match="bytes per token"):
        unpack_snapmla_rows(torch.zeros(1, 1, 100, dtype=torch.uint8), 512, 64)


def test_a_cache_filled_outside_the_latent_path_is_rejected() -> None:
    model = tiny_deepseek_v3()
    ids = torch.randint(0, 128, (1, 6))
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(ids, past_key_values=cache, use_cache=True)
        with pytest.raises(ValueError, match="outside use_latent_mla"), use_latent_mla(model, SNAPMLA):
            model(ids[:, :1], past_key_values=cache, use_cache=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kv_format": "int4"}, "kv_format"),
        ({"query_format": "fp4"}, "query_format"),
        ({"p_mode": "fp16"}, "p_mode"),
        ({"block_size": 0}, "block_size"),
        ({"scale_mode": "log"}, "scale_mode"),
    ],
)
def test_bad_recipe_fields_name_the_argument(kwargs, match) -> None:
    fields = {"name": "x", "kv_format": "fp8_token", "query_format": "bf16", "p_mode": "bf16", **kwargs}
    with pytest.raises(ValueError, match=match):
        DecodeRecipe(**fields)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "gpt2"}, "model"),
        ({"context_tokens": 0}, "context_tokens"),
        ({"n_queries": 600, "context_tokens": 512}, "n_queries"),
        ({"n_tiles": 0}, "n_tiles"),
    ],
)
def test_bad_experiment_config_names_the_argument(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        SnapMLAExperimentConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scale_mode": "int"}, "scale_mode"),
        ({"kv_format": "int4"}, "kv_format"),
        ({"p_mode": "fp16"}, "p_mode"),
        ({"block_size": 0}, "block_size"),
    ],
)
def test_bad_method_config_names_the_argument(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        SnapMLAConfig(**kwargs)


def test_method_config_default_is_the_snapmla_recipe() -> None:
    assert SnapMLAConfig().recipe() == SNAPMLA


def test_set_reaches_the_method_config_and_every_recipe_uses_it() -> None:
    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(
        profile, {}, {"method.block_size": 128, "method.scale_mode": "pow2", "n_tiles": 8}
    )
    recipes = {name: EXPERIMENT.build_system(name, config) for name in EXPERIMENT.systems}
    assert all(r.block_size == 128 and r.scale_mode == "pow2" and r.n_tiles == 8 for r in recipes.values())
    assert recipes["snapmla"] == SNAPMLA.with_options(block_size=128, scale_mode="pow2", n_tiles=8)
    ablation = EXPERIMENT.config_for(profile, {}, {"method.kv_format": "fp8_token_joint"})
    assert EXPERIMENT.build_system("snapmla", ablation).kv_format == "fp8_token_joint"
    with pytest.raises(ValueError, match=r"method\.block_size"):
        EXPERIMENT.config_for(profile, {}, {"block_size": 128})  # the old flat key lists the dotted ones


def test_a_zoo_model_that_cannot_load_is_an_error_naming_the_fix(monkeypatch) -> None:
    import neurips26.zoo

    def broken(name):
        raise OSError("no checkpoint")

    monkeypatch.setattr(neurips26.zoo, "load", broken)
    with pytest.raises(RuntimeError, match="model=random"):
        load_model("tiny-mla", 1.0)


def _decode_error(recipe: DecodeRecipe, x: dict, gain: float) -> float:
    """Relative attention-output error of ``recipe`` when k_R is scaled by ``gain`` and q_R by 1/gain
    (the logits, hence the exact output, do not change)."""
    q_rope, rope = x["q_rope"] / gain, x["rope"] * gain
    reference = latent_attention_reference(
        x["q_content"].double(), q_rope.double(), x["content"].double(), rope.double(), 0.2
    )
    encoded = recipe.encode(x["content"], rope)
    out = decode_latent_attention(recipe, x["q_content"], q_rope, encoded, 0.2).double()
    return float(torch.linalg.vector_norm(out - reference) / torch.linalg.vector_norm(reference))


def test_rope_range_leaves_snapmla_untouched_but_hurts_rope_in_fp8() -> None:
    # Central idea 1 (RoPE-aware quantization): k_R stays BF16 and the content's per-token scale ignores
    # it, so widening the RoPE range 256x (function-preserving) changes nothing. With RoPE inside the FP8
    # scale (the 'fp8_token_joint' ablation), the content loses precision as the RoPE range grows.
    x = _latents(tokens=256, d_c=64, d_r=16, heads=4, n_query=4, seed=7)
    ours = SnapMLAConfig().recipe()
    assert _decode_error(ours, x, 256.0) == pytest.approx(_decode_error(ours, x, 1.0), rel=1e-3)
    joint = RECIPES["per_token_fp8_rope"]
    assert _decode_error(joint, x, 1.0) > 1.3 * _decode_error(ours, x, 1.0)
    assert _decode_error(joint, x, 256.0) > 1.1 * _decode_error(joint, x, 1.0)


def test_the_stress_gain_separates_bf16_from_naive_fp8_and_leaves_snapmla_untouched() -> None:
    # issue #48's positive contrast: at the experiment's stress gain one FP8 scale over [c; k_R] pushes the
    # content into FP8's subnormals, so naive FP8 is far from BF16 there; SnapMLA is unchanged by the gain
    x = _latents(tokens=256, d_c=64, d_r=16, heads=4, n_query=4, seed=7)
    ours, bf16, naive = SnapMLAConfig().recipe(), RECIPES["bf16"], RECIPES["naive_fp8"]
    assert _decode_error(ours, x, STRESS_GAIN) == pytest.approx(_decode_error(ours, x, 1.0), rel=1e-3)
    assert _decode_error(naive, x, STRESS_GAIN) > 5 * _decode_error(naive, x, 1.0)
    assert _decode_error(naive, x, STRESS_GAIN) > 20 * _decode_error(bf16, x, STRESS_GAIN)
    assert {"rope_gain": [1.0, STRESS_GAIN]}.items() <= EXPERIMENT.profile("default").grid.items()


# ---- experiment and docs -----------------------------------------------------------------------------


def test_experiment_smoke_contract() -> None:
    check_experiment_contract(EXPERIMENT, "neurips26.methods.snapmla.experiment:EXPERIMENT")


def test_rope_gain_rescale_preserves_the_function_and_widens_the_rope_range() -> None:
    model = tiny_deepseek_v3(q_lora_rank=16)
    ids = torch.randint(0, 128, (1, 20))
    with torch.no_grad():
        before = model(ids).logits
        rope_before = capture_latents_rope(model, ids)
        rescale_rope_projection(model, 256.0)
        after = model(ids).logits
        rope_after = capture_latents_rope(model, ids)
    assert torch.equal(after, before)  # a power-of-two gain is exact
    torch.testing.assert_close(rope_after, 256 * rope_before)
    with pytest.raises(ValueError, match="gain"):
        rescale_rope_projection(model, 0.0)


def capture_latents_rope(model, ids):
    return capture_latents(model, ids)[0]["rope"]


def test_fp8_qk_emulation_matches_torch_scaled_mm_rowwise() -> None:
    """torch's own FP8 GEMM (row-wise scales) is an independent oracle for the emulated QK product."""
    x = _latents(tokens=48, d_c=64, d_r=8, heads=1, n_query=16)
    zeros_q, zeros_k = torch.zeros_like(x["q_rope"]), torch.zeros_like(x["rope"])
    keys = key_operands(SNAPMLA.encode(x["content"], zeros_k))
    query = prepare_query(SNAPMLA, x["q_content"], zeros_q)
    _, logits = online_latent_attention(query, keys, 1.0, p_mode="exact", return_logits=True)
    q8 = query.content[0, 0].to(torch.float8_e4m3fn)
    c8 = keys.content[0].to(torch.float8_e4m3fn)
    reference = torch._scaled_mm(
        q8,
        c8.t(),
        scale_a=query.scale[0, 0].unsqueeze(-1).float(),
        scale_b=keys.scale[0].unsqueeze(0).float().contiguous(),
        out_dtype=torch.float32,
    )
    torch.testing.assert_close(logits[0, 0], reference, atol=1e-5, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 8), st.sampled_from([16, 64, 512]), st.sampled_from([4, 16, 64]), st.integers(0, 2**31 - 1)
)
def test_packed_rows_round_trip_for_any_layout(tokens, d_c, d_r, seed) -> None:
    x = _latents(tokens=tokens, d_c=d_c, d_r=d_r, seed=seed)
    encoded = encode_latent(x["content"] * 50, x["rope"], "fp8_token")
    rows = pack_snapmla_rows(encoded)
    assert rows.shape[-1] == bytes_per_token("fp8_token", d_c, d_r) == d_c + 4 + 2 * d_r
    back = unpack_snapmla_rows(rows, d_c, d_r)
    assert torch.equal(pack_snapmla_rows(back), rows)
    flash = pack_flashmla_rows(snapmla_to_flashmla(encoded))
    assert flash.shape[-1] == d_c + 16 + 2 * d_r
    again, changed = flashmla_to_snapmla(unpack_flashmla_rows(flash, d_c, d_r))
    assert changed == 0 and torch.equal(pack_snapmla_rows(again), rows)
