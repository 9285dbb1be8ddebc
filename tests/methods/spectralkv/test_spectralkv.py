"""SpectralKV: budgets, pivoting, the press on a tiny Llama, the ledger and bad input."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kvpress")
scipy_linalg = pytest.importorskip("scipy.linalg")

from transformers import DynamicCache  # noqa: E402

from neurips26.methods.spectralkv import (  # noqa: E402
    BudgetProfile,
    SpectralKVPress,
    allocate_layer_budgets,
    attention_concentration,
    calibrate_budget_profile,
    ledger_from_cache,
    metric_features,
    near_duplicate_share,
    pivoted_selection,
    select_coreset,
)
from neurips26.methods.spectralkv.config import RANK_STRATEGIES  # noqa: E402
from neurips26.methods.spectralkv.features import forced_token_mask  # noqa: E402
from neurips26.methods.spectralkv.press_eval import compressed_prefill  # noqa: E402
from neurips26.zoo.builders import tiny_deepseek_v3, tiny_llama  # noqa: E402

README = Path(__file__).parents[3] / "src/neurips26/methods/spectralkv/README.md"


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=3)


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 256, (2, 300), generator=torch.Generator().manual_seed(0))


def prefill(model, ids, press):
    cache = DynamicCache()
    with torch.no_grad(), press(model):
        model(ids, past_key_values=cache)
    return cache


# --- layer budgets ---------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=12),
    floor=st.integers(0, 50),
    extra=st.integers(0, 400),
    fill=st.floats(0, 1),
)
def test_budgets_sum_exactly_and_respect_bounds(weights, floor, extra, fill):
    layers = len(weights)
    cap = floor + extra
    total = floor * layers + int(fill * extra * layers)
    budgets = allocate_layer_budgets(weights, total, [floor] * layers, [cap] * layers)
    assert int(budgets.sum()) == total
    assert bool((budgets >= floor).all()) and bool((budgets <= cap).all())
    for i in range(layers):  # more concentrated -> at least as many slots (up to one rounding token)
        for j in range(layers):
            if weights[i] > weights[j]:
                assert budgets[i] >= budgets[j] - 1


def test_budgets_follow_weights_and_water_fill_caps():
    budgets = allocate_layer_budgets([1.0, 3.0, 100.0], 300, [10, 10, 10], [200, 200, 120])
    assert budgets.tolist()[2] == 120  # capped, the overflow goes to the others in proportion
    assert budgets.sum() == 300 and budgets[1] > budgets[0]


@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(st.floats(0.01, 10, allow_nan=False), min_size=2, max_size=12),
    floors=st.lists(st.integers(0, 40), min_size=12, max_size=12),
    room=st.lists(st.integers(0, 300), min_size=12, max_size=12),
    fill=st.floats(0, 1),
)
def test_budgets_are_the_rounded_water_fill(weights, floors, room, fill):
    layers = len(weights)
    lo, hi = np.array(floors[:layers], float), np.array(floors[:layers], float) + room[:layers]
    total = int(lo.sum() + fill * (hi.sum() - lo.sum()))
    budgets = allocate_layer_budgets(weights, total, lo.astype(int).tolist(), hi.astype(int).tolist())
    t_lo, t_hi = 0.0, 1e6  # reference: bisection on the water level
    for _ in range(200):
        t = 0.5 * (t_lo + t_hi)
        t_lo, t_hi = (t, t_hi) if np.clip(t * np.array(weights), lo, hi).sum() < total else (t_lo, t)
    assert np.abs(budgets.numpy() - np.clip(t_hi * np.array(weights), lo, hi)).max() < 1 + 1e-6


def test_budgets_reject_impossible_totals():
    with pytest.raises(ValueError, match="total budget"):
        allocate_layer_budgets([1, 1], 10, [8, 8], [20, 20])
    with pytest.raises(ValueError, match="total budget"):
        allocate_layer_budgets([1, 1], 50, [8, 8], [20, 20])


def test_concentration_is_zero_for_uniform_and_one_for_one_hot():
    n = 16
    candidates = torch.ones(n, dtype=torch.bool)
    uniform = torch.full((1, 2, 4, n), 1 / n)
    one_hot = torch.zeros(1, 2, 4, n)
    one_hot[..., 3] = 1
    assert attention_concentration(uniform, candidates) == pytest.approx(0.0, abs=1e-9)
    assert attention_concentration(one_hot, candidates) == pytest.approx(1.0, abs=1e-9)


def test_concentration_from_logits_equals_the_one_from_attention():
    g = torch.Generator().manual_seed(14)
    logits = 4 * torch.randn(2, 4, 8, 50, generator=g)
    future = torch.ones(8, 50, dtype=torch.bool).triu(50 - 8 + 1)
    attention = torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
    candidates = forced_token_mask(50, 2, 8).logical_not()
    plain = attention_concentration(attention, candidates)
    assert 0.05 < plain < 0.95
    assert attention_concentration(attention, candidates, logits=logits) == pytest.approx(plain, abs=1e-5)
    logits[0, 1, 3, 0] = -300.0  # token 0 underflows in one row: log Z comes from the row's largest entry
    attention = torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
    plain = attention_concentration(attention, candidates)
    assert attention_concentration(attention, candidates, logits=logits) == pytest.approx(plain, abs=1e-5)
    scattered = candidates.clone()
    scattered[20] = False  # not one contiguous range: the masked path
    plain = attention_concentration(attention, scattered)
    assert attention_concentration(attention, scattered, logits=logits) == pytest.approx(plain, abs=1e-5)


# --- features and pivoting -------------------------------------------------------------------------------
@pytest.mark.parametrize("n_queries", [6, 12])  # fewer queries than head dims (Q k form) and more (M^1/2 k)
def test_metric_features_measure_mean_squared_logits(n_queries):
    g = torch.Generator().manual_seed(1)
    keys, values = torch.randn(1, 2, 10, 8, generator=g), torch.randn(1, 2, 10, 8, generator=g)
    queries = torch.randn(1, 2, n_queries, 8, generator=g)
    phi = metric_features(keys, values, queries)
    key_part, value_part = phi[..., :-8], phi[..., -8:]
    logits = keys @ queries.transpose(-1, -2)  # (1, 2, n, q)
    gram = key_part @ key_part.transpose(-1, -2)
    assert torch.allclose(gram, logits @ logits.transpose(-1, -2) / n_queries, rtol=1e-4, atol=1e-4)
    key_energy = key_part.pow(2).sum((-1, -2))
    assert torch.allclose(value_part.pow(2).sum((-1, -2)), key_energy, rtol=1e-4)


@pytest.mark.parametrize("n_queries", [6, 12])
@pytest.mark.parametrize("with_logits", [False, True])
@pytest.mark.parametrize(("compiled", "pool_factor"), [(False, 1.5), (True, 1.5), (True, None)])
def test_pool_first_candidates_equal_features_then_pool(n_queries, with_logits, compiled, pool_factor):
    """metric_candidates assembles only the pool's features: same pool and features as the long way."""
    from neurips26.methods.spectralkv.features import coreset_candidates, metric_candidates

    g = torch.Generator().manual_seed(5)
    keys, values = torch.randn(2, 2, 40, 8, generator=g), torch.randn(2, 2, 40, 8, generator=g)
    queries = torch.randn(2, 2, n_queries, 8, generator=g)  # grouped: 2 query heads x n_queries / 2 each
    logits = (queries @ keys.transpose(-1, -2) / math.sqrt(8)).reshape(2, 4, n_queries // 2, 40)
    scores, weights = torch.rand(2, 2, 40, generator=g), torch.rand(2, 2, 40, generator=g)
    forced = forced_token_mask(40, 2, 4)
    options = {"value_weight": 0.7, "score_power": 1.0}
    features = metric_features(keys, values, queries, scores=weights, **options)
    expected = coreset_candidates(features, scores, 12, forced, pool_factor=pool_factor)
    got = metric_candidates(
        keys,
        values,
        queries,
        scores,
        12,
        forced,
        pool_factor=pool_factor,
        feature_scores=weights,
        window_logits=logits if with_logits else None,
        compiled=compiled,
        **options,
    )
    assert torch.equal(got.index, expected.index) and torch.equal(got.forced, expected.forced)
    assert torch.allclose(got.scores, expected.scores)
    gram = got.features @ got.features.transpose(-1, -2)  # the key part may be rotated: compare Gram
    assert torch.allclose(gram, expected.features @ expected.features.transpose(-1, -2), rtol=1e-4, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, float("inf")]), min_size=1, max_size=30),
    data=st.data(),
)
def test_compiled_pool_takes_the_largest_energies_earliest_first_on_ties(values, data):
    from neurips26.methods.spectralkv.kernels import _largest

    size = data.draw(st.integers(1, len(values)))
    expected = np.sort(np.argsort(-np.array(values), kind="stable")[:size])
    assert _largest(np.array(values), size).tolist() == expected.tolist()


def _pivot_order(phi: torch.Tensor, k: int) -> list[int]:
    order: list[int] = []
    for steps in range(1, k + 1):
        picked, _ = pivoted_selection(phi[None], steps)
        order.append((set(torch.nonzero(picked[0]).squeeze(-1).tolist()) - set(order)).pop())
    return order


@settings(max_examples=25, deadline=None)
@given(n=st.integers(4, 24), dim=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_batched_pivoting_matches_lapack_geqp3(n, dim, seed):
    phi = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    k = min(n, dim)
    _, _, lapack = scipy_linalg.qr(phi.numpy().T, pivoting=True)
    assert _pivot_order(phi, k) == lapack[:k].tolist()


def test_pivoting_is_batched_over_heads():
    phi = torch.randn(3, 2, 20, 5, generator=torch.Generator().manual_seed(2))
    picked, exhausted = pivoted_selection(phi, 4)
    assert picked.shape == (3, 2, 20) and bool((picked.sum(-1) == 4).all()) and not exhausted.any()
    single, _ = pivoted_selection(phi[1, 1], 4)
    assert torch.equal(picked[1, 1], single)


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_pivoting_stops_at_the_feature_rank(block_size):
    phi = torch.randn(1, 30, 3, generator=torch.Generator().manual_seed(3))
    picked, exhausted = pivoted_selection(phi, 10, block_size=block_size)
    assert int(picked.sum()) == 3 and bool(exhausted.all())


@pytest.mark.parametrize("strategy", ["hybrid", "restart", "segments"])
@pytest.mark.parametrize(("block_size", "pool_factor"), [(1, None), (16, 2.0)])
def test_exact_duplicates_are_never_both_selected(strategy, block_size, pool_factor):
    g = torch.Generator().manual_seed(4)
    distinct = torch.randn(1, 2, 24, 6, generator=g)
    features = torch.cat([distinct, distinct[:, :, 4:20]], dim=2)  # tokens 24.. duplicate tokens 4..19
    scores = torch.rand(1, 2, 40, generator=g)
    forced = forced_token_mask(40, 1, 2)
    kept = select_coreset(
        features,
        scores,
        20,
        forced,
        strategy=strategy,
        block_size=block_size,
        pool_factor=pool_factor,
        segment_budget=4,  # several segments, so repeats in different segments are tested too
    )
    assert kept.shape == (1, 2, 20)
    for h, head in enumerate(kept[0]):
        rows = {tuple(features[0, h, i].tolist()) for i in head.tolist()}
        assert len(rows) == 20  # twenty distinct feature vectors: no pair of duplicates


def test_coreset_fills_budgets_beyond_the_rank_with_distinct_tokens():
    g = torch.Generator().manual_seed(5)
    features = torch.randn(1, 1, 64, 4, generator=g)
    kept = select_coreset(features, torch.rand(1, 1, 64, generator=g), 40, forced_token_mask(64, 2, 4))
    assert kept.shape == (1, 1, 40) and len(set(kept[0, 0].tolist())) == 40
    assert {0, 1, 60, 61, 62, 63} <= set(kept[0, 0].tolist())


def test_near_duplicate_share_counts_repeats_once():
    keys = torch.randn(1, 1, 6, 4, generator=torch.Generator().manual_seed(6))
    keys[0, 0, 5] = keys[0, 0, 1]
    assert near_duplicate_share(keys, keys.clone()) == pytest.approx(1 / 6)
    mask = torch.ones(1, 1, 6, dtype=torch.bool)
    mask[0, 0, 1] = False
    assert near_duplicate_share(keys, keys.clone(), mask=mask) == 0.0


# --- the press -------------------------------------------------------------------------------------------
def test_uniform_topk_without_sinks_equals_kvpress_snapkv(model, ids):
    from kvpress import SnapKVPress

    ours = prefill(model, ids, SpectralKVPress(0.75, budget_mode="uniform", selector="topk", n_sink=0))
    theirs = prefill(model, ids, SnapKVPress(compression_ratio=0.75, window_size=32, kernel_size=5))
    for layer in range(3):
        a, b = ours.layers[layer].keys, theirs.layers[layer].keys
        assert a.shape == b.shape
        assert torch.equal(a.sort(dim=2).values, b.sort(dim=2).values)  # same kept set (order differs)


@pytest.mark.parametrize("mode", ["entropy", "uniform", "static"])
@pytest.mark.parametrize("selector", ["coreset", "topk"])
def test_press_cache_matches_its_ledger(model, ids, mode, selector):
    profile = BudgetProfile([0.5, 1.0, 1.5]) if mode == "static" else None
    press = SpectralKVPress(0.8, budget_mode=mode, selector=selector, profile=profile)
    cache = prefill(model, ids, press)
    press.ledger.check()
    assert press.ledger.nominal_total == 3 * 2 * max(1, int(300 * (1 - 0.8)))  # kvpress's rounding
    assert [cache.layers[i].keys.shape[2] * 2 for i in range(3)] == press.ledger.per_layer()
    audit = ledger_from_cache(model, cache, 300, 0.8)
    assert audit.per_layer() == press.ledger.per_layer()
    if mode == "static":
        assert press.ledger.per_layer()[0] < press.ledger.per_layer()[2]


def test_press_generates_and_later_steps_are_not_compressed(model, ids):
    press = SpectralKVPress(0.5)
    with torch.no_grad(), press(model):
        out = model.generate(
            ids[:1], attention_mask=torch.ones_like(ids[:1]), max_new_tokens=4, do_sample=False
        )
    assert out.shape == (1, 304)
    assert press.ledger.total_kept == 3 * 2 * 150


def test_static_variant_never_holds_every_full_layer(model, ids):
    profile = calibrate_budget_profile(model, [ids[:1]])
    assert len(profile.weights) == 3 and math.isclose(float(np.mean(profile.weights)), 1.0, rel_tol=1e-4)
    static = compressed_prefill(model, ids, SpectralKVPress(0.75, budget_mode="static", profile=profile))
    dynamic = compressed_prefill(model, ids, SpectralKVPress(0.75))
    full = compressed_prefill(model, ids, None)
    assert dynamic.peak_cache_bytes == full.peak_cache_bytes
    assert static.peak_cache_bytes < 0.6 * full.peak_cache_bytes


def test_budget_profile_round_trip_and_errors(tmp_path):
    profile = BudgetProfile([0.7, 1.3], model_type="llama", calibration={"n_prompts": 1})
    path = profile.save(tmp_path / "profile.json")
    assert BudgetProfile.load(path) == profile
    with pytest.raises(ValueError, match="does not exist"):
        BudgetProfile.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid profile"):
        BudgetProfile.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="weights"):
        BudgetProfile([1.0, -1.0])


# --- bad input -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ratio", [1.0, -0.1, 1.5])
def test_compression_ratio_outside_range_is_rejected(ratio):
    with pytest.raises(ValueError, match=re.escape("compression_ratio must be in [0, 1)")):
        SpectralKVPress(ratio)


def test_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="budget_mode"):
        SpectralKVPress(0.5, budget_mode="pyramid")
    with pytest.raises(ValueError, match="profile"):
        SpectralKVPress(0.5, budget_mode="static")
    with pytest.raises(ValueError, match="window_size"):
        SpectralKVPress(0.5, window_size=0)


def test_budget_below_sinks_and_window_is_a_clear_error(model, ids):
    with pytest.raises(ValueError, match="below n_sink \\+ window_size"):
        prefill(model, ids, SpectralKVPress(0.95))


def test_context_shorter_than_the_budget_keeps_everything(model):
    short = torch.randint(0, 256, (1, 30), generator=torch.Generator().manual_seed(7))
    press = SpectralKVPress(0.5)
    cache = prefill(model, short, press)
    assert cache.layers[0].keys.shape[2] == 30
    assert "kept all" in press.ledger.records[0].note


def test_latent_attention_model_is_rejected():
    mla = tiny_deepseek_v3()
    press = SpectralKVPress(0.5)
    with pytest.raises(ValueError, match="no supported attention"), press(mla):
        pass


def test_profile_with_wrong_layer_count_is_rejected(model):
    press = SpectralKVPress(0.5, budget_mode="static", profile=BudgetProfile([1.0, 1.0]))
    with pytest.raises(ValueError, match="layer weights"), press(model):
        pass


def test_pivoting_from_rank_deficient_chosen_tokens_skips_their_span():
    g = torch.Generator().manual_seed(8)
    phi = torch.randn(1, 12, 5, generator=g)
    phi[0, 1] = 2 * phi[0, 0]  # the chosen set spans only 1 direction through two tokens
    chosen = torch.zeros(1, 12, dtype=torch.bool)
    chosen[0, :2] = True
    phi[0, 7] = -3 * phi[0, 0]  # in the chosen span: never worth picking
    picked, _ = pivoted_selection(phi, 4, chosen=chosen)
    assert int(picked.sum()) == 4 and not picked[0, :2].any() and not picked[0, 7]


@pytest.mark.parametrize("mode", ["uniform", "entropy"])
def test_press_runs_in_the_kvpress_pipeline(mode):
    from transformers import pipeline

    from neurips26 import zoo

    model, tokenizer = zoo.load("tiny-llama")
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer, device="cpu")
    context = README.read_text()[:2000]
    press = SpectralKVPress(0.5, budget_mode=mode)  # entropy: layers of different lengths
    answer = pipe(context, question="\n# Summary:", press=press, max_new_tokens=4)["answer"]
    assert isinstance(answer, str)
    press.ledger.check()


@pytest.mark.parametrize(
    ("block_size", "strategy"),
    [(1, "hybrid"), (16, "hybrid"), (16, "restart"), (1, "segments"), (16, "segments")],
)
def test_selection_batched_over_layers_equals_layer_by_layer(block_size, strategy):
    from neurips26.methods.spectralkv.core import select_from_candidates
    from neurips26.methods.spectralkv.features import coreset_candidates, stack_candidates

    g = torch.Generator().manual_seed(9)
    layers = [(torch.randn(2, 2, 200, 16, generator=g), torch.rand(2, 2, 200, generator=g)) for _ in range(3)]
    budgets = [40, 90, 25]
    forced = forced_token_mask(200, 4, 8)
    parts = [coreset_candidates(f, s, b, forced, 2.0) for (f, s), b in zip(layers, budgets, strict=True)]
    options = {"block_size": block_size, "strategy": strategy, "energy_tol": 0.01, "segment_budget": 16}
    together = select_from_candidates(stack_candidates(parts), **options)
    for k, (part, budget) in enumerate(zip(parts, budgets, strict=True)):
        alone = select_from_candidates(part, **options)
        assert torch.equal(together[2 * k : 2 * k + 2, :, :budget], alone)
        assert bool((together[2 * k : 2 * k + 2, :, budget:] == -1).all())


@pytest.mark.parametrize("block_size", [1, 16])
def test_restart_round_on_open_tokens_equals_pivoting_with_exclusions(block_size):
    """The restart round pivots over the rows still short and their open tokens only: same picks."""
    from neurips26.methods.spectralkv.core import _restart_round
    from neurips26.methods.spectralkv.duplicates import DuplicatePairs

    g = torch.Generator().manual_seed(11)
    features = torch.randn(2, 3, 120, 16, generator=g)
    kept = torch.rand(2, 3, 120, generator=g) < 0.3
    kept[0, 1, 5] = True
    features[0, 1, 60:70] = features[0, 1, 5]  # repeats of a kept token: closed
    kept[0, 1, 60:70] = False
    valid = torch.ones_like(kept)
    valid[1, :, 100:] = False  # padding
    need = torch.tensor([[10, 30, 25], [40, 5, 0]])
    unit = features / features.norm(dim=-1, keepdim=True)
    closed = kept | ~valid | DuplicatePairs.find(unit, valid, 0.999).of_any(kept)
    options = {"block_size": block_size, "energy_tol": 0.01}
    fast = _restart_round(features, closed, need, options)
    full, _ = pivoted_selection(features, need, excluded=closed, **options)
    assert torch.equal(fast, full)
    assert bool(fast.sum(-1).le(need).all()) and int(fast[1, 2].sum()) == 0
    assert not bool((fast & (kept | ~valid)).any()) and not bool(fast[0, 1, 60:70].any())


def test_one_segment_is_the_first_pivoting_round():
    """A share within ``segment_budget`` is one segment: the same picks as pivoting from the forced tokens."""
    from neurips26.methods.spectralkv.core import select_from_candidates
    from neurips26.methods.spectralkv.features import coreset_candidates

    g = torch.Generator().manual_seed(12)
    features, scores = torch.randn(1, 2, 90, 32, generator=g), torch.rand(1, 2, 90, generator=g)
    candidates = coreset_candidates(features, scores, 30, forced_token_mask(90, 2, 6))
    options = {"block_size": 1, "energy_tol": 0.0}
    one = select_from_candidates(candidates, strategy="segments", segment_budget=64, **options)
    assert torch.equal(one, select_from_candidates(candidates, strategy="hybrid", **options))


def test_segments_share_the_budget_along_the_context():
    """Each strided segment of the open tokens gets its share of the picks; closed tokens are never picked."""
    from neurips26.methods.spectralkv.core import _segment_picks

    g = torch.Generator().manual_seed(13)
    features = torch.randn(2, 1, 200, 64, generator=g)
    kept = torch.zeros(2, 1, 200, dtype=torch.bool)
    kept[..., :4] = True
    closed = kept.clone()
    closed[1, 0, 100:] = True  # padding or repeats: the second row has 96 open tokens
    need = torch.tensor([[70], [45]])
    picked = _segment_picks(features, kept, closed, need, 16, 0.0)
    assert not bool((picked & closed).any())
    assert picked.sum(-1).tolist() == [[70], [45]]
    # row 0: its 196 open tokens (4..199) dealt into 5 segments, 14 picks each
    assert [int(picked[0, 0, 4 + t :: 5].sum()) for t in range(5)] == [14] * 5
    with pytest.raises(ValueError, match="segment_budget"):
        _segment_picks(features, kept, closed, need, 0, 0.0)


@pytest.mark.parametrize("energy_tol", [0.0, 0.01])
def test_compiled_segment_pivoting_equals_the_batched_torch_one(energy_tol):
    from neurips26.methods.spectralkv.core import _segment_picks

    g = torch.Generator().manual_seed(15)
    features = torch.randn(1, 3, 150, 24, generator=g, dtype=torch.float64)
    # near-repeats (distinct, so no argmax ties): no residual left once one of them is picked
    features[0, 1, 40:60] = features[0, 1, 20] + 1e-9 * torch.randn(20, 24, generator=g, dtype=torch.float64)
    features[0, 2] *= torch.linspace(0.1, 3.0, 150, dtype=torch.float64).unsqueeze(-1)
    kept = torch.zeros(1, 3, 150, dtype=torch.bool)
    kept[..., :3] = kept[..., -8:] = True
    features[0, 0, 1] = 2 * features[0, 0, 0]  # a forced token in the span of another adds no direction
    closed = kept | (torch.rand(1, 3, 150, generator=g) < 0.2)
    need = torch.tensor([[70, 8, 0]])  # row 0's segments are small next to their picks, row 1's one is not
    fast = _segment_picks(features, kept, closed, need, 16, energy_tol)
    reference = _segment_picks(features, kept, closed, need, 16, energy_tol, compiled=False)
    assert torch.equal(fast, reference)
    assert not bool((fast & closed).any()) and int(fast[0, 2].sum()) == 0
    assert int(fast[0, 1, 40:60].sum() + fast[0, 1, 20]) <= 1


@pytest.mark.parametrize("energy_tol", [0.0, 0.01])
@pytest.mark.parametrize("seed", range(6))
def test_compiled_segments_selection_equals_the_torch_one(energy_tol, seed):
    """The whole "segments" selection compiled (repeats closed, pivoting, score fill with near-duplicates
    demoted, ordering) keeps the torch path's positions: repeats, score ties, padding, forced tokens."""
    from neurips26.methods.spectralkv.core import select_from_candidates
    from neurips26.methods.spectralkv.features import Candidates

    g = torch.Generator().manual_seed(seed)
    size = 60 + 40 * seed
    features = torch.randn(3, 2, size, 24, generator=g)
    source, target = torch.randint(0, size, (2, size // 3), generator=g)
    features[..., target, :] = features[..., source, :] * (1 + 0.01 * torch.rand(size // 3, 1, generator=g))
    scores = torch.rand(3, 2, size, generator=g)
    scores[..., :5] = scores[..., 5:10]  # ties in the fill
    valid = torch.rand(3, 2, size, generator=g) < 0.95  # padding of stacked pools
    forced = forced_token_mask(size, 3, 8).expand(3, 2, size) & valid
    budget = torch.randint(12, size // 2 + 13, (3, 2), generator=g)
    index = 3 * torch.arange(size).expand(3, 2, size).contiguous()
    candidates = Candidates(index, features, scores, forced, valid, budget)
    options = {"strategy": "segments", "energy_tol": energy_tol, "segment_budget": 16}
    fast = select_from_candidates(candidates, **options)
    assert torch.equal(fast, select_from_candidates(candidates, **options, compiled=False))


@pytest.mark.parametrize("n_queries", [6, 12])  # the logits as key part, and k S with more queries than dims
def test_candidates_of_all_layers_in_one_call_equal_the_stacked_layers(n_queries):
    from neurips26.methods.spectralkv.features import (
        metric_candidates,
        metric_candidates_of_layers,
        stack_candidates,
    )

    g = torch.Generator().manual_seed(16)
    layers = 3
    keys = [torch.randn(2, 2, 40, 8, generator=g) for _ in range(layers)]
    values = [torch.randn(2, 2, 40, 8, generator=g) for _ in range(layers)]
    queries = [torch.randn(2, 2, n_queries, 8, generator=g) for _ in range(layers)]
    logits = [
        (q @ k.transpose(-1, -2) / math.sqrt(8)).reshape(2, 4, n_queries // 2, 40)
        for q, k in zip(queries, keys, strict=True)
    ]
    scores, weights = torch.rand(layers, 2, 2, 40, generator=g), torch.rand(layers, 2, 2, 40, generator=g)
    budgets, forced = [12, 30, 6], forced_token_mask(40, 2, 4)
    options = {"pool_factor": 1.25, "value_weight": 0.7, "score_power": 1.0}
    together = metric_candidates_of_layers(
        keys,
        values,
        queries,
        scores,
        budgets,
        forced,
        feature_scores=weights,
        window_logits=logits,
        **options,
    )
    expected = stack_candidates(
        [
            metric_candidates(
                keys[k],
                values[k],
                queries[k],
                scores[k],
                budgets[k],
                forced,
                feature_scores=weights[k],
                window_logits=logits[k],
                **options,
            )
            for k in range(layers)
        ]
    )
    for name in ("index", "features", "scores", "forced", "valid", "budget"):
        assert torch.equal(getattr(together, name), getattr(expected, name)), name


@pytest.mark.parametrize("scale", [1.0, 4.0, 12.0])
def test_compiled_concentration_equals_the_torch_one(scale):
    g = torch.Generator().manual_seed(17)
    logits = scale * torch.randn(2, 4, 8, 300, generator=g)
    future = torch.ones(8, 300, dtype=torch.bool).triu(300 - 8 + 1)
    attention = torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
    logits[0, 1, 3, 0] = -300.0  # token 0 underflows in one row: log Z from the row's largest entry
    attention[0, 1, 3] = torch.softmax(logits[0, 1, 3].masked_fill(future[3], float("-inf")), dim=-1)
    candidates = forced_token_mask(300, 2, 8).logical_not()
    fast = attention_concentration(attention, candidates, logits=logits)
    assert fast == pytest.approx(
        attention_concentration(attention, candidates, logits=logits, compiled=False), abs=1e-6
    )


@pytest.mark.parametrize("strategy", RANK_STRATEGIES)
def test_half_precision_features_are_selected_like_float32_ones(strategy):
    g = torch.Generator().manual_seed(21)
    features, scores = torch.randn(1, 2, 120, 16, generator=g).bfloat16(), torch.rand(1, 2, 120, generator=g)
    forced = forced_token_mask(120, 2, 8)
    half = select_coreset(features, scores, 40, forced, strategy=strategy)
    assert torch.equal(half, select_coreset(features.float(), scores, 40, forced, strategy=strategy))


def _brute_force_pairs(
    unit: torch.Tensor, valid: torch.Tensor, threshold: float
) -> set[tuple[int, int, int]]:
    cos = unit.reshape(-1, *unit.shape[-2:]) @ unit.reshape(-1, *unit.shape[-2:]).transpose(-1, -2)
    ok = valid.reshape(-1, valid.shape[-1])
    hit = (cos >= threshold) & ok.unsqueeze(-1) & ok.unsqueeze(-2)
    hit &= ~torch.eye(hit.shape[-1], dtype=torch.bool)
    return {tuple(t) for t in torch.nonzero(hit).tolist()}


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 70),
    dim=st.integers(1, 6),
    clusters=st.integers(1, 6),
    threshold=st.sampled_from([0.9, 0.99, 0.999]),
    seed=st.integers(0, 10_000),
    compiled=st.booleans(),
)
def test_duplicate_pairs_equal_brute_force(n, dim, clusters, threshold, seed, compiled):
    """The banded search finds exactly the pairs an all-pairs comparison finds, clustered data too."""
    from neurips26.methods.spectralkv.duplicates import DuplicatePairs

    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2, clusters, dim, generator=g)
    pick = torch.randint(0, clusters, (2, n), generator=g)
    points = centres.gather(1, pick.unsqueeze(-1).expand(-1, -1, dim))
    points = points + 0.02 * torch.rand(1, generator=g) * torch.randn(2, n, dim, generator=g)
    unit = (points / points.norm(dim=-1, keepdim=True).clamp_min(1e-12)).reshape(1, 2, n, dim)
    valid = torch.rand(1, 2, n, generator=g) < 0.9
    pairs = DuplicatePairs.find(unit, valid, threshold, compiled=compiled)
    found = set(zip(pairs.row.tolist(), pairs.first.tolist(), pairs.second.tolist(), strict=True))
    expected = _brute_force_pairs(unit, valid, threshold)
    # the two sides compute cosines differently: only pairs within float rounding of the threshold may differ
    cos = unit.reshape(2, n, dim) @ unit.reshape(2, n, dim).transpose(-1, -2)
    assert all(abs(float(cos[r, i, j]) - threshold) < 1e-5 for r, i, j in found ^ expected)


def test_composes_with_kvpress_presses_when_last(model, ids):
    from kvpress import ComposedPress, KnormPress

    ours = SpectralKVPress(0.5)
    cache = prefill(model, ids, ComposedPress([KnormPress(0.5), ours]))
    kept = [cache.layers[i].keys.shape[2] for i in range(3)]
    assert sum(kept) == 3 * 75 and ours.ledger.per_layer() == [2 * k for k in kept]  # 300 -> 150 -> 75 each
    uniform = prefill(
        model, ids, ComposedPress([SpectralKVPress(0.5, budget_mode="uniform"), KnormPress(0.5)])
    )
    assert [uniform.layers[i].keys.shape[2] for i in range(3)] == [75, 75, 75]


def test_negative_gamma_reverses_the_budget_direction():
    # the 3-layer fixture's attention is near uniform in every layer (equal budgets); this model's is not
    model = tiny_llama(num_layers=4)
    ids = torch.randint(0, 256, (2, 400), generator=torch.Generator().manual_seed(3))
    forward, reverse = SpectralKVPress(0.75, gamma=1.0), SpectralKVPress(0.75, gamma=-1.0)
    prefill(model, ids, forward)
    prefill(model, ids, reverse)
    forward.ledger.check()
    reverse.ledger.check()
    order = np.argsort([forward.concentrations[i] for i in range(4)])
    most, least = int(order[-1]), int(order[0])
    assert forward.ledger.per_layer()[most] > forward.ledger.per_layer()[least]
    assert reverse.ledger.per_layer()[most] < reverse.ledger.per_layer()[least]
    with pytest.raises(ValueError, match="gamma"):
        SpectralKVPress(0.5, gamma=float("nan"))


def test_calibration_measures_prompts_a_compressing_press_would_reject(model):
    short = torch.randint(0, 256, (1, 60), generator=torch.Generator().manual_seed(10))  # 50% of 60 < 36
    profile = calibrate_budget_profile(model, [short])
    assert len(profile.weights) == 3 and all(math.isfinite(w) for w in profile.weights)


def test_every_claim_names_a_contrast_the_default_profile_runs():
    """Issue #48: each claim's known-good and known-bad systems are in the profiles that judge it, and the
    in-window probe (where the presses have headroom) is measured in default."""
    from neurips26.methods.spectralkv.experiment import EXPERIMENT

    default = EXPERIMENT.profile("default")
    config = EXPERIMENT.config_for(default, {}, {})
    assert "window" in config.probe_placements
    for claim in EXPERIMENT.claims:
        assert claim.contrast is not None and set(claim.contrast) <= set(default.systems), claim.text
    assert EXPERIMENT.floor_of("retrieval_acc") == "random"
    assert EXPERIMENT.floor_of("kv_window_acc") is None  # TOVA at 0 there must not void the window claims
