"""Transposed convolutions: exact MACs (taps that land in the output), the conventional full count beside
them, and the IR einsum checked by the validation gate.

Two oracles independent of the rule: a brute-force loop over (input pixel, kernel tap) pairs that keeps the
pairs whose output index ``p*s + r*d - pad`` falls in ``[0, out)``, and torch itself: with all-ones input and
weights, every MAC adds exactly 1 to a visible output, so the sum of the output IS the MAC count.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from neurips26.methods.solar import analyze
from neurips26.methods.solar.baselines import flop_counter_flops
from neurips26.methods.solar.ir import Affine, EinsumNode, count_domain_points

TRANSPOSED = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}


def brute_force_macs(conv: nn.Module, x_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> int:
    """Loop over every input pixel and kernel tap; count those whose output index is inside the output."""
    landed = 0
    spatial = range(len(x_shape) - 2)
    for p in itertools.product(*[range(n) for n in x_shape[2:]]):
        for r in itertools.product(*[range(k) for k in conv.kernel_size]):
            q = [p[i] * conv.stride[i] + r[i] * conv.dilation[i] - conv.padding[i] for i in spatial]
            landed += all(0 <= q[i] < out_shape[2 + i] for i in spatial)
    return x_shape[0] * conv.in_channels * (conv.out_channels // conv.groups) * landed


def ones_oracle_macs(conv: nn.Module, x_shape: tuple[int, ...]) -> int:
    """torch's own kernel on ones (bias off): each MAC contributes 1 to the sum of the output."""
    ones = type(conv)(
        conv.in_channels,
        conv.out_channels,
        conv.kernel_size,
        stride=conv.stride,
        padding=conv.padding,
        output_padding=conv.output_padding,
        groups=conv.groups,
        dilation=conv.dilation,
        bias=False,
        dtype=torch.float64,
    )
    with torch.no_grad():
        ones.weight.fill_(1.0)
        return int(ones(torch.ones(x_shape, dtype=torch.float64)).sum().item())


CASES = [
    # (dims, cin, cout, kernel, stride, padding, output_padding, dilation, groups, spatial size)
    (2, 8, 16, 4, 2, 1, 0, 1, 1, 16),  # the DCGAN/U-Net upsampler
    (2, 4, 6, 3, 1, 0, 0, 1, 1, 5),
    (2, 4, 6, 3, 2, 1, 1, 1, 2, 7),
    (2, 6, 4, 3, 3, 2, 2, 2, 2, 6),
    (2, 3, 3, 5, 1, 3, 0, 1, 3, 4),  # padding crops the output to 2x2
    (1, 4, 4, 3, 2, 1, 1, 3, 4, 9),  # depthwise, dilated
    (3, 2, 4, 2, 2, 0, 1, 1, 1, 3),
]


@pytest.mark.parametrize("dims,cin,cout,kernel,stride,padding,out_pad,dilation,groups,size", CASES)
def test_transposed_conv_macs_are_exact_conventional_beside_and_the_ir_is_validated(
    dims: int,
    cin: int,
    cout: int,
    kernel: int,
    stride: int,
    padding: int,
    out_pad: int,
    dilation: int,
    groups: int,
    size: int,
) -> None:
    conv = TRANSPOSED[dims](
        cin, cout, kernel, stride, padding, out_pad, groups=groups, dilation=dilation, bias=True
    )
    x = torch.randn(2, cin, *([size] * dims))
    out_shape = tuple(conv(x).shape)
    want = brute_force_macs(conv, tuple(x.shape), out_shape)
    assert want == ones_oracle_macs(conv, tuple(x.shape))  # the two oracles agree
    for frontend in ("default", "auto"):
        report = analyze(conv, [x], hw="H200", frontend=frontend)
        assert report.macs == {"float32": want}, frontend
        # conventional (FlopCounterMode's formula): every input pixel times every tap, cropped ones too
        assert report.flops_conventional == flop_counter_flops(conv, [x], "meta")
        assert sum(report.macs_conventional.values()) >= want
        assert report.validated, report.validation.reason  # IR einsum vs torch on random values
        assert report.other_flops == math.prod(out_shape)  # the bias epilogue
        node = next(n for n in report.graph.nodes if isinstance(n, EinsumNode))
        assert node.points() == want


def test_the_upsampler_that_was_counted_over_the_full_rectangle() -> None:
    conv = nn.ConvTranspose2d(8, 16, 4, stride=2, padding=1, bias=False)
    x = torch.randn(1, 8, 16, 16)
    report = analyze(conv, [x], hw="H200")
    full = 8 * 16 * 16 * 16 * 4 * 4  # the old count: every (pixel, tap) pair
    assert report.macs_conventional == {"float32": full}
    # per dimension the border pixels lose one tap each to padding=1: (16*4 - 2)/(16*4) squared
    assert report.macs == {"float32": 8 * 16 * (16 * 4 - 2) ** 2}
    assert report.macs["float32"] < full
    # the issue's figures (491,520 counted vs 447,488 exact): 256 channel pairs on a 10x12 input
    issue = analyze(nn.ConvTranspose2d(16, 16, 4, 2, 1, bias=False), [torch.randn(1, 16, 10, 12)], hw="H200")
    assert issue.macs == {"float32": 447_488} and issue.macs_conventional == {"float32": 491_520}
    assert issue.validated, issue.validation.reason


def test_a_wrong_transposed_lowering_fails_the_gate() -> None:
    from neurips26.methods.solar import rules, rules_convolution

    conv = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, bias=False)
    original = rules_convolution._transposed_convolution_node

    def flipped_kernel(call: rules.OpCall, target: str) -> EinsumNode:
        node = original(call, target)
        x, w = node.operands
        flipped = (
            w.index[0],
            w.index[1],
            *[Affine(((a.ranks[0], -1),), call.args[1].shape[-1] - 1) for a in w.index[2:]],
        )
        node.operands = [x, rules.Access(w.value, flipped)]
        return node

    rules_convolution._transposed_convolution_node = flipped_kernel
    try:
        assert not analyze(conv, [torch.randn(1, 3, 5, 5)], hw="H200").validated
    finally:
        rules_convolution._transposed_convolution_node = original
    assert analyze(conv, [torch.randn(1, 3, 5, 5)], hw="H200").validated


@settings(max_examples=40, deadline=None)
@given(
    extents=st.lists(st.integers(1, 6), min_size=4, max_size=4),
    coeffs=st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-6, 6)), min_size=1, max_size=4
    ),
    pairs=st.lists(st.sampled_from([(0, 1), (2, 3), (1, 2)]), min_size=1, max_size=4),
)
def test_point_count_over_independent_guard_groups_equals_brute_force(
    extents: list[int], coeffs: list[tuple[int, int, int]], pairs: list[tuple[int, int]]
) -> None:
    names = ["a", "b", "c", "d"]
    guards = [
        Affine(((names[i], ca), (names[j], cb)), c0)
        for (ca, cb, c0), (i, j) in zip(coeffs, pairs, strict=False)
    ]
    brute = sum(
        all(sum(c * point[names.index(r)] for r, c in g.terms) + g.const >= 0 for g in guards)
        for point in itertools.product(*[range(e) for e in extents])
    )
    assert count_domain_points(dict(zip(names, extents, strict=True)), guards) == brute
