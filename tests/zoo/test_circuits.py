"""The written circuit attends where it should before any training (seconds, small models)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurips26.zoo.circuits import (
    CircuitLayout,
    attention_maps,
    circuit_report,
    install_circuit,
    offset_score,
    positional_pairs,
    random_repeats,
)

LAYOUT = CircuitLayout(token_dims=12, offsets=(1, 2, 3), match=3, induction_layer=1, max_distance=512)


def _model(kind: str, *, install: bool = True, layout: CircuitLayout = LAYOUT, tie: bool = False):
    from transformers import (
        DeepseekV3ForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    if kind == "mla":
        from neurips26.zoo.builders import tiny_deepseek_v3_config

        config = tiny_deepseek_v3_config(
            num_hidden_layers=2,
            hidden_size=96,
            kv_lora_rank=48,  # token code (12) + 3 match features of 8
            qk_rope_head_dim=32,  # enough fast pairs for a sharp positional pattern (16 is not)
            qk_nope_head_dim=24,
            v_head_dim=16,
            vocab_size=512,
            attn_implementation="sdpa",
        )
        torch.manual_seed(0)
        model = DeepseekV3ForCausalLM(config).eval()
        return model, install_circuit(model, layout, seed=1) if install else None
    cls, cfg_cls = (LlamaForCausalLM, LlamaConfig) if kind == "llama" else (Qwen3ForCausalLM, Qwen3Config)
    config = cfg_cls(
        vocab_size=512,
        hidden_size=96,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=1024,
        tie_word_embeddings=tie,
        rope_parameters={"rope_theta": 500000.0, "rope_type": "default"},
    )
    torch.manual_seed(0)
    model = cls(config).eval()
    info = install_circuit(model, layout, seed=1) if install else None
    return model, info


def _heads(layout: CircuitLayout) -> dict:
    heads = [
        {"layer": 0, "head": h, "role": f"previous-token (offset {o})"} for h, o in enumerate(layout.offsets)
    ]
    return {"heads": [*heads, {"layer": layout.induction_layer, "head": 0, "role": "induction"}]}


@pytest.mark.parametrize("kind", ["llama", "qwen3", "mla"])
def test_written_heads_attend_where_they_should_before_training(kind):
    model, info = _model(kind)
    report = circuit_report(model, info, period=24, length=192)
    by_role = {h["role"]: h for h in report["heads"]}
    for offset in (1, 2, 3):
        head = by_role[f"previous-token (offset {offset})"]
        assert head["target_mass"] > 0.95, head
        assert head["entropy"] < 0.05, head
    induction = report["heads"][-1]
    assert induction["target_mass"] > 0.8, induction
    # the copy reaches the logits: random tokens repeated are predicted from their earlier occurrence
    assert report["copy_acc"] > 0.9, report


@pytest.mark.parametrize("kind", ["llama", "qwen3", "mla"])
def test_without_the_construction_the_same_model_does_not_attend_or_copy(kind):
    model, _ = _model(kind, install=False)
    report = circuit_report(model, _heads(LAYOUT), period=24, length=192)
    assert all(h["target_mass"] < 0.3 for h in report["heads"]), report
    assert report["copy_acc"] < 0.05


def test_induction_matches_three_tokens_not_one():
    """Token X followed by different tokens: only the occurrence whose 3 preceding tokens match is copied."""
    model, _ = _model("llama")
    rng = np.random.default_rng(3)
    a, b, c, d, x, y, z = (int(v) for v in rng.choice(np.arange(1, 512), size=7, replace=False))
    filler = rng.choice(np.arange(1, 512), size=40).tolist()
    # "a b c x" then "d b c y", then query "a b c" -> x (3 matches) beats y (2 matches)
    ids = [a, b, c, x, *filler[:20], d, b, c, y, *filler[20:], z, a, b, c]
    with torch.no_grad():
        pred = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
    assert pred == x
    att = attention_maps(model, ids)[1][0, 0, -1]
    assert att[3] > 0.9 * att.sum()


def test_offset_score_peaks_at_the_offset():
    inv_freq = 500000.0 ** (-np.arange(0, 128, 2) / 128)
    pairs = positional_pairs(inv_freq, 0.05)
    for offset in (1, 2, 5):
        s = offset_score(inv_freq, pairs, offset, np.arange(4096))
        assert int(np.argmax(s)) == offset
        assert s[offset] - np.max(np.delete(s, offset)) > 1.0


def test_bad_layouts_are_named():
    with pytest.raises(ValueError, match="offsets"):
        CircuitLayout(offsets=(0, 1))
    with pytest.raises(ValueError, match="match"):
        CircuitLayout(offsets=(2, 3), match=2)
    with pytest.raises(ValueError, match="hidden_size"):
        _model("llama", layout=CircuitLayout(token_dims=40))
    with pytest.raises(ValueError, match="untied"):
        _model("llama", tie=True)
    with pytest.raises(ValueError, match="period"):
        random_repeats(100, 1, 10, 1)


def test_construction_is_deterministic_and_leaves_other_weights_alone():
    model_a, _ = _model("llama")
    model_b, _ = _model("llama")
    fresh, _ = _model("llama", install=False)
    for (name, pa), pb, _ in zip(
        model_a.named_parameters(), model_b.parameters(), fresh.parameters(), strict=True
    ):
        assert torch.equal(pa, pb), name
    # layers the circuit does not touch keep their random init
    assert torch.equal(model_a.model.layers[0].mlp.up_proj.weight, fresh.model.layers[0].mlp.up_proj.weight)
    assert torch.equal(
        model_a.model.layers[1].self_attn.q_proj.weight[64:],
        fresh.model.layers[1].self_attn.q_proj.weight[64:],
    )
