"""ScaleBITS' runtime-gather reordering of the channels no exact fold reaches (``reorder="gather"``)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from neurips26.methods.scalebits import ScaleBitsConfig, ScaleBitsLinear, SFMPConfig, quantize_and_report
from neurips26.methods.scalebits.baselines import quantize_gptq_allocation
from neurips26.methods.scalebits.core import tile_concentration
from neurips26.methods.scalebits.gather import GatherLinear, apply_gathers, gathered_linear
from neurips26.methods.scalebits.gptq import accumulate_hessians
from neurips26.methods.scalebits.integration import (
    apply_allocation,
    fold_reordering,
    folded_sides,
    select_linears,
    uniform_tile_bits,
)

TILE, GROUP = (16, 32), 32


def gathered_copy(llama: torch.nn.Module, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    model = copy.deepcopy(llama)
    linears = select_linears(model, lambda m, n: "lm_head" not in n)
    generator = torch.Generator().manual_seed(seed)
    sensitivity = {
        name: torch.rand(layer.weight.shape, generator=generator) for name, layer in linears.items()
    }
    folds = fold_reordering(model, linears, sensitivity)
    return model, apply_gathers(model, linears, sensitivity, folded_sides(folds))


def test_folds_plus_gathers_leave_the_full_precision_model_unchanged(llama, tokens) -> None:
    model, gathered = gathered_copy(llama)
    with torch.no_grad():
        assert torch.allclose(model(tokens).logits, llama(tokens).logits, atol=1e-5)
    sides = {
        name.rsplit(".", 1)[-1]: (layer.input_order is not None, layer.output_order is not None)
        for name, layer in gathered.items()
    }
    assert sides == {
        "q_proj": (True, True),  # RoPE pairs and the shared normed input: neither side folds
        "k_proj": (True, True),
        "v_proj": (True, False),  # rows folded with o's columns
        "o_proj": (False, True),  # residual output rows
        "gate_proj": (True, False),
        "up_proj": (True, False),
        "down_proj": (False, True),
    }


def test_packed_gathered_layer_matches_its_dequantized_gather_and_counts_the_indices() -> None:
    generator = torch.Generator().manual_seed(3)
    weight = torch.randn(32, 64, generator=generator)
    input_order, output_order = (
        torch.randperm(64, generator=generator),
        torch.randperm(32, generator=generator),
    )
    tile_bits = torch.tensor([2, 3, 4, 3])
    layer = ScaleBitsLinear.from_weight(
        weight, tile_bits, (2, 3, 4), TILE, GROUP, input_order=input_order, output_order=output_order
    )
    x = torch.randn(5, 64, generator=generator)
    expected = gathered_linear(x, layer.dequantize(), None, input_order, output_order)
    assert torch.allclose(layer(x), expected)
    assert all(torch.equal(a, b) for a, b in zip(layer.orders(), (input_order, output_order), strict=True))
    ledger = layer.ledger()
    assert ledger.streams["permutation_in"] == 64 * 6 and ledger.streams["permutation_out"] == 32 * 5
    assert ledger.nbytes == layer.packed_nbytes()


def test_a_gather_index_that_is_not_a_permutation_names_the_argument() -> None:
    with pytest.raises(ValueError, match="input_order"):
        ScaleBitsLinear.from_weight(
            torch.randn(16, 32), torch.tensor([3]), (3,), TILE, GROUP, input_order=torch.zeros(32).long()
        )


def test_hessians_of_a_gathered_layer_are_the_permuted_hessians(llama, tokens) -> None:
    plain = select_linears(llama, lambda m, n: n.endswith("layers.0.self_attn.q_proj"))
    reference, _ = accumulate_hessians(llama, plain, tokens, 4)
    model = copy.deepcopy(llama)
    name = next(iter(plain))
    order = torch.randperm(32, generator=torch.Generator().manual_seed(1))
    layer = GatherLinear.from_linear(model.get_submodule(name), order, None)
    model.model.layers[0].self_attn.q_proj = layer
    gathered, _ = accumulate_hessians(model, {name: layer}, tokens, 4)
    assert torch.allclose(gathered[name], reference[name][order][:, order], atol=1e-5)


def test_gptq_on_a_gathered_model_beats_rtn_on_the_same_allocation(llama, tokens) -> None:
    reference = llama(tokens).logits.detach()
    errors = {}
    for quantizer in ("rtn", "gptq"):
        model, gathered = gathered_copy(llama)
        allocation = {
            n: uniform_tile_bits(tuple(layer.weight.shape), TILE, 2) for n, layer in gathered.items()
        }
        if quantizer == "gptq":
            quantize_gptq_allocation(model, tokens, allocation, (2,), TILE, GROUP, False)
        else:
            apply_allocation(model, allocation, (2,), TILE, GROUP)
        with torch.no_grad():
            errors[quantizer] = float((model(tokens).logits - reference).pow(2).mean())
    assert errors["gptq"] < errors["rtn"]


@pytest.mark.parametrize("make", [ScaleBitsConfig, SFMPConfig])
def test_gather_reordering_respects_the_budget_with_its_indices_counted(llama, tokens, make) -> None:
    config = make(avg_bits=3.0, tile=TILE, group_size=GROUP, reorder="gather")
    if make is ScaleBitsConfig:
        config.fraction = 0.2
    model = copy.deepcopy(llama)
    report = quantize_and_report(model, config, calibration=tokens)
    packed = [m for m in model.modules() if isinstance(m, ScaleBitsLinear)]
    index_bits = sum(m.ledger().category("permutation") for m in packed)
    # per block, eight 32-entry indices (5 bits): q in + out, k in, v in, o out, gate in, up in, down out;
    # k's 16 output rows take 4 bits each
    assert index_bits == 2 * (8 * 32 * 5 + 16 * 4)
    assert report.total_bits <= math.floor(3.0 * report.n_weights + 1e-6)
    assert report.nbytes == sum(m.packed_nbytes() for m in packed)


def test_gathering_concentrates_a_separable_sensitivity_into_few_tiles() -> None:
    generator = torch.Generator().manual_seed(0)
    sensitivity = torch.rand(64, 1, generator=generator) ** 4 @ torch.rand(1, 64, generator=generator) ** 4
    weight = torch.randn(64, 64, generator=generator)
    linear = torch.nn.Linear(64, 64, bias=False)
    with torch.no_grad():
        linear.weight.copy_(weight)
    model = torch.nn.Sequential(linear)
    scores = {"0": sensitivity.clone()}
    apply_gathers(model, {"0": linear}, scores, {})
    assert tile_concentration(scores["0"], TILE) > tile_concentration(sensitivity, TILE) + 0.1
    stored = weight[model[0].output_order][:, model[0].input_order]
    assert torch.equal(model[0].weight.detach(), stored)
