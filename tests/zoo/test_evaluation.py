from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from neurips26.zoo.evaluation import (
    attention_entropy_profile,
    copy_accuracy,
    generation_agreement,
    heldout_perplexity,
    retrieval_accuracy,
    unigram_perplexity,
)


def test_untrained_model_perplexity_is_near_vocab_size(tiny_llama, tokenizer, small_corpus):
    ppl = heldout_perplexity(tiny_llama, tokenizer, seq_len=64, n_tokens=256, data=small_corpus)
    assert 0.5 * len(tokenizer) < ppl < 2 * len(tokenizer)


def test_unigram_beats_uniform_and_matches_a_direct_count(tokenizer, small_corpus):
    ppl = unigram_perplexity(tokenizer, seq_len=64, n_tokens=640, train=small_corpus, data=small_corpus)
    ids = small_corpus.haystack.ids
    counts = np.bincount(ids, minlength=len(tokenizer)) + 1.0
    targets = ids[:640].reshape(10, 64)[:, 1:].ravel()
    expected = math.exp(-np.mean([math.log(counts[t] / counts.sum()) for t in targets]))
    assert ppl == pytest.approx(expected, rel=1e-9)
    assert ppl < len(tokenizer)


def test_uniform_attention_has_entropy_log_of_visible_keys(tiny_llama):
    # Oracle: zero query weights make every score 0, so row i is uniform over i+1 keys: H_i = log(i+1).
    for layer in tiny_llama.model.layers:
        torch.nn.init.zeros_(layer.self_attn.q_proj.weight)
    ids = torch.randint(0, 100, (2, 16))
    profile = attention_entropy_profile(tiny_llama, ids)
    assert profile.shape == (2, 4)
    np.testing.assert_allclose(profile, np.log(np.arange(1, 17)).mean(), rtol=1e-5)
    np.testing.assert_allclose(attention_entropy_profile(tiny_llama, ids, normalized=True), 1.0, rtol=1e-5)
    np.testing.assert_allclose(
        attention_entropy_profile(tiny_llama, ids, last_queries=1), math.log(16), rtol=1e-5
    )
    assert tiny_llama.config._attn_implementation == "sdpa"


def test_a_model_agrees_with_itself_and_not_with_another(tiny_llama, tokenizer):
    from transformers import LlamaForCausalLM

    prompts = [tokenizer.encode("def parse(self, text):\n"), tokenizer.encode("import os\n")]
    same = generation_agreement(tiny_llama, tiny_llama, prompts, max_new_tokens=8)
    assert same == {"token_agreement": 1.0, "exact_match": 1.0, "first_divergence": 8.0}
    torch.manual_seed(1)
    other = LlamaForCausalLM(tiny_llama.config).eval()
    diff = generation_agreement(tiny_llama, other, prompts, max_new_tokens=8)
    assert diff["token_agreement"] < 1.0 and diff["first_divergence"] < 8.0
    with pytest.raises(ValueError, match="prompts"):
        generation_agreement(tiny_llama, other, [])


def test_untrained_model_is_at_chance_on_retrieval(tiny_llama, tokenizer, small_corpus):
    acc = retrieval_accuracy(tiny_llama, tokenizer, "kv", 256, n_samples=4, data=small_corpus)
    assert acc == 0.0
    with pytest.raises(ValueError, match="kind must be one of"):
        retrieval_accuracy(tiny_llama, tokenizer, "needle", 256, n_samples=1, data=small_corpus)


def test_copy_accuracy_is_a_fraction_and_validates_chunk(tiny_llama, tokenizer, small_corpus):
    result = copy_accuracy(tiny_llama, tokenizer, 128, chunk=16, n_samples=2, data=small_corpus)
    assert set(result) == {"first", "copy", "gain"}
    assert 0.0 <= result["first"] <= 1.0 and 0.0 <= result["copy"] <= 1.0
    assert result["gain"] == pytest.approx(result["copy"] - result["first"])
    with pytest.raises(ValueError, match="chunk must be"):
        copy_accuracy(tiny_llama, tokenizer, 128, chunk=64, data=small_corpus)
