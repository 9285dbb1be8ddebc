"""SOLAR's LLM plug-in slot, tested with recorded responses (no model): emitted IR must pass the gate."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from neurips26.methods.solar import analyze, unregister_rule
from neurips26.methods.solar.plugins import RecordedLowerings, parse_affine, parse_description
from neurips26.methods.solar.rules import find_rule

torch.set_num_threads(1)
RECORDED = Path(__file__).parent / "data" / "solar_llm"
OPS = ("solar_test::bilinear", "solar_test::tril_matmul")


@torch.library.custom_op("solar_test::bilinear", mutates_args=())
def bilinear(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``out[b, o] = Σ_ij x[b, i] w[o, i, j] y[b, j]`` — an op no built-in rule knows."""
    return torch.einsum("bi,oij,bj->bo", x, w, y)


@bilinear.register_fake
def _(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], w.shape[0])


@torch.library.custom_op("solar_test::tril_matmul", mutates_args=())
def tril_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``tril(a) @ b``: a kernel that skips the upper triangle (a guarded domain)."""
    return torch.tril(a) @ b


@tril_matmul.register_fake
def _(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.new_empty(a.shape[0], b.shape[1])


class Bilinear(nn.Module):
    def __init__(self, features: int, out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out, features, features))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.ops.solar_test.bilinear(x, self.weight, y)


def _tril(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.ops.solar_test.tril_matmul(a, b)


@pytest.fixture
def replay():
    """Register the rules of one recorded-response folder; remove them afterwards."""

    def register(folder: str) -> list[str]:
        return RecordedLowerings(RECORDED / folder)()

    yield register
    for op in OPS:
        unregister_rule(op)


@pytest.mark.parametrize("frontend", ["export", "dispatch"])
def test_recorded_lowerings_complete_the_analysis_and_pass_the_gate(replay, frontend: str) -> None:
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    before = analyze(Bilinear(5, 4), [x, y], hw="H200", frontend=frontend)
    assert "solar_test::bilinear" in before.unknown_ops and not before.complete
    assert sorted(replay("good")) == sorted(OPS)
    report = analyze(Bilinear(5, 4), [x, y], hw="H200", frontend=frontend)
    assert report.complete and report.frontend == f"torch-{frontend}"
    assert report.macs == {"float32": 3 * 4 * 5 * 5}
    assert report.validated and report.validation.checked_mac_fraction == 1.0, report.validation.reason
    tri = analyze(_tril, [torch.randn(6, 6), torch.randn(6, 2)], hw="H200", frontend=frontend)
    assert tri.macs == {"float32": 6 * 7 // 2 * 2} and tri.validated  # the triangle, not 6*6*2


def test_a_wrong_recorded_response_is_rejected_by_the_gate(replay) -> None:
    replay("wrong")  # bilinear with the weight's i/j swapped; tril_matmul guarded on the upper triangle
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    report = analyze(Bilinear(5, 4), [x, y], hw="H200")
    assert report.macs == {"float32": 3 * 4 * 5 * 5}  # the counts look right ...
    assert not report.validated and "max |IR - program|" in report.validation.reason  # ... the gate says no
    tri = analyze(_tril, [torch.randn(6, 6), torch.randn(6, 2)], hw="H200")
    assert tri.macs == {"float32": 6 * 7 // 2 * 2} and not tri.validated


def test_recorded_plugin_loads_through_the_entry_point_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    from neurips26.methods.solar import rules

    class Entry:
        name = "recorded-llm"

        def load(self):
            return RecordedLowerings(RECORDED / "good")

    monkeypatch.setattr(rules, "_PLUGINS_LOADED", False)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [Entry()])
    try:
        assert rules.load_rule_plugins() == ["recorded-llm"]
        assert all(find_rule(op) is not None for op in OPS)
    finally:
        for op in OPS:
            unregister_rule(op)


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        ({"op": "bilinear"}, "field 'op' must be 'namespace::name'"),
        ({"kind": "magic"}, r"kind='magic'; allowed \['contraction', 'reduction'\]"),
        ({"ranks": {"b": "x.size(0)"}}, "rank 'b' has extent 'x.size\\(0\\)'"),
        ({"output": ["b", "z"]}, "output rank 'z' is not declared"),
        ({"operands": [{"arg": 0, "index": ["b*i"]}]}, "is not affine"),
        ({"operands": [{"arg": 0, "index": ["q"]}]}, "uses rank 'q'"),
        ({"reduce": "mean"}, "reduce='mean'"),
    ],
)
def test_malformed_responses_are_rejected_by_the_schema(patch: dict, match: str) -> None:
    import json

    data = json.loads((RECORDED / "good" / "bilinear.json").read_text())
    data.update(patch)
    with pytest.raises(ValueError, match=match):
        parse_description(data)


def test_affine_parser_and_missing_path() -> None:
    affine = parse_affine("2*p + r - 1", {"p": 4, "r": 3}, "test")
    assert dict(affine.terms) == {"p": 2, "r": 1} and affine.const == -1
    with pytest.raises(ValueError, match="path="):
        RecordedLowerings(RECORDED / "missing")
