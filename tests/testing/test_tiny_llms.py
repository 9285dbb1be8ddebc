import torch

from neurips26.testing.tiny_llms import tiny_deepseek_v3, tiny_deepseek_v3_config


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
