"""ScaleBITS' salience baselines: SliM-LLM-style group-wise allocation, SFMP-style static blocks."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.scalebits import (
    ScaleBitsExperimentConfig,
    SFMPConfig,
    SliMLLMConfig,
    UniformRTNConfig,
    quantize_and_report,
)
from neurips26.methods.scalebits.core import layer_ledger, tile_variable_bits
from neurips26.methods.scalebits.gptq import inverse_hessian_factor
from neurips26.methods.scalebits.integration import select_linears, uniform_tile_bits
from neurips26.methods.scalebits.sfmp import threshold_allocation
from neurips26.methods.scalebits.slim import group_salience, sba_candidates

TILE, GROUP = (16, 32), 32


def uniform_avg_bits(model: torch.nn.Module, bits: int, bit_set: tuple[int, ...]) -> float:
    """Average bits of every tile at ``bits`` when stored with ``bit_set``'s tile ids (metadata included)."""
    linears = select_linears(model, lambda m, n: "lm_head" not in n)
    total = sum(
        layer_ledger(
            tuple(layer.weight.shape),
            TILE,
            GROUP,
            bit_set,
            uniform_tile_bits(tuple(layer.weight.shape), TILE, bits),
        ).total_bits
        for layer in linears.values()
    )
    return total / sum(layer.weight.numel() for layer in linears.values())


def quantized_logits(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens).logits


def rtn_logits(llama: torch.nn.Module, tokens: torch.Tensor, bits: int) -> torch.Tensor:
    model = copy.deepcopy(llama)
    quantize_and_report(model, UniformRTNConfig(bits=bits, tile=TILE, group_size=GROUP))
    return quantized_logits(model, tokens)


# --- SliM-LLM-style group-wise salience allocation ------------------------------------------------------


def test_group_salience_is_the_obs_salience_summed_per_column_group() -> None:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(8, 64, generator=generator)
    inputs = torch.randn(128, 64, generator=generator)
    hessian = 2 * inputs.T @ inputs / 128
    factor = inverse_hessian_factor(hessian, weight.clone(), 0.01)
    expected = (weight**2 / torch.diag(factor) ** 2).reshape(8, 2, 32).sum((0, 2))
    assert torch.allclose(group_salience(weight, hessian, 32), expected, rtol=1e-5)


def test_sba_candidates_at_an_integer_budget_are_slim_llms_k_up_k_down_family() -> None:
    shape, bit_set = (32, 256), (2, 3, 4)  # 2 tile rows x 8 column groups
    salience = torch.tensor([5.0, 1.0, 7.0, 3.0, 0.5, 2.0, 9.0, 4.0])

    def cost(tile_bits: torch.Tensor) -> int:
        return layer_ledger(shape, TILE, GROUP, bit_set, tile_bits).total_bits

    budget = cost(torch.full((16,), 3))  # the budget of uniform 3 bits
    candidates = sba_candidates(salience, bit_set, 2, cost, budget)
    assert len(candidates) == 5  # k = 0..4 groups up, as many down
    ranked = torch.argsort(salience, descending=True)
    for k, bits in enumerate(candidates):
        assert int((bits == 4).sum()) == int((bits == 2).sum()) == k
        assert torch.all(bits[ranked][:-1] >= bits[ranked][1:])  # more salient, never fewer bits
        assert cost(bits[None, :].expand(2, -1).reshape(-1)) == budget


def test_slim_with_a_single_width_equals_uniform_rtn(llama, tokens) -> None:
    model = copy.deepcopy(llama)
    config = SliMLLMConfig(avg_bits=4.0, bits=(3,), tile=TILE, group_size=GROUP, quantizer="rtn")
    report = quantize_and_report(model, config, calibration=tokens)
    rtn = quantize_and_report(copy.deepcopy(llama), UniformRTNConfig(bits=3, tile=TILE, group_size=GROUP))
    assert report.total_bits == rtn.total_bits
    assert torch.equal(quantized_logits(model, tokens), rtn_logits(llama, tokens, 3))


def test_slim_at_the_top_widths_budget_of_two_widths_equals_uniform_rtn(llama, tokens) -> None:
    avg_bits = uniform_avg_bits(llama, 3, (2, 3))
    model = copy.deepcopy(llama)
    config = SliMLLMConfig(avg_bits=avg_bits, bits=(2, 3), tile=TILE, group_size=GROUP, quantizer="rtn")
    report = quantize_and_report(model, config, calibration=tokens)
    assert all(torch.all(bits == 3) for bits in report.tile_bits.values())
    assert torch.equal(quantized_logits(model, tokens), rtn_logits(llama, tokens, 3))


@settings(max_examples=6, deadline=None)
@given(avg_bits=st.floats(2.6, 4.7))
def test_slim_respects_the_budget_and_carry_over_only_adds_bits(llama, tokens, avg_bits: float) -> None:
    reports = {
        carry: quantize_and_report(
            copy.deepcopy(llama),
            SliMLLMConfig(avg_bits=avg_bits, tile=TILE, group_size=GROUP, quantizer="rtn", carry_over=carry),
            calibration=tokens,
        )
        for carry in (False, True)
    }
    budget = math.floor(avg_bits * reports[True].n_weights + 1e-6)
    assert reports[False].total_bits <= reports[True].total_bits <= budget


def test_slim_gptq_rounding_keeps_the_allocation_and_lowers_the_output_error(llama, tokens) -> None:
    reference = quantized_logits(llama, tokens)
    models, reports = {}, {}
    for quantizer in ("rtn", "gptq"):
        models[quantizer] = copy.deepcopy(llama)
        config = SliMLLMConfig(avg_bits=3.3, tile=TILE, group_size=GROUP, quantizer=quantizer)
        reports[quantizer] = quantize_and_report(models[quantizer], config, calibration=tokens)
    assert reports["rtn"].total_bits == reports["gptq"].total_bits
    assert all(torch.equal(reports["rtn"].tile_bits[n], b) for n, b in reports["gptq"].tile_bits.items())
    errors = {q: float((quantized_logits(m, tokens) - reference).pow(2).mean()) for q, m in models.items()}
    assert errors["gptq"] < errors["rtn"]


# --- SFMP-style static block allocation ------------------------------------------------------------------


def test_sfmp_at_a_uniform_budget_equals_uniform_rtn(llama, tokens) -> None:
    avg_bits = uniform_avg_bits(llama, 3, (2, 3, 4))
    model = copy.deepcopy(llama)
    config = SFMPConfig(avg_bits=avg_bits, tile=TILE, group_size=GROUP, reorder="none")
    report = quantize_and_report(model, config, calibration=tokens)
    assert all(torch.all(bits == 3) for bits in report.tile_bits.values())
    assert torch.equal(quantized_logits(model, tokens), rtn_logits(llama, tokens, 3))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), avg_bits=st.floats(2.6, 4.7))
def test_sfmp_threshold_raises_the_most_important_tiles_within_one_step_of_the_budget(
    seed: int, avg_bits: float
) -> None:
    generator = torch.Generator().manual_seed(seed)
    shapes = {"a": (32, 64), "b": (64, 32), "c": (16, 96)}
    importance = {
        n: torch.rand(r * c // (TILE[0] * TILE[1]), generator=generator) for n, (r, c) in shapes.items()
    }
    config = SFMPConfig(avg_bits=avg_bits, tile=TILE, group_size=GROUP)
    allocation = threshold_allocation(importance, shapes, config)
    used = sum(layer_ledger(shapes[n], TILE, GROUP, config.bits, allocation[n]).total_bits for n in shapes)
    n_weights = sum(r * c for r, c in shapes.values())
    budget = math.floor(avg_bits * n_weights + 1e-6)
    bits = torch.cat([allocation[n] for n in shapes])
    scores = torch.cat([importance[n] for n in shapes])
    assert used <= budget and len(set(bits.tolist())) <= 2  # two adjacent widths, as SFMP
    if bits.min() < max(config.bits):
        step = int(tile_variable_bits(torch.tensor(1), TILE, GROUP))
        assert budget - used < step or bits.min() == bits.max() == max(config.bits)
        if bits.min() < bits.max():  # every raised tile is at least as important as every other tile
            assert scores[bits == bits.max()].min() >= scores[bits == bits.min()].max()


def test_sfmp_folds_its_reordering_and_counts_no_permutation(llama, tokens) -> None:
    model = copy.deepcopy(llama)
    report = quantize_and_report(
        model, SFMPConfig(avg_bits=3.0, tile=TILE, group_size=GROUP), calibration=tokens
    )
    assert {fold.kind for fold in report.folds} == {"mlp", "attention-v-o"}
    assert report.total_bits <= math.floor(3.0 * report.n_weights + 1e-6)


# --- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SliMLLMConfig(quantizer="awq"), "quantizer"),
        (lambda: SliMLLMConfig(bits=(2, 9)), "bits"),
        (lambda: SliMLLMConfig(group_size=48), "group_size"),
        (lambda: SliMLLMConfig(damp=-1.0), "damp"),
        (lambda: SFMPConfig(reorder="runtime"), "reorder"),
        (lambda: SFMPConfig(tile=(32,)), "tile"),
        (lambda: ScaleBitsExperimentConfig(model="gpt2"), "model"),
    ],
)
def test_bad_configs_name_the_argument(make, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("config_cls", [SliMLLMConfig, SFMPConfig])
def test_a_budget_below_the_lowest_width_names_avg_bits(llama, tokens, config_cls) -> None:
    config = config_cls(avg_bits=2.0, tile=TILE, group_size=GROUP)  # 2-bit codes alone leave no metadata
    with pytest.raises(ValueError, match="avg_bits"):
        quantize_and_report(copy.deepcopy(llama), config, calibration=tokens)


@pytest.mark.parametrize("config_cls", [SliMLLMConfig, SFMPConfig])
def test_a_tile_that_does_not_divide_the_weights_is_an_error_unless_padded(llama, tokens, config_cls) -> None:
    with pytest.raises(ValueError, match="tile"):
        quantize_and_report(
            copy.deepcopy(llama), config_cls(tile=(24, 32), group_size=GROUP), calibration=tokens
        )
    report = quantize_and_report(
        copy.deepcopy(llama),
        config_cls(avg_bits=6.0, tile=(24, 32), group_size=GROUP, pad=True),
        calibration=tokens,
    )
    assert report.total_bits <= math.floor(6.0 * report.n_weights + 1e-6)
