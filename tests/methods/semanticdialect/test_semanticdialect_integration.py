"""SemanticDialect's fake_quantize_dit_, SeDA, decomposition and temporal report on a tiny DiT (in code)."""

import copy
import importlib.util

import pytest
import torch
from torch import nn

from neurips26.methods.semanticdialect import (
    FormatConfig,
    SemanticDialectConfig,
    SemanticDialectQuantizer,
    TokenContext,
    assign_subbooks,
    fake_quantize_dit_,
    integration,
    quantize_,
    salient_tokens,
    temporal_report,
)
from neurips26.methods.semanticdialect import semantic as semantic_module
from neurips26.methods.semanticdialect.semantic import patch_clusters
from neurips26.methods.semanticdialect.tiny_vdit import TinyVDiT, TinyVDiTConfig

HAS_TORCHAO = importlib.util.find_spec("torchao") is not None
TINY = TinyVDiTConfig(frames=2, size=16, patch=4, dim=64, heads=2, blocks=1)  # 2 x 16 tokens


@pytest.fixture(scope="module")
def tiny_dit() -> TinyVDiT:
    torch.manual_seed(0)
    model = TinyVDiT(TINY).eval()
    with torch.no_grad():  # non-zero output head so the output depends on every layer
        model.proj_out_2.weight.normal_(0, 0.2)
    return model


def _quantized(model: nn.Module, config, **kwargs) -> nn.Module:
    """A fake-quantized deep copy (``fake_quantize_dit_`` works in place and returns None)."""
    copied = copy.deepcopy(model)
    fake_quantize_dit_(copied, config, **kwargs)
    return copied


def _inputs(batch: int = 2):
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(batch, 2, 16, 16, generator=gen), torch.full((batch,), 700.0), torch.tensor([3, 17]))


def _video_tokens(seed: int = 0, frames: int = 8, patches: int = 16, width: int = 64) -> torch.Tensor:
    """(frames * patches, width): each patch has its own statistics, slightly perturbed per frame."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(patches, width, generator=gen) ** 3
    frames_ = base[None] * (1 + 0.15 * torch.randn(frames, patches, 1, generator=gen))
    frames_ = frames_ + 0.3 * torch.randn(frames, patches, width, generator=gen)
    return frames_.reshape(frames * patches, width)


def test_quantization_off_equals_the_original_exactly(tiny_dit):
    off = SemanticDialectConfig(
        quantize_weights=False,
        quantize_activations=False,
        quantize_attention=False,
        decomposition_ratio=0.0,
        tokens_per_frame=16,
    )
    quantized = _quantized(tiny_dit, off)
    with torch.no_grad():
        assert torch.equal(quantized(*_inputs()), tiny_dit(*_inputs()))


@pytest.mark.parametrize("name", ["int4", "mxfp4", "nvfp4", "blockdialect"])
def test_baseline_formats_run_through_fake_quantize_dit_(tiny_dit, name):
    if name != "blockdialect" and not HAS_TORCHAO:
        pytest.skip("torchao is not installed (pip install 'neurips26[quant]')")
    quantized = _quantized(tiny_dit, FormatConfig(name, tokens_per_frame=16))
    with torch.no_grad():
        out, ref = quantized(*_inputs()), tiny_dit(*_inputs())
    assert torch.isfinite(out).all() and not torch.equal(out, ref)
    assert ((out - ref) ** 2).mean() < 0.2 * (ref**2).mean()


def test_semanticdialect_quantizes_every_linear_and_both_attention_products(tiny_dit):
    quantized = _quantized(tiny_dit, SemanticDialectConfig(tokens_per_frame=16))
    linears = [m for m in quantized.modules() if type(m) is nn.Linear]
    assert linears == []
    processor = quantized.transformer_blocks[0].attn1.processor
    assert type(processor).__name__ == "QuantAttnProcessor" and processor.p_quantizer is not None
    state = quantized._semanticdialect_state
    state.record = True
    with torch.no_grad():
        quantized(*_inputs())
        quantized(*_inputs())  # second call: the block's saliency from the first is used by Q/K/V
    assert 0 in state.saliency and state.saliency[0].shape == (2, 32)
    report = temporal_report(quantized)
    entry = report["transformer_blocks.0.attn1.to_q"]
    assert len(entry["frame_error"]) == 2 and len(entry["format_disagreement"]) == 1


def test_decomposition_ratio_zero_equals_no_decomposition():
    x = _video_tokens()
    salient = torch.ones(x.shape[0], dtype=torch.bool)
    none = SemanticDialectQuantizer(SemanticDialectConfig(seda=False, decomposition_ratio=0.0))(x)
    with_r0 = SemanticDialectQuantizer(SemanticDialectConfig(seda=False, decomposition_ratio=0.0))(
        x, TokenContext(salient=salient_tokens(torch.rand(1, x.shape[0]), 0.0).reshape(-1))
    )
    assert torch.equal(none, with_r0)
    residual = SemanticDialectQuantizer(SemanticDialectConfig(seda=False))(x, TokenContext(salient=salient))
    assert not torch.equal(none, residual)


def test_decomposition_raises_the_salient_rows_sqnr_and_only_theirs():
    """Idea: the residual term on salient rows cuts their error by far more than 4 bits' worth."""
    x = _video_tokens()
    mass = torch.rand(1, x.shape[0], generator=torch.Generator().manual_seed(5))
    salient = salient_tokens(mass, 0.25).reshape(-1)
    assert salient.sum() == 32 and bool(salient[mass.reshape(-1).topk(32).indices].all())
    q = SemanticDialectQuantizer(SemanticDialectConfig(seda=False))
    plain, decomposed = q(x), q(x, TokenContext(salient=salient))
    err = lambda y, rows: float(((y - x)[rows] ** 2).sum() / (x[rows] ** 2).sum())  # noqa: E731
    assert err(decomposed, salient) < 0.05 * err(plain, salient)
    assert torch.equal(decomposed[~salient], plain[~salient])


def _attention_mass_received(model: TinyVDiT) -> torch.Tensor:
    """(B, N) attention mass each token receives in block 0 of the unquantized model, from its own
    q and k (averaged over heads): the reference the quantized model's salient rows must follow."""
    attention, seen = model.transformer_blocks[0].attn1, {}

    def grab(module, args, kwargs):
        seen["hidden"] = args[0] if args else kwargs["hidden_states"]

    handle = attention.register_forward_pre_hook(grab, with_kwargs=True)
    with torch.no_grad():
        model(*_inputs())
        handle.remove()
        hidden = seen["hidden"]
        b, n, _ = hidden.shape
        q, k = (
            t.view(b, n, attention.heads, -1).transpose(1, 2)
            for t in (attention.to_q(hidden), attention.to_k(hidden))
        )
        return ((q @ k.transpose(-1, -2)) * attention.scale).softmax(dim=-1).sum(dim=-2).mean(dim=1)


@pytest.mark.parametrize("saliency_wired", [True, False], ids=["wired", "saliency_random"])
def test_idea_decomposed_rows_are_the_tokens_receiving_the_most_attention(
    tiny_dit, monkeypatch, saliency_wired
):
    """Central idea (attention-guided decomposition), through ``fake_quantize_dit_``: the rows that get the
    residual 4-bit term (error far below the others) are the tokens receiving the most attention mass. The
    negative case is issue 43's break: the saliency ``fake_quantize_dit_`` hands to ``salient_tokens``
    replaced by random numbers; the decomposed rows then overlap the most-attended tokens only by chance
    (ratio 0.25)."""
    if not saliency_wired:
        select = integration.salient_tokens
        noise = torch.Generator().manual_seed(0)
        monkeypatch.setattr(
            integration,
            "salient_tokens",
            lambda mass, ratio: select(torch.rand(mass.shape, generator=noise), ratio),
        )
    model = _quantized(tiny_dit, SemanticDialectConfig(decomposition_ratio=0.25, tokens_per_frame=16))
    layer, seen = (
        model.transformer_blocks[0].attn1.to_out[0],
        {},
    )  # its input comes after this step's attention
    quantizer = layer.act_quantizer

    def spy(x, context=None):
        seen["x"], seen["xq"] = x, quantizer(x, context)
        return seen["xq"]

    layer.act_quantizer = spy
    with torch.no_grad():
        model(*_inputs())
    x, xq = seen["x"], seen["xq"]
    error = ((xq - x) ** 2).sum(-1) / (x**2).sum(-1)  # (B, N) relative error per row
    count = 8  # ceil(0.25 * 32 tokens)
    decomposed = error.topk(count, dim=-1, largest=False).indices
    attended = _attention_mass_received(tiny_dit).topk(count, dim=-1).indices
    overlap = sum(len(set(d.tolist()) & set(a.tolist())) for d, a in zip(decomposed, attended, strict=True))
    overlap /= decomposed.numel()
    assert (overlap > 0.6) == saliency_wired, overlap


def test_seda_with_k_equal_to_the_book_size_equals_no_seda():
    x = _video_tokens()
    ids, n = patch_clusters(1, x.shape[0], 16)
    plain = SemanticDialectQuantizer(SemanticDialectConfig(seda=False, decomposition_ratio=0))(x)
    full = SemanticDialectQuantizer(SemanticDialectConfig(seda_k=64, decomposition_ratio=0))(
        x, TokenContext(ids, n)
    )
    assert torch.equal(plain, full)
    errors = torch.rand(x.shape[0], 2, 16)
    assert sorted(assign_subbooks(errors, ids, n, 16)[0].tolist()) == list(range(16))


def _disagreement(config: SemanticDialectConfig, x: torch.Tensor) -> float:
    ids, n = patch_clusters(1, x.shape[0], 16)
    q = SemanticDialectQuantizer(config)
    q(x, TokenContext(ids, n))
    d = q.stats.last_dialects.reshape(8, 16, -1)
    return float((d[1:] != d[:-1]).float().mean())


def test_seda_makes_formats_agree_across_frames():
    """Idea: patch clusters with 2-dialect sub-books cut cross-frame format disagreement a lot."""
    x = _video_tokens()
    on = _disagreement(SemanticDialectConfig(seda_k=2, decomposition_ratio=0), x)
    off = _disagreement(SemanticDialectConfig(seda=False, decomposition_ratio=0), x)
    assert on < 0.7 * off


def test_idea_off_seda_with_clusters_ignored_fails_the_agreement_test(monkeypatch):
    monkeypatch.setattr(semantic_module.SemanticDialectQuantizer, "_subbook_mask", lambda self, c, r: None)
    with pytest.raises(AssertionError):
        test_seda_makes_formats_agree_across_frames()


def test_subbook_greedy_is_optimal_for_k_one():
    errors = torch.rand(12, 3, 8, generator=torch.Generator().manual_seed(0))
    clusters = torch.arange(12) % 3
    chosen = assign_subbooks(errors, clusters, 3, 1)[:, 0]
    totals = torch.zeros(3, 8).index_add_(0, clusters, errors.sum(1))
    assert torch.equal(chosen, totals.argmin(1))


def test_non_finite_activations_are_counted_and_passed_through():
    x = torch.randn(4, 40)  # 40: padded to 64 inside
    x[0, 3], x[2, 39] = float("nan"), float("inf")
    q = SemanticDialectQuantizer(SemanticDialectConfig(seda=False))
    out = q(x)
    assert q.stats.non_finite == 2 and out.shape == x.shape
    assert torch.isnan(out[0, 3]) and torch.isinf(out[2, 39])
    assert torch.isfinite(out[1]).all()


def test_bad_input_names_the_argument(tiny_dit):
    with pytest.raises(ValueError, match=r"nn\.Linear"):
        fake_quantize_dit_(nn.Sequential(nn.ReLU()), SemanticDialectConfig())
    with pytest.raises(TypeError, match="config"):
        _quantized(tiny_dit, {"bits": 4})
    with pytest.raises(ValueError, match="name"):
        FormatConfig("fp3")
    with pytest.raises(ValueError, match="ratio"):
        salient_tokens(torch.rand(1, 8), 1.5)
    with pytest.raises(ValueError, match="k must"):
        assign_subbooks(torch.rand(4, 1, 16), torch.zeros(4, dtype=torch.long), 1, 17)


def test_kmeans_seda_clusters_the_block_inputs(tiny_dit):
    config = SemanticDialectConfig(seda_clustering="kmeans", seda_clusters=4, tokens_per_frame=16)
    model = _quantized(tiny_dit, config)
    with torch.no_grad():
        out = model(*_inputs())
    ids, n_clusters = model._semanticdialect_state.kmeans[0]
    assert n_clusters == 8 and ids.shape == (64,) and int(ids[:32].max()) < 4 <= int(ids[32:].min())
    assert torch.isfinite(out).all()


def test_quantize_is_a_deprecated_alias_that_returns_the_model(tiny_dit):
    config = FormatConfig("blockdialect", tokens_per_frame=16)
    model = copy.deepcopy(tiny_dit)
    with pytest.warns(DeprecationWarning, match="use fake_quantize_dit_"):
        assert quantize_(model, config) is model
    assert isinstance(model.proj_out_2, integration.FakeQuantLinear)
    assert fake_quantize_dit_(copy.deepcopy(tiny_dit), config) is None
