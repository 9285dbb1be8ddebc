"""tiny-*-ctx training pieces: disjoint key/value splits, training batches, resumable training (seconds)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from neurips26.zoo.circuits import CircuitLayout
from neurips26.zoo.ctx import ctx_batch, is_heldout, probe_settings, split_keys, train_ctx
from neurips26.zoo.evaluation import context_perplexity, probe_samples
from neurips26.zoo.specs import ModelSpec, TrainConfig

SMALL = {
    "hidden_size": 96,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "tie_word_embeddings": False,
    "max_position_embeddings": 1024,
    "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
}
LAYOUT = CircuitLayout(token_dims=12, max_distance=512)


def _values(tokenizer, sample):
    return [re.sub(r"\D", "", tokenizer.decode(sample.ids[a:b])) for a, b in sample.spans]


def test_key_and_value_splits_are_disjoint_and_used(tokenizer, small_corpus):
    train, held = split_keys(small_corpus.keys)
    assert not set(train) & set(held) and len(held) >= 16
    for split in ("train", "heldout"):
        settings = probe_settings(small_corpus, split)
        for kind in ("kv", "mqar"):
            for s in probe_samples(tokenizer, kind, 512, 4, data=small_corpus, **settings):
                values = _values(tokenizer, s)
                assert values and all(is_heldout(v) == (split == "heldout") for v in values)
                text = tokenizer.decode(s.ids)
                used = set(re.findall(r"assert (\w+) ==", text))
                assert used <= set(settings["keys"])


def test_training_batches_hold_training_values_only(tokenizer, small_corpus):
    cfg = TrainConfig(mixture={"kv": 1.0, "passkey": 1.0})
    rng = np.random.default_rng(0)
    ids, weights, kinds = ctx_batch(tokenizer, small_corpus, rng, cfg, 256, 8)
    assert ids.shape == (8, 256) and set(kinds) <= {"kv", "passkey"}
    for row, w in zip(ids, weights, strict=True):
        answer = row[w > 1]
        assert len(answer) > 0
    texts = [tokenizer.decode(r) for r in ids]
    keys = [v for t in texts for v in re.findall(r"pass key is (\d+)\.\n", t)]
    keys += [v for t in texts for v in re.findall(r"== (\d+)", t)]
    assert keys and not any(is_heldout(v) for v in keys)
    with pytest.raises(ValueError, match="mixture"):
        ctx_batch(tokenizer, small_corpus, rng, TrainConfig(mixture={"randrep": 1.0}), 64, 1)


def test_training_resumes_bit_for_bit(tmp_path):
    spec = ModelSpec(
        "t",
        "LlamaForCausalLM",
        SMALL,
        "test",
        TrainConfig(phases=[{"seq_len": 64, "batch": 2, "steps": 4}], warmup_steps=1),
    )
    kwargs = {"layout": LAYOUT, "corpus_max_files": 3, "log": None, "report_every": 2}
    _, straight, done = train_ctx(spec, None, **kwargs)
    assert done and len(straight) == 4
    _, first, done = train_ctx(spec, None, run_dir=tmp_path, max_steps=2, **kwargs)
    assert len(first) == 2
    _, resumed, done = train_ctx(spec, tmp_path / "out", run_dir=tmp_path, **kwargs)
    assert done and [r["loss"] for r in resumed] == [r["loss"] for r in straight]
    assert (tmp_path / "out" / "circuit.json").is_file() and (
        tmp_path / "out" / "model.safetensors"
    ).is_file()


def test_context_perplexity_scores_the_same_tail(tiny_llama, tokenizer, small_corpus):
    out = context_perplexity(
        tiny_llama, tokenizer, contexts=(16, 64), window=64, tail=8, n_windows=2, data=small_corpus
    )
    assert set(out) == {"16", "64"} and all(np.isfinite(v) and v > 1 for v in out.values())
    # with all of the window as context a random model's tail perplexity differs from the short read
    assert out["16"] != out["64"]
    with pytest.raises(ValueError, match="tail"):
        context_perplexity(tiny_llama, tokenizer, contexts=(8,), window=64, tail=8, data=small_corpus)


def test_stop_after_saves_a_resumable_state(tmp_path):
    spec = ModelSpec(
        "t", "LlamaForCausalLM", SMALL, "test", TrainConfig(phases=[{"seq_len": 32, "batch": 1, "steps": 3}])
    )
    _, rows, done = train_ctx(
        spec, None, layout=LAYOUT, run_dir=tmp_path, stop_after_s=0.0, corpus_max_files=3, log=None
    )
    assert not done and rows == [] and (tmp_path / "state.pt").is_file()
    assert torch.load(tmp_path / "state.pt", weights_only=False)["rows"] == []


CTX_NAMES = ["tiny-llama-ctx", "tiny-qwen3-ctx", "tiny-mla-ctx"]


def _committed(name):
    import json

    from neurips26.zoo import checkpoint_dir, load

    directory = checkpoint_dir(name)
    if not (directory / "model.safetensors").is_file():
        pytest.skip(f"{name} is not trained in this checkout (`neurips26 zoo train {name}`)")
    model, tokenizer = load(name)
    return model, tokenizer, json.loads((directory / "circuit.json").read_text())


@pytest.mark.parametrize("name", CTX_NAMES)
def test_committed_ctx_model_keeps_its_written_heads_and_retrieves_through_them(name, small_corpus):
    from neurips26.zoo.circuits import circuit_report
    from neurips26.zoo.ctx_cards import score_batched

    model, tokenizer, circuit = _committed(name)
    report = circuit_report(model, circuit)
    assert all(h["target_mass"] > 0.9 for h in report["heads"]), report
    samples = probe_samples(tokenizer, "passkey", 512, 4, data=small_corpus, **{"value_ok": is_heldout})
    assert sum(score_batched(model, samples)) >= 3
    # switch the written induction head off: retrieval goes with it
    induction = circuit["heads"][-1]
    attn = model.model.layers[induction["layer"]].self_attn
    width = attn.o_proj.weight.shape[1] // model.config.num_attention_heads
    with torch.no_grad():
        attn.o_proj.weight[:, :width] = 0.0
    assert sum(score_batched(model, samples)) <= 1


def test_heldout_retrieval_reads_through_the_given_context_and_counts_queries(small_corpus):
    from contextlib import contextmanager

    from neurips26.zoo.ctx_cards import heldout_retrieval

    model, tokenizer, _ = _committed("tiny-llama-ctx")
    entered = []

    @contextmanager
    def counting():
        entered.append(1)
        yield

    plain = heldout_retrieval(model, tokenizer, "kv", 256, 9, data=small_corpus)
    wrapped = heldout_retrieval(model, tokenizer, "kv", 256, 9, data=small_corpus, context=counting)
    assert plain == wrapped and plain["queries"] == 12 and plain["probes"] == 3  # 3 probes x 4 bindings
    assert len(entered) == 1  # one batch of 3 probes, one forward pass inside the context
    with pytest.raises(ValueError, match="kind must be one of"):
        heldout_retrieval(model, tokenizer, "nope", 256, 4, data=small_corpus)
