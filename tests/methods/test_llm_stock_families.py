"""The LLM tools (snapmla, scalebits, spectralkv) on tiny STOCK transformers models of every family they
name: padded and unpadded batches, prefill and generate, save and reload (issue 47).

Each family is built from its own config class (hidden 128, 3 layers, GQA 4/2; ``testing.stock_models``).
Where a method is lossless (FP32 decode recipe, keep-all press) a left-padded row's real-token logits equal
the unpadded row's; no output is ever NaN; families a method does not support get an error naming them.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("kvpress")

from transformers import AutoModelForCausalLM, DynamicCache

from neurips26.methods.scalebits import (
    ScaleBitsConfig,
    ScaleBitsLinear,
    check_no_packed_weights,
    load_quantized,
    quantize_and_report,
    save_quantized,
)
from neurips26.methods.scalebits.baselines import quantize_random
from neurips26.methods.snapmla import FP32, SNAPMLA, LatentMLACache, use_latent_mla
from neurips26.methods.spectralkv import SpectralKVPress
from neurips26.testing.stock_models import (
    MLA_FAMILIES,
    STOCK_FAMILIES,
    VOCAB,
    left_padded_batch,
    tiny_stock_model,
)

DENSE_FAMILIES = tuple(f for f in STOCK_FAMILIES if f not in MLA_FAMILIES)
LENGTHS = [12, 7]  # row 1 carries 5 pads
PRESS_LENGTHS = [40, 33]


@pytest.fixture(scope="module")
def models():
    return {family: tiny_stock_model(family) for family in STOCK_FAMILIES}


def _greedy(**extra):
    return {"max_new_tokens": 3, "do_sample": False, "pad_token_id": 0, **extra}


def _padded_row_matches_unpadded(forward, ids, mask, atol: float) -> None:
    """``forward(ids, mask)`` logits: finite everywhere, and each row's real tokens equal that row alone."""
    padded = forward(ids, mask)
    assert torch.isfinite(padded).all()
    for row in range(ids.shape[0]):
        real = mask[row].bool()
        alone = forward(ids[row : row + 1, real], mask[row : row + 1, real])
        torch.testing.assert_close(padded[row, real], alone[0], atol=atol, rtol=atol)


# --- snapmla: use_latent_mla ------------------------------------------------------------------------------
@pytest.mark.parametrize("family", MLA_FAMILIES)
def test_latent_mla_padded_batch_equals_each_row_alone_and_generates_like_the_model(models, family):
    model = models[family]
    ids, mask = left_padded_batch(LENGTHS)
    with torch.no_grad():
        reference = model.generate(ids, attention_mask=mask, **_greedy())
        with use_latent_mla(model, FP32):
            _padded_row_matches_unpadded(
                lambda i, m: model(i, attention_mask=m, use_cache=False).logits, ids, mask, atol=1e-5
            )
            ours = model.generate(
                ids, attention_mask=mask, past_key_values=LatentMLACache(model.config, FP32), **_greedy()
            )
            shadowed = model.generate(ids, attention_mask=mask, **_greedy())  # transformers' own cache
    assert torch.equal(ours, reference)
    assert torch.equal(shadowed, reference)


@pytest.mark.parametrize("family", MLA_FAMILIES)
def test_latent_mla_fp8_recipe_on_a_padded_batch_is_finite_and_close(models, family):
    model = models[family]
    ids, mask = left_padded_batch(LENGTHS)
    with torch.no_grad():
        reference = model(ids, attention_mask=mask).logits
        with use_latent_mla(model, SNAPMLA):
            logits = model(ids, attention_mask=mask, use_cache=False).logits
            generated = model.generate(
                ids, attention_mask=mask, past_key_values=LatentMLACache(model.config, SNAPMLA), **_greedy()
            )
    assert torch.isfinite(logits).all()
    real = mask.bool()
    assert (logits[real] - reference[real]).abs().max() < 0.2  # FP8 error, not garbage
    assert (generated[:, ids.shape[1] :] != 0).any(dim=1).all()  # no row stuck on token 0


@pytest.mark.parametrize("family", DENSE_FAMILIES)
def test_latent_mla_names_the_family_it_cannot_patch(models, family):
    model = models[family]
    with (
        pytest.raises(TypeError, match=f"{type(model).__name__} has no MLA attention"),
        use_latent_mla(model, FP32),
    ):
        pass


# --- scalebits: save and reload ---------------------------------------------------------------------------
def _logits(model, ids, mask):
    with torch.no_grad():
        return model(ids, attention_mask=mask).logits


@pytest.mark.parametrize("family", DENSE_FAMILIES)
def test_scalebits_model_reloads_with_equal_logits_on_a_padded_batch(family, tmp_path):
    model = tiny_stock_model(family)
    quantize_random(model, 3.0, (2, 3, 4), (16, 32), 32, seed=0)
    ids, mask = left_padded_batch(LENGTHS)
    expected = _logits(model, ids, mask)
    assert torch.isfinite(expected).all()
    _padded_row_matches_unpadded(lambda i, m: _logits(model, i, m), ids, mask, atol=1e-5)
    save_quantized(model, tmp_path)
    ours = load_quantized(tmp_path)
    stock = AutoModelForCausalLM.from_pretrained(tmp_path)  # our registered quantizer restores the layers
    for reloaded in (ours, stock):
        assert any(isinstance(m, ScaleBitsLinear) for m in reloaded.modules())
        assert torch.equal(_logits(reloaded, ids, mask), expected)
    generated = stock.generate(ids, attention_mask=mask, **_greedy())
    assert torch.equal(generated, model.generate(ids, attention_mask=mask, **_greedy()))


def test_scalebits_search_with_gather_indices_reloads_bit_exactly(tmp_path):
    model = tiny_stock_model("llama")
    calibration = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(1))
    config = ScaleBitsConfig(
        avg_bits=3.0, tile=(16, 32), group_size=32, sensitivity="static", reorder="gather", fraction=0.2
    )
    quantize_and_report(model, config, calibration=calibration)
    assert any(any(m.gathers) for m in model.modules() if isinstance(m, ScaleBitsLinear))
    ids, mask = left_padded_batch(LENGTHS)
    save_quantized(model, tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert torch.equal(_logits(reloaded, ids, mask), _logits(model, ids, mask))
    again = tmp_path / "again"
    reloaded.save_pretrained(again)  # a reloaded model saves again like any transformers model
    assert torch.equal(_logits(load_quantized(again), ids, mask), _logits(model, ids, mask))


def test_packed_weights_into_a_stock_model_are_refused():
    model = tiny_stock_model("qwen2")
    quantize_random(model, 3.0, (2, 3, 4), (16, 32), 32, seed=0)
    with pytest.raises(ValueError, match="load_quantized"):
        check_no_packed_weights(model.state_dict(), tiny_stock_model("qwen2"))
    check_no_packed_weights(tiny_stock_model("qwen2").state_dict(), tiny_stock_model("qwen2"))


def test_scalebits_readme_save_and_reload_snippet_runs():
    readme = (Path(__file__).parents[2] / "src/neurips26/methods/scalebits/README.md").read_text()
    section = readme.split("### Save and reload", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(snippet, "README.md", "exec"), {})


def test_saving_an_unquantized_model_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="run quantize_and_report first"):
        save_quantized(tiny_stock_model("llama"), tmp_path)


# --- spectralkv: the press --------------------------------------------------------------------------------
PRESS_FAMILIES = DENSE_FAMILIES  # the families check_supported_model's message names


def _press(mode: str, ratio: float = 0.5) -> SpectralKVPress:
    return SpectralKVPress(compression_ratio=ratio, window_size=8, n_sink=2, budget_mode=mode)


@pytest.mark.parametrize("family", PRESS_FAMILIES)
@pytest.mark.parametrize("mode", ["uniform", "entropy"])
def test_press_prefills_and_generates_on_every_named_family(models, family, mode):
    model = models[family]
    ids, _ = left_padded_batch([PRESS_LENGTHS[0]])
    press = _press(mode)
    with torch.no_grad(), press(model):
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **_greedy())
    assert out.shape == (1, PRESS_LENGTHS[0] + 3)
    press.ledger.check()
    sliding = [getattr(layer.self_attn, "is_sliding", False) for layer in model.model.layers]
    for record, is_sliding in zip(press.ledger.records, sliding, strict=True):
        # Gemma 3: only the global layer is compressed; a local layer keeps its window (15 of 40 tokens,
        # more than sinks + window, so compressing it would have been possible and wrong)
        assert ("sliding-window" in record.note) == is_sliding, record
        assert (record.kept_per_head == [record.context] * 2) == is_sliding, record
        assert record.context == (15 if is_sliding else PRESS_LENGTHS[0])


@pytest.mark.parametrize("family", PRESS_FAMILIES)
def test_keep_all_press_on_a_padded_batch_equals_the_model_per_row(models, family):
    model = models[family]
    ids, mask = left_padded_batch(PRESS_LENGTHS)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
        with _press("uniform", ratio=0.0)(model):
            got = model(ids, attention_mask=mask, past_key_values=DynamicCache()).logits
    assert torch.equal(got, expected)
    _padded_row_matches_unpadded(lambda i, m: _logits(model, i, m), ids, mask, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "phi3"])
def test_compressing_a_padded_batch_is_refused(models, family):
    model = models[family]
    ids, mask = left_padded_batch(PRESS_LENGTHS)
    refusal = r"unpadded batches only: rows \[1\] .* \[7\] padding"
    with pytest.raises(ValueError, match=refusal), torch.no_grad(), _press("uniform")(model):
        model.generate(ids, attention_mask=mask, **_greedy())


def test_phi3_fused_qkv_topk_equals_kvpress_snapkv(models):
    from kvpress import SnapKVPress

    model = models["phi3"]
    ids, _ = left_padded_batch([PRESS_LENGTHS[0]])
    caches = []
    for press in (
        SpectralKVPress(0.5, budget_mode="uniform", selector="topk", n_sink=0, window_size=8),
        SnapKVPress(compression_ratio=0.5, window_size=8, kernel_size=5),
    ):
        cache = DynamicCache()
        with torch.no_grad(), press(model):
            model(ids, past_key_values=cache)
        caches.append(cache)
    for ours, theirs in zip(caches[0].layers, caches[1].layers, strict=True):
        assert torch.equal(ours.keys.sort(dim=2).values, theirs.keys.sort(dim=2).values)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_entropy_budgets_take_a_multi_token_forward_like_token_by_token_decoding(family, attention):
    """Layers of different lengths: the kvpress pipeline's question forward (one mask built from layer 0's
    length) gives the logits of feeding the same tokens one at a time over the same compressed cache."""
    model = tiny_stock_model(family, attn_implementation=attention)
    ids, _ = left_padded_batch([PRESS_LENGTHS[0]])
    question = torch.randint(1, VOCAB, (1, 4), generator=torch.Generator().manual_seed(3))
    press = _press("entropy")
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        with press(model):
            model(ids, past_key_values=cache)
        assert len({layer.keys.shape[2] for layer in cache.layers}) > 1  # the case that used to fail
        stepwise_cache = copy.deepcopy(cache)
        positions = torch.arange(PRESS_LENGTHS[0], PRESS_LENGTHS[0] + 4)[None]
        together = model(question, past_key_values=cache, position_ids=positions).logits
        steps = [
            model(
                question[:, t : t + 1], past_key_values=stepwise_cache, position_ids=positions[:, t : t + 1]
            ).logits
            for t in range(4)
        ]
    torch.testing.assert_close(together, torch.cat(steps, dim=1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", MLA_FAMILIES)
def test_press_names_the_latent_attention_family_it_refuses(models, family):
    with (
        pytest.raises(ValueError, match=f"model_type '{family}'.*DeepSeek MLA"),
        _press("uniform")(models[family]),
    ):
        pass


# --- the builders -----------------------------------------------------------------------------------------
def test_stock_builder_is_seeded_and_names_the_families_it_knows():
    first, second = tiny_stock_model("qwen3", seed=4), tiny_stock_model("qwen3", seed=4)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert first.config.num_key_value_heads == 2 and first.config.hidden_size == 128
    with pytest.raises(ValueError, match="family='gpt2' is not allowed"):
        tiny_stock_model("gpt2")
