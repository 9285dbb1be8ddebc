"""STParOpt: frontends, the generator's labels, the instrumented profiler, bad input."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.stparopt.frontend import parse_function, parse_source, pycparser_loops
from neurips26.methods.stparopt.loopgen import FAMILIES, generate_dataset, generate_program
from neurips26.methods.stparopt.profiler import ProfileJob, exhaustive_labels, profile_loops, run_jobs
from neurips26.methods.stparopt.programs import ArgSpec, validate_args

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to profile")

KERNEL = """
void kernel(int n, float *a, const float *b, const int *idx, float *out) {
  float t;
  int p = 0;
  for (int i = 0; i < n; i++) {
    t = b[i] * 2.0f;
    a[idx[i]] += t;
    out[0] += a[i];
    p = idx[p];
  }
  for (int i = 1; i <= n - 1; i += 2) a[i] = a[i - 1] + b[i];
}
"""


def test_frontend_finds_loops_sites_and_scalar_classes() -> None:
    f = parse_function(KERNEL)
    assert [p.name for p in f.params] == ["n", "a", "b", "idx", "out"]
    first, second = f.loops
    assert (first.var, first.lower, first.upper, first.step) == ("i", "0", "n", 1)
    assert (second.lower, second.upper, second.step) == ("1", "(n - 1) + 1", 2)
    kinds = {(s.text, s.kind, s.indirect) for s in first.sites}
    assert ("a[idx[i]]", "update", True) in kinds and ("out[0]", "update", False) in kinds
    assert ("b[i]", "read", False) in kinds
    assert first.private_scalars == ["t"] and first.carried_scalars == ["p"]


def test_pycparser_frontend_agrees_with_tree_sitter() -> None:
    for program in generate_dataset(len(FAMILIES), seed=3):
        ours = [loop.line for loop in parse_function(program.source).loops]
        assert pycparser_loops(program.source)[program.function] == ours
    assert pycparser_loops(KERNEL)["kernel"] == [loop.line for loop in parse_function(KERNEL).loops]


def test_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ValueError, match=r"line 3, column \d+"):
        parse_source("void f(int n, float *a) {\n  for (int i = 0; i < n; i++)\n    a[i] = ;\n}\n")
    with pytest.raises(ValueError, match="function='g' not found"):
        parse_function(KERNEL, "g")
    with pytest.raises(TypeError, match="source must be a str"):
        parse_source(b"void f() {}")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pycparser"):
        pycparser_loops("void f(int n) { undeclared_t x; }")


def test_unmappable_loops_are_marked() -> None:
    source = (
        "void f(int n, float *a) {\n  for (int i = 0; i < n; i++) { if (a[i] < 0) break; a[i] = 1; }\n"
        "  while (n) n--;\n}\n"
    )
    loop = parse_function(source).loops[0]
    assert "break" in loop.unsupported
    odd = parse_function("void f(int n, float *a) { for (int i = n; i > 0; i--) a[i] = 0; }").loops[0]
    assert "canonical" in odd.unsupported


def test_args_must_match_the_signature() -> None:
    params = parse_function(KERNEL).params
    good = [
        ArgSpec("n", "int", "size"),
        ArgSpec("a", "float", "array"),
        ArgSpec("b", "float", "array"),
        ArgSpec("idx", "int", "perm"),
        ArgSpec("out", "float", "array"),
    ]
    validate_args(params, good)
    with pytest.raises(ValueError, match="do not match the signature"):
        validate_args(params, good[:-1])
    with pytest.raises(ValueError, match=r"args\['a'\]: parameter is a pointer"):
        validate_args(params, [good[0], ArgSpec("a", "float", "scalar"), *good[2:]])
    with pytest.raises(ValueError, match="kind must be one of"):
        ArgSpec("a", "float", "matrix")


def test_generator_labels_equal_the_exhaustive_check() -> None:
    programs = [
        generate_program(f, np.random.default_rng(k), name=f"k{k}_{i}")
        for k in range(3)
        for i, f in enumerate(FAMILIES)
    ]
    items = [(p.source, p.function, 0, p.args) for p in programs]
    assert exhaustive_labels(items, n=64, seeds=(1, 2)) == [p.label for p in programs]


@pytest.mark.parametrize(
    "family,variants",
    [
        ("indirect_store", ("perm", "repeats")),
        ("alias", ("disjoint", "overlap")),
        ("conditional", ("silent", "fires")),
    ],
)
def test_same_source_different_label_by_data(family: str, variants: tuple[str, str]) -> None:
    one = generate_program(family, np.random.default_rng(5), data=variants[0])
    two = generate_program(family, np.random.default_rng(5), data=variants[1])
    assert one.source == two.source and (one.label, two.label) == (1, 0)


@settings(max_examples=12, deadline=None)
@given(st.integers(-3, 4), st.integers(0, 5), st.integers(3, 60))
def test_strides_of_affine_accesses_are_recovered_exactly(c: int, d: int, n: int) -> None:
    offset = d + 3 * n  # keeps c*i + d in range for negative c
    source = (
        f"void s(int n, float *a, float *b) {{ for (int i = 0; i < n; i++) b[i] = a[{c} * i + {offset}]; }}"
    )
    args = [
        ArgSpec("n", "int", "size"),
        ArgSpec("a", "float", "array", scale=8, pad=offset + 8),
        ArgSpec("b", "float", "array"),
    ]
    profile = profile_loops([(source, "s", 0, args)], n=n, runs=1, seed=1)[0]
    read = profile.sites[1]
    bucket = {0: 0, 1: 1, -1: 2}.get(c, 3)
    expected = [0] * 5
    expected[bucket] = n - 1
    assert read["hist"] == expected
    assert read["span"] == abs(c) * (n - 1)
    assert profile.sites[0]["hist"] == [0, n - 1, 0, 0, 0]


def test_reservoir_and_sampling_keep_memory_bounded() -> None:
    source = "void s(int n, float *a, const float *b) { for (int i = 0; i < n; i++) a[i + 1] = a[i] + b[i]; }"
    args = [
        ArgSpec("n", "int", "size"),
        ArgSpec("a", "float", "array", pad=1),
        ArgSpec("b", "float", "array"),
    ]
    small = profile_loops([(source, "s", 0, args)], n=500, runs=1, seed=1, shadow=4096)[0]
    large = profile_loops([(source, "s", 0, args)], n=200_000, runs=1, seed=1, shadow=256)[0]
    assert small.rate == 1.0 and small.raw == 499
    assert large.rate < 0.01  # the table (512 slots) sampled the addresses instead of growing
    assert profile_loops([(source, "s", 0, args)], n=500, runs=1, seed=1, shadow=256)[0].raw == pytest.approx(
        499, rel=0.5
    )
    assert large.observed < 0.1 * large.trips  # bursty tracing: warm-up, then 1 burst in 32
    assert large.raw == pytest.approx(large.observed, rel=0.5)  # one RAW per traced iteration, rescaled
    assert large.sites[0]["sample"] == 32  # reservoir size, whatever the trip count


def test_dependence_distances_equal_islpy() -> None:
    islpy = pytest.importorskip("islpy")
    n = 40
    cases = [(1, 0, 1, 3), (2, 0, 1, 0), (1, 5, 1, 0), (3, 1, 2, 4), (2, 1, 2, 0)]
    for c_write, d_write, c_read, d_read in cases:
        body = f"a[{c_write} * i + {d_write}] = a[{c_read} * i + {d_read}] * 0.5f;"
        source = f"void q(int n, float *a) {{ for (int i = 0; i < n; i++) {body} }}"
        args = [ArgSpec("n", "int", "size"), ArgSpec("a", "float", "array", scale=4, pad=16)]
        record = run_jobs([ProfileJob("x", source, "q", 0, args, n, 3)], exhaustive=True)["x"]
        pairs = islpy.Set(
            f"{{ [d] : exists i, j : 0 <= i < j < {n} and d = j - i and "
            f"({c_write} i + {d_write} = {c_read} j + {d_read} or "
            f"{c_read} i + {d_read} = {c_write} j + {d_write}) }}"
        )
        if pairs.is_empty():
            assert record["min_dist"] == -1
        else:
            assert (
                record["min_dist"]
                == pairs.lexmin().sample_point().get_coordinate_val(islpy.dim_type.set, 0).to_python()
            )
