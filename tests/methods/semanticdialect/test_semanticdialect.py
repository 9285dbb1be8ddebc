"""SemanticDialect codec: formatbooks, LUT selection, packing, MXFP4 equivalence, bad input."""

import importlib.util

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.semanticdialect import (
    DIALECT_FP4,
    Formatbook,
    SemanticDialectConfig,
    dequantize_blocks,
    pack,
    quantize_blocks,
    selection_error_bound,
    unpack,
)
from neurips26.methods.semanticdialect import codec as codec_module
from neurips26.methods.semanticdialect.codec import (
    blockify,
    brute_force_errors,
    fake_quantize_blocks,
    shared_exponents,
)

HAS_TORCHAO = importlib.util.find_spec("torchao") is not None


def _true_errors(x: torch.Tensor, book: Formatbook) -> tuple[torch.Tensor, torch.Tensor]:
    """Naive oracle: per block and dialect, the squared error of exact nearest rounding (loops)."""
    blocks, _ = blockify(x.float(), 32)
    exponents = shared_exponents(blocks)
    flat = blocks.reshape(-1, 32)
    out = torch.zeros(flat.shape[0], len(book), dtype=torch.float64)
    for b, block in enumerate(flat):
        scale = 2.0 ** float(exponents.reshape(-1)[b])
        for d, mags in enumerate(book.dialects):
            for v in block.tolist():
                s = abs(v) / scale
                out[b, d] += min((s - m) ** 2 for m in mags) * scale**2
    return out, exponents


def test_dialect_fp4_table_shape():
    book = Formatbook.dialect_fp4()
    assert len(book) == 16 and book.id_bits == 4
    assert all({0.0, 0.5, 1.0, 1.5, 2.0}.issubset(d) for d in DIALECT_FP4)
    assert max(max(d) for d in DIALECT_FP4) == 7.5
    for size in (32, 64, 128):
        grown = Formatbook.extended(size)
        assert len(set(grown.dialects)) == size and grown.dialects[:16] == book.dialects


@pytest.mark.skipif(not HAS_TORCHAO, reason="torchao is not installed (pip install 'neurips26[quant]')")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_e2m1_book_equals_torchao_mxfp4_bit_for_bit(seed):
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 128, generator=gen) * torch.exp2(
        torch.randint(-20, 20, (64, 1), generator=gen).float()
    )
    x[0] = 0.0  # all-zero block
    x[1, :32] = 3.0  # constant block
    x[2, :8] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.9])  # RNE ties
    ours = dequantize_blocks(quantize_blocks(x, Formatbook.mxfp4()))
    reference = MXTensor.to_mx(x, torch.float4_e2m1fn_x2, block_size=32).dequantize(torch.float32)
    assert torch.equal(ours, reference)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 31), min_size=31, max_size=31),
    st.lists(st.booleans(), min_size=32, max_size=32),
    st.integers(-10, 10),
    st.integers(16, 31),
)
def test_lut_picks_brute_force_dialect_on_grid_aligned_blocks(bins, signs, exponent, top):
    """Scaled magnitudes on the intermediate grid's bin centres: the LUT error is exact."""
    centres = (torch.tensor([*bins, top]).float() + 0.5) * 0.25  # top bin >= 16 fixes the exponent
    values = centres * torch.where(torch.tensor(signs), -1.0, 1.0) * 2.0**exponent
    x = values[None]
    book = Formatbook.extended(64)
    lut = quantize_blocks(x, book).dialects
    exponents = shared_exponents(blockify(x, 32)[0])
    brute = brute_force_errors(blockify(x, 32)[0], book, exponents).argmin(-1)
    assert torch.equal(lut, brute)


def _check_selection_within_bound(x: torch.Tensor, book: Formatbook) -> None:
    true, _ = _true_errors(x, book)
    picked = quantize_blocks(x, book).dialects.reshape(-1)
    best = true.min(dim=1).values
    got = true[torch.arange(true.shape[0]), picked]
    bound = selection_error_bound(blockify(x, 32)[0], book).reshape(-1).double()
    assert bool((got - best <= bound + 1e-9 * best.clamp_min(1)).all()), (got - best, bound)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([1.0, 1e-3, 50.0]))
def test_lut_selection_never_worse_than_the_intermediate_grid_bound(seed, scale):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 64, generator=gen) ** 3 * scale
    _check_selection_within_bound(x, Formatbook.dialect_fp4())


def test_idea_off_lut_selection_without_the_lut_errors_breaks_the_bound(monkeypatch):
    """Idea off: LUT errors replaced by zeros (a fixed dialect for every block) violates the bound."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(8, 64, generator=gen) ** 3
    last = torch.arange(16.0).flip(0)  # every block takes the last dialect, {..., 3, 4}
    monkeypatch.setattr(codec_module, "block_errors", lambda bins, lut: last.expand(*bins.shape[:-1], 16))
    with pytest.raises(AssertionError):
        _check_selection_within_bound(x, Formatbook.dialect_fp4())


def test_quantize_by_gather_equals_exact_nearest_rounding():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 96, generator=gen) * 3
    x[0, :32] = torch.arange(32) * 0.25  # every bin edge
    book = Formatbook.dialect_fp4()
    q = quantize_blocks(x, book)
    values = dequantize_blocks(q)
    scale = torch.ldexp(torch.ones(()), q.exponents.float())[..., None].reshape(16, 3, 1)
    mags = book.magnitudes[q.dialects]  # (16, 3, 8)
    scaled = blockify(x, 32)[0].abs() / scale
    distance = (scaled[..., None] - mags[..., None, :]).abs()
    nearest = torch.gather(mags[..., None, :].expand_as(distance), -1, distance.argmin(-1, keepdim=True))
    nearest_even = distance.min(-1).values  # ties resolved by index parity: compare distances only
    got = (values.reshape(16, 3, 32).abs() / scale - scaled).abs()
    assert torch.allclose(got, nearest_even) and nearest.shape[-1] == 1


@pytest.mark.parametrize("n_dialects", [1, 16, 64])
@pytest.mark.parametrize("length", [32, 40, 96])
def test_pack_unpack_is_bit_exact_and_ledger_counts_the_bytes(n_dialects, length):
    book = Formatbook.mxfp4() if n_dialects == 1 else Formatbook.extended(n_dialects)
    x = torch.randn(6, length, generator=torch.Generator().manual_seed(length))
    q = quantize_blocks(x, book)
    packed = pack(q)
    back = unpack(packed)
    assert torch.equal(dequantize_blocks(back), dequantize_blocks(q))
    assert torch.equal(back.dialects, q.dialects) and torch.equal(back.exponents, q.exponents)
    buffers = (packed.codes, packed.exponents, packed.dialect_ids, packed.subbook_table)
    assert packed.total_bytes == sum(b.numel() * b.element_size() for b in buffers)
    n_blocks = 6 * ((length + 31) // 32)
    assert packed.ledger["codes"] == n_blocks * 16 and packed.ledger["exponents"] == n_blocks
    assert packed.ledger["dialect_ids"] == (n_blocks * book.id_bits + 7) // 8


def test_pack_with_seda_subbooks_round_trips():
    from neurips26.methods.semanticdialect.semantic import assign_subbooks, patch_clusters

    book = Formatbook.dialect_fp4()
    x = torch.randn(2 * 8, 64, generator=torch.Generator().manual_seed(1))
    clusters, n = patch_clusters(2, 8, 4)
    errors = brute_force_errors(blockify(x, 32)[0], book, shared_exponents(blockify(x, 32)[0]))
    subbooks = assign_subbooks(errors, clusters, n, 4)
    allowed = torch.zeros(n, 16, dtype=torch.bool).scatter_(1, subbooks, True)[clusters][:, None, :]
    q = quantize_blocks(x, book, allowed=allowed)
    packed = pack(q, subbooks, clusters)
    assert packed.id_bits == 2
    assert torch.equal(dequantize_blocks(unpack(packed)), dequantize_blocks(q))


@pytest.mark.parametrize("selection", ["lut", "brute_force"])
def test_fused_fake_quantization_equals_quantize_then_dequantize(selection):
    x = torch.randn(33, 70, generator=torch.Generator().manual_seed(2)) ** 3
    x[3] = 0.0
    book = Formatbook.extended(32)
    fused, dialects = fake_quantize_blocks(x, book, selection=selection)
    q = quantize_blocks(x, book, selection=selection)
    assert torch.equal(fused, dequantize_blocks(q)) and torch.equal(dialects, q.dialects)


def test_all_zero_and_constant_blocks_are_exact_where_representable():
    book = Formatbook.dialect_fp4()
    x = torch.zeros(3, 32)
    x[1] = 6.0
    x[2] = -0.375
    out = dequantize_blocks(quantize_blocks(x, book))
    assert torch.equal(out[0], torch.zeros(32)) and torch.equal(out[1], x[1]) and torch.equal(out[2], x[2])


def test_more_dialects_lower_the_error():
    """Idea (scaled formatbook): 64 LUT-selected dialects beat 16 and the one-dialect E2M1 book."""
    x = torch.randn(256, 128, generator=torch.Generator().manual_seed(0)) ** 3
    error = {}
    for name, book in {
        "e2m1": Formatbook.mxfp4(),
        "16": Formatbook.extended(16),
        "64": Formatbook.extended(64),
    }.items():
        error[name] = float(((dequantize_blocks(quantize_blocks(x, book)) - x) ** 2).mean())
    assert error["64"] < error["16"] < error["e2m1"]


@pytest.mark.parametrize(
    ("dialects", "message"),
    [
        (((0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.2),), "off the grid"),
        (((0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 4.0),), "duplicated"),
        (((0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0),), "off the grid"),
        ((DIALECT_FP4[0], DIALECT_FP4[0]), "same dialect twice"),
        (((0.0, 0.5, 1.0),), "8 magnitudes"),
    ],
)
def test_bad_formatbooks_name_the_argument(dialects, message):
    with pytest.raises(ValueError, match=f"dialects.*{message}|{message}"):
        Formatbook(dialects)


def test_bad_config_values_name_the_argument():
    with pytest.raises(ValueError, match="decomposition_ratio"):
        SemanticDialectConfig(decomposition_ratio=1.5)
    with pytest.raises(ValueError, match="seda_k"):
        SemanticDialectConfig(seda_k=65)
    with pytest.raises(ValueError, match="selection"):
        SemanticDialectConfig(selection="greedy")
    with pytest.raises(ValueError, match="intermediate_bits"):
        codec_module.build_lut(Formatbook.mxfp4(), 4)
