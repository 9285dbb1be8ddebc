"""ScaleBITS' baselines: GPTQ (re-implemented), HQQ (hqq adapter), HAWQ-style layer-wise knapsack."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.scalebits import ScaleBitsLinear, UniformRTNConfig, quantize_and_report
from neurips26.methods.scalebits.baselines import (
    GPTQConfig,
    HAWQConfig,
    HQQConfig,
    hawq_allocation,
    quantize_gptq_allocation,
    uniform_ledger_bits,
)
from neurips26.methods.scalebits.core import layer_ledger, quantize_groups
from neurips26.methods.scalebits.gptq import (
    dequantize_partial_groups,
    gptq_quantize,
)
from neurips26.methods.scalebits.hawq import hutchinson_traces, knapsack_allocation
from neurips26.methods.scalebits.integration import apply_allocation, packed_report, select_linears
from neurips26.testing.skips import requires_package
from neurips26.zoo.builders import tiny_llama
from tests.methods.scalebits_oracles import brute_force_knapsack, gptq_reference

TILE, GROUP = (16, 32), 32


def correlated_problem(rows: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(rows, cols, generator=generator)
    mixing = torch.randn(cols, cols, generator=generator) * 0.3
    inputs = torch.randn(4 * cols, cols, generator=generator) @ mixing + torch.randn(
        4 * cols, cols, generator=generator
    )
    return weight, inputs.T @ inputs, inputs


# --- GPTQ -------------------------------------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 1000),
    cols=st.sampled_from([32, 48, 72]),
    block=st.sampled_from([16, 32]),
    rule=st.sampled_from(["dynamic", "static", "act_order"]),
)
def test_blocked_gptq_equals_unblocked_obq_oracle(seed: int, cols: int, block: int, rule: str) -> None:
    group = 16
    weight, hessian, _ = correlated_problem(12, cols, seed)
    bits = torch.randint(2, 5, (12, -(-cols // group)), generator=torch.Generator().manual_seed(seed))
    options = {"static_groups": rule != "dynamic", "act_order": rule == "act_order"}
    fast = gptq_quantize(weight, hessian, bits, group, block_size=block, **options)
    slow = gptq_reference(weight, hessian, bits, group, **options)
    mismatched = (fast[0] != slow[0]).float().mean()
    assert mismatched <= 0.01  # float32 Cholesky vs float64 inverse: a rare tie may round the other way
    assert torch.allclose(fast[1], slow[1], rtol=1e-2)


@pytest.mark.parametrize("static", [False, True])
def test_gptq_with_identity_hessian_equals_round_to_nearest(static: bool) -> None:
    weight = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    bits = torch.tensor([2, 3, 4, 3]).repeat(16, 1)[:, :2]
    codes, scales, zeros = gptq_quantize(
        weight, torch.eye(64), bits, 32, block_size=32, damp=0.0, static_groups=static
    )
    rtn = quantize_groups(weight, bits.repeat_interleave(32, 1), 32)
    assert torch.equal(codes, rtn[0]) and torch.equal(scales, rtn[1]) and torch.equal(zeros, rtn[2])


def test_gptq_lowers_the_layer_output_error_below_rtn() -> None:
    weight, hessian, inputs = correlated_problem(32, 64, 3)
    bits = torch.full((32, 2), 3)
    gptq = dequantize_partial_groups(*gptq_quantize(weight, hessian, bits, 32, block_size=32), 32)
    rtn = dequantize_partial_groups(*quantize_groups(weight, 3, 32), 32)
    assert ((gptq - weight) @ inputs.T).norm() < 0.9 * ((rtn - weight) @ inputs.T).norm()


def test_gptq_dead_input_columns_are_zeroed() -> None:
    weight, hessian, _ = correlated_problem(8, 32, 4)
    hessian[5, :] = 0
    hessian[:, 5] = 0
    codes, scales, zeros = gptq_quantize(weight, hessian, torch.full((8, 1), 4), 32, block_size=32)
    assert torch.allclose(
        dequantize_partial_groups(codes, scales, zeros, 32)[:, 5], torch.zeros(8), atol=1e-6
    )


def test_gptq_stages_follow_the_forward_order_and_shared_inputs(llama, tokens) -> None:
    from neurips26.methods.scalebits.gptq import accumulate_hessians

    remaining = dict(select_linears(llama, lambda m, n: "lm_head" not in n))
    stages = []
    while remaining:
        _, stage = accumulate_hessians(llama, remaining, tokens, 4)
        stages.append([name.rsplit(".", 1)[-1] for name in stage])
        for name in stage:
            remaining.pop(name)
    block = [["q_proj", "k_proj", "v_proj"], ["o_proj"], ["gate_proj", "up_proj"], ["down_proj"]]
    assert stages == block + block


def test_gptq_stage_hessians_equal_the_full_forward_ones_and_stop_the_forward(llama, tokens) -> None:
    from neurips26.methods.scalebits.gptq import accumulate_hessians, stage_hessians

    head_calls = []
    handle = llama.lm_head.register_forward_pre_hook(lambda module, inputs: head_calls.append(1))
    remaining = dict(select_linears(llama, lambda m, n: "lm_head" not in n))
    try:
        for _ in range(3):  # the first stages: q/k/v, o, gate/up
            full, expected = accumulate_hessians(llama, remaining, tokens, 4)
            calls_before = len(head_calls)
            cut, stage = stage_hessians(llama, remaining, tokens, 4)
            assert stage == expected and set(cut) == set(stage)
            assert all(torch.equal(cut[name], full[name]) for name in stage)
            assert len(head_calls) == calls_before, "the cut forward must not reach the output head"
            for name in stage:
                remaining.pop(name)
    finally:
        handle.remove()
    assert stage_hessians(llama, {"unused": torch.nn.Linear(4, 4)}, tokens, 4) == ({}, [])


def test_uniform_gptq_has_rtn_ledger_and_beats_rtn_on_the_calibration_loss(llama, tokens) -> None:
    rtn_model, gptq_model = copy.deepcopy(llama), copy.deepcopy(llama)
    rtn = quantize_and_report(rtn_model, UniformRTNConfig(bits=2, tile=TILE, group_size=GROUP))
    gptq = quantize_and_report(
        gptq_model, GPTQConfig(bits=2, tile=TILE, group_size=GROUP, block_size=32), calibration=tokens
    )
    assert gptq.total_bits == rtn.total_bits and gptq.nbytes == rtn.nbytes
    assert len(gptq.tile_bits) == 14  # 2 layers x (q, k, v, o, gate, up, down)
    assert all(isinstance(gptq_model.get_submodule(name), ScaleBitsLinear) for name in gptq.tile_bits)
    reference = llama(tokens).logits

    def error(model: torch.nn.Module) -> float:
        with torch.no_grad():
            return float((model(tokens).logits - reference).pow(2).mean())

    assert error(gptq_model) < error(rtn_model)


def test_gptq_on_a_mixed_allocation_keeps_the_allocation_and_its_ledger(llama, tokens) -> None:
    model = copy.deepcopy(llama)
    linears = select_linears(model, lambda m, n: "lm_head" not in n)
    generator = torch.Generator().manual_seed(0)
    allocation = {
        name: torch.tensor([2, 3, 4])[
            torch.randint(0, 3, (layer.weight.numel() // (TILE[0] * TILE[1]),), generator=generator)
        ]
        for name, layer in linears.items()
    }
    rtn = packed_report(apply_allocation(copy.deepcopy(llama), allocation, (2, 3, 4), TILE, GROUP), [], None)
    gptq = quantize_gptq_allocation(
        model,
        tokens,
        allocation,
        (2, 3, 4),
        TILE,
        GROUP,
        False,
        GPTQConfig(block_size=32, tile=TILE, group_size=GROUP),
    )
    assert gptq.total_bits == rtn.total_bits
    assert all(torch.equal(gptq.tile_bits[n], allocation[n]) for n in allocation)


def test_gptq_pads_weights_that_tiles_do_not_divide(tokens) -> None:
    model = tiny_llama(
        hidden_size=32, intermediate_size=40, num_layers=1, num_heads=2, num_kv_heads=1, seed=2
    )
    report = quantize_and_report(
        model, GPTQConfig(bits=3, tile=TILE, group_size=GROUP, block_size=32, pad=True), calibration=tokens
    )
    down = model.model.layers[0].mlp.down_proj
    assert down.stored_shape == (32, 64) and down.dequantize().shape == (32, 40)
    assert report.bits_per_weight > 3 and torch.isfinite(model(tokens).logits).all()


# --- HQQ --------------------------------------------------------------------------------------------------


@requires_package("hqq")
def test_hqq_layer_stores_float16_zeros_and_matches_the_library() -> None:
    from hqq.core.quantize import Quantizer

    from neurips26.methods.scalebits.baselines import hqq_quantize_weight

    weight = torch.randn(32, 64, generator=torch.Generator().manual_seed(0))
    codes, scales, zeros = hqq_quantize_weight(weight, 3, GROUP)
    layer = ScaleBitsLinear.from_quantized(
        codes, scales, zeros, (32, 64), torch.full((4,), 3), (3,), TILE, GROUP
    )
    quantized, meta = Quantizer.quantize(
        weight, nbits=3, group_size=GROUP, axis=1, bitpack=False, device="cpu"
    )
    library = ((quantized - meta["zero"]) * meta["scale"]).reshape(32, 64)
    # float16 scale / zero move a few codes across a rounding boundary; the rest dequantize alike
    assert ((layer.dequantize() - library).abs() > 1e-2).float().mean() < 0.02
    ledger = layer.ledger()
    assert ledger.streams["zeros_fp16"] == 16 * 32 * 64 // GROUP and ledger.streams["zeros_3"] == 0
    assert ledger.nbytes == layer.packed_nbytes()
    assert ledger.bits_per_weight == pytest.approx(3 + 32 / GROUP)


@requires_package("hqq")
def test_hqq_quantize_runs_and_is_counted(llama, tokens) -> None:
    model = copy.deepcopy(llama)
    report = quantize_and_report(model, HQQConfig(bits=2, tile=TILE, group_size=GROUP))
    shapes = [
        tuple(layer.weight.shape) for layer in select_linears(llama, lambda m, n: "lm_head" not in n).values()
    ]
    assert report.total_bits == sum(uniform_ledger_bits(s, TILE, GROUP, 2, float_zeros=True) for s in shapes)
    assert torch.isfinite(model(tokens).logits).all()


# --- HAWQ -------------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_layers=st.integers(1, 5), slack=st.floats(0, 1))
def test_knapsack_equals_brute_force(seed: int, n_layers: int, slack: float) -> None:
    generator = torch.Generator().manual_seed(seed)
    names = [f"l{i}" for i in range(n_layers)]
    sizes = {n: int(torch.randint(10, 100, (1,), generator=generator)) for n in names}
    layer_bits = {n: {b: b * sizes[n] for b in (2, 3, 4)} for n in names}
    costs = {
        n: {b: float(torch.rand(1, generator=generator)) * 4.0 ** (4 - b) for b in (2, 3, 4)} for n in names
    }
    low, high = sum(2 * s for s in sizes.values()), sum(4 * s for s in sizes.values())
    budget = int(low + slack * (high - low))
    chosen = knapsack_allocation(costs, layer_bits, budget)
    best, _ = brute_force_knapsack(costs, layer_bits, budget)
    assert sum(layer_bits[n][b] for n, b in chosen.items()) <= budget
    assert sum(costs[n][b] for n, b in chosen.items()) == pytest.approx(best, rel=1e-6)


def test_hutchinson_equals_its_probes_on_the_exact_hessian() -> None:
    """``mean_s v_s^T H v_s`` from Hessian-vector products equals the same probes on the exact Hessian."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = tiny_llama(
        hidden_size=8, intermediate_size=16, num_layers=1, num_heads=2, num_kv_heads=1, vocab_size=32, seed=0
    )
    batch = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(0))
    layer = {"v": model.model.layers[0].self_attn.v_proj}
    weight = layer["v"].weight

    def loss_of(w: torch.Tensor) -> torch.Tensor:
        parameters = {"model.layers.0.self_attn.v_proj.weight": w}
        logits = torch.func.functional_call(model, parameters, (batch,)).logits[:, :-1]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 32), batch[:, 1:].reshape(-1))

    with sdpa_kernel(SDPBackend.MATH):  # the fused CPU kernel has no double backward
        hessian = torch.autograd.functional.hessian(loss_of, weight.detach().clone())
    hessian = hessian.reshape(weight.numel(), weight.numel())
    samples, generator = 8, torch.Generator().manual_seed(0)
    probes = [
        (torch.randint(0, 2, weight.shape, generator=generator).float() * 2 - 1).reshape(-1)
        for _ in range(samples)
    ]
    expected = sum(float(v @ hessian @ v) for v in probes) / samples
    estimate = hutchinson_traces(model, layer, batch, 2, samples, torch.Generator().manual_seed(0))["v"]
    assert estimate == pytest.approx(expected, rel=1e-4, abs=1e-7)
    assert expected != pytest.approx(float(hessian.trace()), rel=1e-6)  # the probes are not the identity


def test_hawq_hits_the_budget_and_uses_one_width_per_layer(llama, tokens) -> None:
    model = copy.deepcopy(llama)
    config = HAWQConfig(avg_bits=2.9, tile=TILE, group_size=GROUP, hutchinson_samples=2)
    report = quantize_and_report(model, config, calibration=tokens)
    assert report.bits_per_weight <= 2.9
    assert all(len(set(bits.tolist())) == 1 for bits in report.tile_bits.values())
    assert len({int(bits[0]) for bits in report.tile_bits.values()}) > 1  # mixed across layers
    allocations, _ = hawq_allocation(copy.deepcopy(llama), tokens, config, [10.0])
    assert set(allocations[10.0].values()) == {4}


def test_float_zero_ledger_costs_sixteen_bits_per_group() -> None:
    ints = layer_ledger((32, 64), TILE, GROUP, (3,), torch.full((4,), 3))
    floats = layer_ledger((32, 64), TILE, GROUP, (3,), torch.full((4,), 3), float_zeros=True)
    assert floats.total_bits - ints.total_bits == (16 - 3) * 32 * 64 // GROUP


# --- bad input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "argument"),
    [
        (lambda: GPTQConfig(bits=0), "bits"),
        (lambda: GPTQConfig(block_size=100, group_size=64), "block_size"),
        (lambda: GPTQConfig(damp=-1.0), "damp"),
        (lambda: HQQConfig(bits=5), "bits"),
        (lambda: HAWQConfig(hutchinson_samples=0), "hutchinson_samples"),
        (lambda: HAWQConfig(bits=(2, 9)), "bits"),
        (lambda: gptq_quantize(torch.zeros(4, 8), torch.eye(4), torch.full((4, 1), 2), 8, 8), "hessian"),
        (lambda: gptq_quantize(torch.zeros(4, 8), torch.eye(8), torch.full((4, 2), 2), 8, 8), "group_bits"),
        (
            lambda: ScaleBitsLinear.from_quantized(
                torch.zeros(8, 8),
                torch.ones(8, 1),
                torch.zeros(8, 1),
                (16, 32),
                torch.full((1,), 2),
                (2,),
                TILE,
                GROUP,
            ),
            "codes",
        ),
    ],
)
def test_bad_input_names_the_argument(factory, argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        factory()


def test_gptq_config_static_groups_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="static_groups"):
        GPTQConfig(static_groups=1)
    with pytest.raises(TypeError, match="act_order"):
        GPTQConfig(act_order="yes")


def test_act_order_needs_static_groups() -> None:
    with pytest.raises(ValueError, match="static_groups"):
        GPTQConfig(act_order=True)
    weight, hessian, _ = correlated_problem(8, 32, 0)
    with pytest.raises(ValueError, match="static_groups"):
        gptq_quantize(weight, hessian, torch.full((8, 2), 3), 16, block_size=16, act_order=True)


def test_act_order_on_a_descending_hessian_diagonal_changes_nothing() -> None:
    weight, hessian, _ = correlated_problem(8, 48, 5)
    order = torch.argsort(torch.diag(hessian), descending=True)
    weight, hessian = weight[:, order], hessian[order][:, order]  # the diagonal is now descending
    bits = torch.full((8, 3), 3)
    static = gptq_quantize(weight, hessian, bits, 16, block_size=16, static_groups=True)
    ordered = gptq_quantize(weight, hessian, bits, 16, block_size=16, static_groups=True, act_order=True)
    assert all(torch.equal(a, b) for a, b in zip(static, ordered, strict=True))


def test_act_order_processes_the_heaviest_inputs_first() -> None:
    # one input column carries almost all the energy: quantized first, the rest absorb its error, so the
    # layer output error drops below the natural order's
    weight, hessian, inputs = correlated_problem(16, 64, 7)
    inputs = inputs.clone()
    inputs[:, -1] *= 8.0
    hessian = inputs.T @ inputs
    bits = torch.full((16, 4), 2)

    def output_error(act_order: bool) -> float:
        codes, scales, zeros = gptq_quantize(
            weight, hessian, bits, 16, block_size=16, static_groups=True, act_order=act_order
        )
        dequantized = dequantize_partial_groups(codes, scales, zeros, 16)
        return float((inputs @ (weight - dequantized).T).pow(2).mean())

    assert output_error(True) < output_error(False)


def test_every_gptq_rounded_row_uses_activation_ordering(monkeypatch, llama, tokens) -> None:
    """Issue #20: uniform GPTQ, SliM-LLM and ScaleBITS+GPTQ share one rounding with act_order switched on."""
    import neurips26.methods.scalebits.slim as slim_module
    from neurips26.methods.scalebits.experiment import EXPERIMENT, gptq_rounding
    from neurips26.methods.scalebits.slim import SliMLLMConfig

    config = EXPERIMENT.config_for(EXPERIMENT.profile("default"), {}, {})
    rounding = gptq_rounding(config, 4)
    assert rounding.act_order and rounding.static_groups
    off = EXPERIMENT.config_for(EXPERIMENT.profile("default"), {}, {"gptq_act_order": False})
    assert not gptq_rounding(off, 4).act_order
    seen = []
    real = slim_module.quantize_gptq_allocation
    monkeypatch.setattr(
        slim_module,
        "quantize_gptq_allocation",
        lambda *args: seen.append(args[-1].act_order) or real(*args),
    )
    model = copy.deepcopy(llama)
    slim = SliMLLMConfig(avg_bits=3.5, tile=(8, 16), group_size=16, act_order=True, micro_batch=2)
    quantize_and_report(model, slim, calibration=tokens[:2])
    assert seen == [True]


def test_uniform_rtn_through_torchao_quantize_equals_quantize_and_report(llama) -> None:
    pytest.importorskip("torchao")
    from torchao.quantization import quantize_ as torchao_quantize_

    config = UniformRTNConfig(bits=3, tile=(16, 32), group_size=32)
    ours, theirs = copy.deepcopy(llama), copy.deepcopy(llama)
    quantize_and_report(ours, config)
    assert torchao_quantize_(theirs, config, filter_fn=config.filter_fn) is None
    packed = [name for name, m in ours.named_modules() if isinstance(m, ScaleBitsLinear)]
    assert packed
    for name in packed:
        assert torch.equal(ours.get_submodule(name).dequantize(), theirs.get_submodule(name).dequantize())


def test_full_precision_contrast_system_leaves_the_model_as_it_is(llama, tokens) -> None:
    """Issue #48: the known-good end of every contrast is the unquantized model, at its stored width."""
    from neurips26.methods.scalebits.experiment import (
        EXPERIMENT,
        RECIPES,
        System,
        quantize_baseline,
    )
    from neurips26.methods.scalebits.task import LanguageTask

    config = EXPERIMENT.config_for(EXPERIMENT.profile("smoke"), {}, {"calibration_sequences": 2})
    task = LanguageTask(llama, tokens.flatten(), tokens.flatten(), None)
    model, report, _ = quantize_baseline(System.build(RECIPES["full_precision"], config), config, task, 0)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), llama.parameters(), strict=True))
    assert report.bits_per_weight == report.bytes_per_weight_bits == 32.0
    assert all(claim.contrast == ("full_precision", "uniform_rtn") for claim in EXPERIMENT.claims)


def test_perplexity_windows_follow_eval_length_not_the_calibration_length() -> None:
    """Issue #48: the default scores 256-token windows while calibrating on 64-token ones."""
    from neurips26.methods.scalebits.experiment import EXPERIMENT
    from neurips26.methods.scalebits.task import evaluation_windows

    config = EXPERIMENT.config_for(EXPERIMENT.profile("default"), {}, {})
    ids = torch.arange(5000)
    assert config.sequence_length == 64
    assert evaluation_windows(ids, config).shape == (config.eval_tokens // 256, 256)
    unset = EXPERIMENT.config_for(EXPERIMENT.profile("default"), {}, {"eval_length": None})
    assert evaluation_windows(ids, unset).shape[1] == 64
    with pytest.raises(ValueError, match="retrieval_kinds"):
        EXPERIMENT.config_for(EXPERIMENT.profile("default"), {}, {"retrieval_kinds": ["needle"]})
