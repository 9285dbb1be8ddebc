import torch

from neurips26.zoo.builders import tiny_deepseek_v3, tiny_deepseek_v3_config, tiny_llama


def test_tiny_deepseek_v3_is_all_dense_mla_and_seeded() -> None:
    config = tiny_deepseek_v3_config(num_hidden_layers=3, kv_lora_rank=16, qk_rope_head_dim=4)
    assert config.first_k_dense_replace == 3 and config.kv_lora_rank == 16 and config.qk_rope_head_dim == 4
    a, b = tiny_deepseek_v3(seed=3, num_hidden_layers=3), tiny_deepseek_v3(seed=3, num_hidden_layers=3)
    assert not a.training
    assert all(type(layer.mlp).__name__ == "DeepseekV3MLP" for layer in a.model.layers)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    other = tiny_deepseek_v3(seed=4, num_hidden_layers=3)
    assert not torch.equal(a.lm_head.weight, other.lm_head.weight)


def test_builder_leaves_the_global_rng_untouched() -> None:
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    tiny_deepseek_v3(seed=0)
    assert torch.equal(torch.rand(3), expected)


SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1}


def test_tiny_llama_is_seeded_and_leaves_the_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    first = tiny_llama(**SMALL, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    again, other = tiny_llama(**SMALL, seed=3), tiny_llama(**SMALL, seed=4)
    weight = first.model.layers[0].mlp.up_proj.weight
    assert torch.equal(weight, again.model.layers[0].mlp.up_proj.weight)
    assert not torch.equal(weight, other.model.layers[0].mlp.up_proj.weight)
    tokens = torch.randint(0, 256, (2, 5))
    assert first(tokens).logits.shape == (2, 5, 256) and not first.training
