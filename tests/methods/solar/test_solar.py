"""Tests for SOLAR (speed-of-light bounds): counts, IR, gate, bounds, audit, hardware, CLI, experiment."""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from neurips26.methods.solar import (
    Access,
    Affine,
    EinsumNode,
    HardwareSpec,
    OpCost,
    analyze,
    check,
    inverse_roofline,
    known_hardware,
    load_hardware,
    rebound,
    register_rule,
    save_hardware,
    unregister_rule,
)
from neurips26.methods.solar.baselines import flop_counter_flops
from neurips26.methods.solar.ir import count_domain_points, gather_access
from neurips26.methods.solar.rules import rule_matmul
from neurips26.methods.solar.rules_attention import rule_sdpa

torch.set_num_threads(1)
README = Path(__file__).resolve().parents[3] / "src/neurips26/methods/solar/README.md"


class MatMul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class Attention(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def _meta_flops(model: nn.Module, inputs: list[torch.Tensor]) -> int:
    return flop_counter_flops(model, inputs, "meta")


# ---------------------------------------------------------------------------------------------- golden counts


def test_matmul_counts_match_hand_formula_and_flopcounter() -> None:
    a, b = torch.randn(24, 40), torch.randn(40, 16)
    report = analyze(MatMul(), [a, b], hw="H100-SXM")
    assert report.macs == {"float32": 24 * 40 * 16}
    assert report.flops == _meta_flops(MatMul(), [a, b]) == 2 * 24 * 40 * 16
    assert report.validated and report.complete


def test_conv_counts_match_flopcounter_without_padding_and_exclude_padded_taps() -> None:
    x = torch.randn(2, 3, 9, 9)
    plain = nn.Conv2d(3, 5, 3, stride=2, bias=False)
    assert analyze(plain, [x], hw="A100").flops == _meta_flops(plain, [x])
    padded = nn.Conv2d(3, 5, 3, padding=1, bias=False)
    taps = sum(1 for p in range(9) for r in range(3) if 0 <= p + r - 1 < 9)  # valid (output, tap) pairs
    report = analyze(padded, [x], hw="A100")
    assert report.macs["float32"] == 2 * 5 * 3 * taps**2
    assert report.flops < _meta_flops(padded, [x])  # FlopCounterMode counts taps that read padding zeros
    assert report.validated


def test_idea_causal_attention_counts_the_triangle() -> None:
    b, h, t, d = 2, 3, 16, 8
    qkv = [torch.randn(b, h, t, d) for _ in range(3)]
    causal = analyze(Attention(True), qkv, hw="H200")
    full = analyze(Attention(False), qkv, hw="H200")
    assert causal.macs["float32"] == b * h * (t * (t + 1) // 2) * 2 * d
    assert full.macs["float32"] == b * h * t * t * 2 * d == _meta_flops(Attention(False), qkv) // 2
    assert _meta_flops(Attention(True), qkv) == full.flops  # FlopCounterMode ignores the causal mask
    assert flop_counter_flops(Attention(False), qkv, "cpu") == 0  # and misses CPU attention entirely
    assert causal.validated and full.validated


def test_bytes_follow_each_tensors_dtype() -> None:
    a, b = torch.randn(32, 32, dtype=torch.bfloat16), torch.randn(32, 32, dtype=torch.float32)
    report = analyze(lambda x, y: x.float() @ y, [a, b], hw="H200", validate=False)
    assert report.bounds.compulsory_bytes == 32 * 32 * 2 + 32 * 32 * 4  # outputs fit on chip (see README)


# ------------------------------------------------------------------------------------------ IR and counting


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 9),
    n=st.integers(1, 9),
    coeffs=st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-6, 6)), min_size=1, max_size=3
    ),
)
def test_domain_point_count_equals_brute_force(m: int, n: int, coeffs: list[tuple[int, int, int]]) -> None:
    guards = tuple(Affine((("i", a), ("j", b)), c) for a, b, c in coeffs)
    brute = sum(all(a * i + b * j + c >= 0 for a, b, c in coeffs) for i in range(m) for j in range(n))
    assert count_domain_points({"i": m, "j": n, "z": 3}, guards) == 3 * brute


def test_affine_gather_matches_python_loops() -> None:
    value = torch.randn(5, 7)
    acc = Access("x", (Affine((("p", 2), ("r", 1)), -1), Affine.of("q")))
    gathered, ranks = gather_access(value, acc, {"p": 3, "r": 2, "q": 7}, fill=0.0)
    assert ranks == ["p", "r", "q"]
    for p in range(3):
        for r in range(2):
            for q in range(7):
                i = 2 * p + r - 1
                want = value[i, q].item() if 0 <= i < 5 else 0.0
                assert gathered[p, r, q].item() == want


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 2)])
def test_conv_einsum_node_matches_torch(stride: int, padding: int, dilation: int, groups: int) -> None:
    conv = nn.Conv2d(4, 6, 3, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=True)
    report = analyze(conv, [torch.randn(2, 4, 11, 10)], hw="H200")
    assert report.validated, report.validation.reason
    node = next(n for n in report.graph.nodes if isinstance(n, EinsumNode))
    assert node.points() == report.macs["float32"]


def test_idea_validation_gate_rejects_a_wrong_lowering() -> None:
    def transposed_mm(call):  # deliberately wrong: contracts a with b's other axis
        cost = rule_matmul(call)
        node = cost.nodes[0]
        node.operands[1] = Access(node.operands[1].value, tuple(reversed(node.operands[1].index)))
        return cost

    def causal_without_guard(call):
        cost = rule_sdpa(call)
        for node in cost.nodes:
            if isinstance(node, EinsumNode):
                node.guards = ()
        return cost

    a = torch.randn(8, 8)
    register_rule("aten::mm", transposed_mm)
    try:
        assert not analyze(MatMul(), [a, torch.randn(8, 8)], hw="H200").validated
    finally:
        register_rule("aten::mm", rule_matmul)
    qkv = [torch.randn(1, 2, 6, 4) for _ in range(3)]
    # the dispatch tracer sees the Python function, the export frontend the ATen composite
    for frontend, key in (
        ("dispatch", "torch.nn.functional.scaled_dot_product_attention"),
        ("export", "aten::scaled_dot_product_attention"),
    ):
        register_rule(key, causal_without_guard)
        try:
            assert not analyze(Attention(True), qkv, hw="H200", frontend=frontend).validated
        finally:
            register_rule(key, rule_sdpa)
        assert analyze(Attention(True), qkv, hw="H200", frontend=frontend).validated


def test_unknown_op_is_listed_with_a_hint_and_a_rule_completes_it() -> None:
    def program(x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).abs()

    report = analyze(program, [torch.randn(64)], hw="H200")
    assert "aten::_fft_r2c" in report.unknown_ops and not report.complete
    assert "register_rule('aten::_fft_r2c'" in report.summary()
    register_rule("aten::_fft_r2c", lambda call: OpCost("custom", {}, 5 * 64 * 6))
    try:
        fixed = analyze(program, [torch.randn(64)], hw="H200")
        assert fixed.complete and fixed.validated and fixed.other_flops == 5 * 64 * 6 + 33
    finally:
        unregister_rule("aten::_fft_r2c")


def test_data_dependent_program_asks_for_concrete_tracing() -> None:
    def program(x: torch.Tensor) -> torch.Tensor:
        return x[x > 0].sum()

    with pytest.raises(ValueError, match="trace_device='cpu'"):
        analyze(program, [torch.randn(16)], hw="H200")
    assert analyze(program, [torch.randn(16)], hw="H200", trace_device="cpu").validated


# ------------------------------------------------------------------------------------------------- bounds


def _spec(bandwidth: float = 1e11, flops: float = 1e12, onchip: int = 2**20) -> HardwareSpec:
    return HardwareSpec("toy", "gpu", False, "test", bandwidth, onchip, {"float32": flops})


@settings(max_examples=15, deadline=None)
@given(
    m=st.integers(1, 64),
    k=st.integers(1, 64),
    n=st.integers(1, 64),
    bw=st.floats(1e9, 1e13),
    fl=st.floats(1e9, 1e15),
)
def test_bound_fidelities_are_ordered(m: int, k: int, n: int, bw: float, fl: float) -> None:
    inputs = [torch.randn(m, k), torch.randn(k, n)]
    report = analyze(MatMul(), inputs, hw=_spec(bw, fl, 4096), validate=False, frontend="dispatch")
    b = report.bounds
    assert b.flop_only <= b.fused <= b.cache_aware <= b.target * (1 + 1e-12)
    assert b.fused <= b.unfused * (1 + 1e-12)


def test_idea_cache_aware_bound_uses_hong_kung_when_cache_is_small() -> None:
    a, b = torch.randn(512, 512, device="meta"), torch.randn(512, 512, device="meta")
    report = analyze(MatMul(), [a, b], hw=_spec(onchip=4096), validate=False)
    s_words = 4096 / 4
    hk = 4 * (512**3 / (2 * math.sqrt(2) * math.sqrt(s_words)) - s_words)
    assert report.bounds.cache_aware_bytes == int(hk) > report.bounds.compulsory_bytes


def test_idea_fused_bound_counts_only_the_programs_compulsory_traffic() -> None:
    """Central idea (fused fidelity), through ``analyze``: a chain of elementwise ops fused moves only the
    program's compulsory traffic (its input; an output that fits on chip is not counted, see the README),
    while the unfused bound moves every intermediate. Off (the fused bytes
    set to the unfused sum) the fused bound equals the unfused one and this fails."""
    x = torch.randn(256, 256)
    report = analyze(lambda t: (torch.relu(t) * 2.0 + 1.0).tanh(), [x], hw="H200", validate=False)
    tensor_bytes = x.numel() * x.element_size()
    assert report.bounds.compulsory_bytes == tensor_bytes
    assert report.bounds.unfused_bytes >= 4 * 2 * tensor_bytes  # four ops, each reads and writes
    assert report.bounds.fused < 0.3 * report.bounds.unfused


def test_degenerate_flop_only_bound_equals_flopcounter_roofline() -> None:
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    spec = _spec()
    report = analyze(MatMul(), [a, b], hw=spec, validate=False)
    assert report.bounds.flop_only == pytest.approx(
        _meta_flops(MatMul(), [a, b]) / spec.flops_rate("float32")
    )


def test_check_flags_only_lower_bound_violations() -> None:
    report = analyze(MatMul(), [torch.randn(64, 64), torch.randn(64, 64)], hw="H200")
    assert check(report, report.bounds.cache_aware * 2).ok
    audit = check(report, report.bounds.fused / 2)
    assert not audit.ok and any("fused" in v for v in audit.violations)
    between = (report.bounds.cache_aware + report.bounds.unfused) / 2
    assert check(report, between).ok and check(report, between).rows["unfused"]["below"]
    with pytest.raises(ValueError, match="measured_seconds"):
        check(report, -1.0)


def test_inverse_roofline_round_trips() -> None:
    report = analyze(MatMul(), [torch.randn(128, 128), torch.randn(128, 128)], hw="H100-SXM", validate=False)
    target = report.bounds.fused / 3
    need = inverse_roofline(report, target)
    assert rebound(report, need.provisioned).bounds.fused == pytest.approx(target, rel=1e-9)
    assert need.required_bandwidth_Bps == pytest.approx(report.bounds.compulsory_bytes / target)
    with pytest.raises(ValueError, match="fidelity"):
        inverse_roofline(report, target, fidelity="unfused")


def test_audit_passes_above_every_lower_bound_and_flags_a_time_below_one() -> None:
    # Deterministic on purpose: whether a warm run beats the bound depends on the machine's load (issue
    # #19: no test asserts a timing-dependent claim); benchmarks/ shows the cold/warm measurement itself.
    spec = dataclasses.replace(
        load_hardware("H200"),
        name="cpu-test",
        kind="cpu",
        dram_bandwidth_Bps=10e9,
        onchip_bytes=2**20,
        peak_flops={"float32": 1e13},
    )
    a, b = torch.randn(2**16), torch.randn(2**16)
    report = analyze(torch.add, [a, b], hw=spec)
    lower_bounds = [report.bound(f) for f in ("flop_only", "fused", "cache_aware")]
    assert check(report, 10 * max(lower_bounds)).ok
    too_fast = check(report, 0.1 * report.bound("fused"))
    assert not too_fast.ok and any("fused bound" in v for v in too_fast.violations)


# -------------------------------------------------------------------------------------- hardware and inputs


def test_hardware_yaml_round_trip(tmp_path: Path) -> None:
    for name in ("B200", "H100-SXM", "H200", "A100"):
        spec = load_hardware(name)
        assert not spec.measured
        path = save_hardware(spec, tmp_path / f"{name}.yaml")
        assert load_hardware(str(path)) == spec


def test_unknown_hardware_lists_known_ones() -> None:
    with pytest.raises(ValueError, match=r"known: \[.*H200"):
        load_hardware("TPU-v9")
    assert {"A100", "B200", "H100-SXM", "H200", "cpu-local"} <= set(known_hardware())


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"dram_bandwidth_Bps": -1.0}, "dram_bandwidth_Bps"),
        ({"kind": "fpga"}, "kind"),
        ({"peak_flops": {}}, "peak_flops"),
        ({"onchip_bytes": 0}, "onchip_bytes"),
    ],
)
def test_bad_hardware_spec_names_the_field(kwargs: dict, match: str) -> None:
    base = {
        "name": "x",
        "kind": "gpu",
        "measured": False,
        "source": "t",
        "dram_bandwidth_Bps": 1.0,
        "onchip_bytes": 1,
        "peak_flops": {"float32": 1.0},
    }
    with pytest.raises(ValueError, match=match):
        HardwareSpec(**{**base, **kwargs})


def test_bad_inputs_raise_clear_errors() -> None:
    from neurips26.methods.solar.config import SOLARConfig

    with pytest.raises(TypeError, match="example_inputs"):
        analyze(MatMul(), torch.randn(2, 2), hw="H200")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reps"):
        SOLARConfig(reps=0)
    with pytest.raises(ValueError, match="programs"):
        SOLARConfig(programs=("no_such_program",))


def test_report_json_is_complete(tmp_path: Path) -> None:
    import json

    report = analyze(Attention(True), [torch.randn(1, 2, 8, 4) for _ in range(3)], hw="B200")
    data = json.loads(report.to_json(tmp_path / "r.json"))
    assert data["validated"] is True and data["bounds_seconds"]["fused"] > 0
    assert {"ops", "macs_by_dtype", "unknown_ops", "arithmetic_intensity", "bottleneck"} <= set(data)
    assert json.loads((tmp_path / "r.json").read_text()) == data


# -------------------------------------------------------------------------------------- scale, CLI, README


def test_meta_built_gpt_has_no_unknown_ops_and_counts_its_layers() -> None:
    from neurips26.methods.solar.suite.models import TinyGPT

    def build(layers: int) -> nn.Module:
        with torch.device("meta"):
            return TinyGPT(1000, 64, 4, layers, 128).eval()

    ids = torch.zeros(1, 128, dtype=torch.long, device="meta")
    one, three = (analyze(build(n), [ids], hw="H200", validate=False) for n in (1, 3))
    assert one.complete and three.complete
    per_layer = three.macs["float32"] - one.macs["float32"]
    assert per_layer == 2 * (
        128 * 64 * 3 * 64 + 4 * (128 * 129 // 2) * 2 * 16 + 128 * 64 * 64 + 2 * 128 * 64 * 256
    )


def test_cli_analyze_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neurips26.methods.solar import cli

    source = tmp_path / "prog.py"
    source.write_text(
        "import torch\nfrom torch import nn\n"
        "class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
        "def get_inputs():\n    return [torch.randn(4, 5), torch.randn(5, 6)]\n"
    )
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    json_path = tmp_path / "r.json"
    assert (
        cli.main(parser.parse_args(["analyze", f"{source}:Model", "--hw", "H200", "--json", str(json_path)]))
        == 0
    )
    out = capsys.readouterr().out
    assert "validated True" in out and "frontend torch-dispatch" in out and json_path.exists()
    args = ["analyze", f"{source}:Model", "--hw", "H200", "--frontend", "auto", "--no-validate"]
    assert cli.main(parser.parse_args(args)) == 0
    assert "frontend torch-export" in capsys.readouterr().out
    assert cli.main(parser.parse_args(["analyze", f"{source}:Model", "--hw", "nope"])) == 1
    assert "known" in capsys.readouterr().err


def test_experiment_smoke_cell_runs() -> None:
    from neurips26.bench.experiment import SilentProgress
    from neurips26.methods.solar.config import SOLARConfig
    from neurips26.methods.solar.experiment import EXPERIMENT

    config = SOLARConfig(programs=("gemm_skinny", "sdpa_causal"), reps=1)
    profile = EXPERIMENT.profile("smoke")
    for name in ("solar", "flopcounter_cpu"):
        metrics = EXPERIMENT.run_cell(EXPERIMENT.systems[name](config), config, profile, 0, SilentProgress())
        assert {m.name for m in EXPERIMENT.metrics} == set(metrics)
        assert all(math.isfinite(v) for v in metrics.values())
        # violations depend on the machine's load: reported, never asserted (issue #19)
        assert 0 <= metrics["violations"] <= metrics["violations_raw"] <= 2
        assert metrics["spec_noise"] >= 0 and metrics["spec_fp32_gflops"] > 0
        if name == "solar":
            assert metrics["count_agreement"] == 1.0
        else:
            assert metrics["count_agreement"] == 0.5  # misses CPU attention


# ---------------------------------------------------------------------------------------------------- JAX


def test_jax_programs_count_loops_by_trips_and_validate() -> None:
    pytest.importorskip("jax")
    import jax

    from neurips26.methods.solar.suite.jax_programs import programs

    for entry in programs():
        if entry["name"] not in ("jax_scan_rnn", "jax_while_solver"):
            continue  # same primitives as the others; kept out to hold the test to a few seconds
        inputs = entry["inputs"]()
        report = analyze(entry["fn"], inputs, hw="H200")
        assert sum(report.macs.values()) == entry["macs"], entry["name"]
        assert report.validated and report.complete, (entry["name"], report.validation.reason)
        if entry["name"] == "jax_scan_rnn":
            cost = jax.jit(entry["fn"]).lower(*inputs).compile().cost_analysis()
            cost = cost[0] if isinstance(cost, list) else cost
            assert cost["flops"] < report.flops / 5  # XLA counts the loop body once


def test_jax_cond_takes_the_cheapest_branch_and_abstract_while_is_marked() -> None:
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp
    from jax import lax

    def branchy(p: jax.Array, x: jax.Array, w: jax.Array) -> jax.Array:
        return lax.cond(p.sum() > 0, lambda a: a @ w @ w, lambda a: a @ w, x)

    x, w = jnp.ones((4, 8)), jnp.ones((8, 8))
    assert analyze(branchy, [jnp.ones(2), x, w], hw="H200").macs == {"float32": 4 * 8 * 8}

    def loop(x: jax.Array) -> jax.Array:
        return lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] @ w, c[1] + 1), (x, 0))[0]

    concrete = analyze(loop, [x], hw="H200")
    abstract = analyze(loop, [jax.ShapeDtypeStruct((4, 8), jnp.float32)], hw="H200", validate=False)
    assert concrete.macs == {"float32": 5 * 4 * 8 * 8}
    assert abstract.macs == {"float32": 4 * 8 * 8} and "trip-unknown" in abstract.frontend


def test_solar_yaml_export_lists_einsums_with_roles() -> None:
    import yaml

    from neurips26.methods.solar.export import to_solar_yaml

    report = analyze(nn.Linear(8, 4), [torch.randn(3, 8)], hw="H200")
    data = yaml.safe_load(to_solar_yaml(report))
    mac = next(layer for layer in data["layers"].values() if layer["is_real_einsum"])
    assert mac["macs"] == 3 * 8 * 4 and mac["tensor_types"] == ["input", "weight", "output"]
    assert "weight" in mac["tensor_names"] and data["bounds_seconds"]["fused"] > 0


def test_cpu_peak_estimate_and_cache_size_from_fake_system_files(tmp_path: Path) -> None:
    from neurips26.methods.solar.hardware import read_cache_bytes, theoretical_cpu_flops

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("cpu MHz\t\t: 2000.0\nflags\t\t: fpu avx2 avx512f fma\n")
    peaks = theoretical_cpu_flops(2, boost=1.5, cpuinfo=str(cpuinfo))
    assert peaks["float32"] == 2 * 2 * 16 * 2 * 2000e6 * 1.5 and peaks["float64"] == peaks["float32"] / 2
    for cpu in (0, 1):
        for index, (level, size, kind, shared) in enumerate(
            [
                ("1", "48K", "Data", str(cpu)),
                ("1", "32K", "Instruction", str(cpu)),
                ("3", "32768K", "Unified", "0-1"),
            ]
        ):
            folder = tmp_path / f"cpu{cpu}/cache/index{index}"
            folder.mkdir(parents=True)
            for name, text in (("level", level), ("size", size), ("type", kind), ("shared_cpu_list", shared)):
                (folder / name).write_text(text)
    assert read_cache_bytes(str(tmp_path)) == 2 * 48 * 1024 + 32768 * 1024


def test_overlapping_windows_count_their_span_and_plugins_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from neurips26.methods.solar import rules
    from neurips26.methods.solar.frontend_torch import distinct_elements

    x = torch.randn(10)
    assert distinct_elements(x.unfold(0, 3, 1)) == 10 and distinct_elements(x.expand(4, 10)) == 10

    class Entry:
        name = "fake"

        def load(self):  # a plug-in registers its rules when called
            return lambda: register_rule("mylib::fake", lambda call: OpCost("custom"))

    monkeypatch.setattr(rules, "_PLUGINS_LOADED", False)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [Entry()])
    assert rules.load_rule_plugins() == ["fake"] and rules.find_rule("mylib::fake") is not None
    unregister_rule("mylib::fake")


def test_analyzer_class_and_gate_caps() -> None:
    from neurips26.methods.solar import SOLARAnalyzer

    a, b = torch.randn(16, 8), torch.randn(8, 4)
    analyzer = SOLARAnalyzer("A100", validate=False)
    assert (
        analyzer.analyze(MatMul(), [a, b]).bounds
        == analyze(MatMul(), [a, b], hw="A100", validate=False).bounds
    )
    conv = nn.Conv2d(4, 4, 3, padding=1)
    capped = analyze(conv, [torch.randn(1, 4, 16, 16)], hw="A100", validate_max_bytes=4096)
    assert not capped.validated and "gather" in capped.validation.reason


def test_creation_ops_traced_on_meta_run_on_cpu_in_the_ir() -> None:
    class Positional(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = nn.Embedding(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.table(torch.arange(x.shape[0], device=x.device))

    assert analyze(Positional(), [torch.randn(10, 4)], hw="H200").validated


def test_hugging_face_models_validate() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            n_layer=1, n_positions=32, n_embd=32, n_head=2, vocab_size=50, attn_implementation="sdpa"
        )
    ).eval()
    ids = torch.randint(0, 50, (1, 16))
    report = analyze(gpt2, [ids], hw="H200")
    assert report.validated and report.complete, report.validation.reason
    attention = 2 * (16 * 17 // 2) * 2 * 16
    assert report.macs["float32"] == 16 * 32 * (96 + 32 + 128 + 128) + attention + 16 * 32 * 50
    llama = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=50,
            attn_implementation="sdpa",
        )
    ).eval()
    # its rotary embedding asks autocast about the meta device: the tracer answers instead of torch raising
    on_meta = analyze(llama, [ids], hw="H200")
    on_cpu = analyze(llama, [ids], hw="H200", trace_device="cpu")
    assert on_meta.validated and on_cpu.validated and on_meta.macs == on_cpu.macs


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 12),
    n=st.integers(1, 12),
    k=st.integers(1, 5),
    coeffs=st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3), st.integers(-6, 6)),
        min_size=1,
        max_size=3,
    ),
)
def test_domain_point_count_matches_islpy(
    m: int, n: int, k: int, coeffs: list[tuple[int, int, int, int]]
) -> None:
    isl = pytest.importorskip("islpy")
    guards = tuple(Affine((("i", a), ("j", b), ("l", c)), d) for a, b, c, d in coeffs)
    constraints = " and ".join(f"{a}*i + {b}*j + {c}*l + {d} >= 0" for a, b, c, d in coeffs)
    domain = isl.Set(f"{{ [i, j, l] : 0 <= i < {m} and 0 <= j < {n} and 0 <= l < {k} and {constraints} }}")
    assert count_domain_points({"i": m, "j": n, "l": k}, guards) == domain.count_val().to_python()


def test_jax_convolution_counts_valid_taps() -> None:
    pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    def conv(img, k):
        return lax.conv_general_dilated(img, k, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))

    taps = sum(1 for p in range(6) for r in range(3) if 0 <= p + r - 1 < 6)
    report = analyze(conv, [jnp.ones((1, 2, 6, 6)), jnp.ones((3, 2, 3, 3))], hw="H200", validate=False)
    assert report.macs == {"float32": 3 * 2 * taps**2}
