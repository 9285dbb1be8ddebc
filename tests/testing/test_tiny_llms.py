from __future__ import annotations

import torch

from neurips26.testing.tiny_llms import tiny_llama

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
