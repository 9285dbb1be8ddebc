"""SnapMLA's central ideas, each guarded through the public decode path: ``use_latent_mla`` and a
``LatentMLACache`` on a tiny HF DeepSeek-V3, measured on the attention modules' decode outputs.

Each test was checked to fail with its idea cut out of the code (the switch is named in its docstring).
"""

from __future__ import annotations

import torch

from neurips26.methods.snapmla import FP32, SNAPMLA, LatentMLACache, use_latent_mla
from neurips26.methods.snapmla.integration import mla_attention_modules, rescale_rope_projection
from neurips26.zoo.builders import tiny_deepseek_v3

PREFILL, DECODE = 256, 4


def _model(rope_gain: float = 1.0, sharpen: float = 1.0, outlier: float = 1.0) -> torch.nn.Module:
    """The tiny random DeepSeek-V3; ``sharpen`` scales the query projections (random weights give nearly
    uniform attention, where the logits hardly matter); ``outlier`` scales 4 channels of c_KV's RMS norm
    (outlier channels, as trained LLMs have: the per-token FP8 scales then vary widely); ``rope_gain`` is
    the function-preserving :func:`rescale_rope_projection` (k_R times gain, q_R divided by it)."""
    model = tiny_deepseek_v3()
    with torch.no_grad():
        for attention in mla_attention_modules(model):
            attention.q_proj.weight.mul_(sharpen)
            attention.kv_a_layernorm.weight[:4] *= outlier
    if rope_gain != 1.0:
        rescale_rope_projection(model, rope_gain)
    return model


def _decode_outputs(model: torch.nn.Module, recipe) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """Every attention module's output at each of DECODE single-token steps after a PREFILL prefill."""
    ids = torch.randint(0, 128, (1, PREFILL + DECODE), generator=torch.Generator().manual_seed(0))
    seen: list[torch.Tensor] = []
    hooks = [
        module.register_forward_hook(lambda m, args, out: seen.append(out[0].detach().clone()))
        for module in mla_attention_modules(model)
    ]
    try:
        with torch.no_grad(), use_latent_mla(model, recipe):
            cache = LatentMLACache(model.config, recipe)
            model(ids[:, :PREFILL], past_key_values=cache, use_cache=True)
            seen.clear()
            for t in range(PREFILL, PREFILL + DECODE):
                model(ids[:, t : t + 1], past_key_values=cache, use_cache=True)
    finally:
        for hook in hooks:
            hook.remove()
    return torch.cat([s.flatten() for s in seen])


def _relative_error(model: torch.nn.Module, recipe) -> float:  # type: ignore[no-untyped-def]
    reference = _decode_outputs(model, FP32)
    return float((_decode_outputs(model, recipe) - reference).norm() / reference.norm())


def test_idea_rope_aware_quantization_ignores_the_rope_range_in_decode() -> None:
    """Idea 1 (RoPE-aware per-token quantization): the content's FP8 scale excludes k_R, which stays
    BF16, so widening the RoPE range 256x (function-preserving) leaves SnapMLA's decode error unchanged.

    Switched off (made this test fail): the ``fp8_token`` encoding given one per-token scale over
    [c_KV; k_R] with k_R quantized in it (``pipeline.encode_latent`` wrapped).
    """
    narrow = _relative_error(_model(), SNAPMLA)
    wide = _relative_error(_model(rope_gain=256.0), SNAPMLA)
    assert 1e-3 < narrow < 0.05  # FP8 really ran, and at FP8's precision
    assert abs(wide - narrow) <= 1e-3 * narrow, (narrow, wide)


def test_idea_domain_alignment_keeps_the_rope_logits_in_decode() -> None:
    """Idea 2 (pre-scaled domain alignment): q_R and k_R divided by the content scales, so the RoPE
    logits survive the one rescale of the single accumulator: SnapMLA's decode stays at FP8 precision on
    a model whose attention is sharp enough for the logits to matter.

    Switched off (made this test fail: 0.125 instead of 0.023): ``align_rope_to_quant_domain`` the
    identity in ``pipeline`` and ``cache_format`` (the RoPE logits then get scaled by s_q s_t).
    """
    error = _relative_error(_model(sharpen=10.0), SNAPMLA)
    assert 1e-3 < error < 0.05, error


def test_idea_block_dynamic_p_beats_a_static_p_scale_in_decode() -> None:
    """Idea 3 (block-wise dynamic FP8 P with the V scales fused): each 64-token block's max of P s_t maps
    to 448, so tokens with small per-token scales keep their precision; a static P scale (FlashAttention-
    3's, ``max_t s_t / 448``) loses them. Visible when the per-token scales vary (outlier channels): 0.031
    vs 0.036 relative decode error; without outliers both are within the FP8 noise.

    Switched off (made this test fail): ``pipeline.online_latent_attention`` given ``p_mode="fp8_static"``
    with the static scale for SnapMLA's ``fp8_block`` recipe.
    """
    model = _model(outlier=300.0)
    ours = _relative_error(model, SNAPMLA)
    static = _relative_error(model, SNAPMLA.with_options(p_mode="fp8_static"))
    assert 1e-3 < ours < 0.92 * static, (ours, static)
